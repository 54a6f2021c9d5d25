"""The fit engine's own rules, on the local engine: a fit in place is kept only when it is this
fit, a lost fit is named once the others have finished, and the engine is one of four."""

from __future__ import annotations

import shutil

import dagster as dg
import pytest

from sphr.errors import ConfigError
from sphr.train.config import TrainConfig
from sphr.train.pipes_entry import CONFIG_EXTRA
from sphr.train.run import completed_fit, run_train
from sphr_dagster.fits import Fit, FitEngine


def tiny(**over) -> TrainConfig:
    return TrainConfig.profile("demo", epochs=1, batch_size=512, **over)


def test_a_fit_in_place_counts_only_for_its_own_config_and_data(cohorts_dir, tmp_path):
    cohort, out = cohorts_dir / "female", tmp_path / "fit"
    assert completed_fit(cohort, out, tiny()) is None
    run_train(cohort, out, tiny())
    assert completed_fit(cohort, out, tiny())["epochs"] == 1
    assert completed_fit(cohort, out, tiny(seed=1)) is None
    # other data under the same config: the male cohort's rows and triplets
    assert completed_fit(cohorts_dir / "male", out, tiny()) is None


def test_a_lost_fit_is_named_after_the_others_finish(cohorts_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(cohorts_dir / "female", broken)
    (broken / "triplets.npz").write_bytes(b"not a triplet file")
    extras = {CONFIG_EXTRA: tiny().to_dict()}
    fits = [Fit("good", ("--fit", "good", str(cohorts_dir / "female"), str(tmp_path / "good")),
                extras),
            Fit("bad", ("--fit", "bad", str(broken), str(tmp_path / "bad")), extras)]

    @dg.asset
    def some_fits(context, fit_engine: FitEngine) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"fits": len(fit_engine.run_fits(context, fits))})

    result = dg.materialize([some_fits], raise_on_error=False,
                            resources={"fit_engine": FitEngine(max_parallel=2)})
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    text = failure.step_failure_data.error.message
    assert "1 of 2 fits lost on local: bad (" in text and "re-execute from failure" in text
    assert (tmp_path / "good" / "train_report.json").is_file()  # the other fit finished
    assert not (tmp_path / "bad").exists()  # nothing half-written


def test_the_engine_is_one_of_four():
    from sphr.settings import resolve

    assert resolve(engine="slurm", fit_cpus=2).engine == "slurm"
    with pytest.raises(ConfigError, match="engine 'spark': choose from local, ray, slurm, k8s"):
        resolve(engine="spark")
    with pytest.raises(ConfigError, match="fit_gpus -1"):
        resolve(fit_gpus=-1)


def test_lines_written_as_the_session_closes_are_read(tmp_path):
    """The race Dagster's own tail leaves open (sphr_dagster.pipes_files): the writer's last
    lines land between an empty read and the closed check. Here the check itself writes them,
    so they are on disk only once the reader has seen "closed"; they must still be read, and
    a line split across two writes is one line."""
    from sphr_dagster.pipes_files import drained_lines

    path = tmp_path / "messages.jsonl"
    path.write_text('{"n": 1}\n{"n": ')
    checks = []

    def closed_now() -> bool:
        if not checks:
            with path.open("a") as writer:
                writer.write('2}\n{"n": 3}\n')
        checks.append(True)
        return True

    with path.open() as stream:
        assert list(drained_lines(stream, closed_now)) == ['{"n": 1}\n', '{"n": 2}\n',
                                                           '{"n": 3}\n']


def test_the_local_engine_reads_every_fit_message_through_dagster(tmp_path):
    """The draining reader is what the local engine's Pipes session reads with: a process
    that reports a custom message and exits at once is heard, five times over."""
    import sys

    from sphr_dagster.pipes_files import DrainingTempFileMessageReader

    script = tmp_path / "report.py"
    script.write_text("from dagster_pipes import open_dagster_pipes\n"
                      "with open_dagster_pipes() as pipes:\n"
                      "    pipes.report_custom_message({'fit': pipes.extras['n']})\n")

    @dg.asset
    def reports(context) -> dg.MaterializeResult:
        client = dg.PipesSubprocessClient(message_reader=DrainingTempFileMessageReader())
        heard = [client.run(context=context, command=[sys.executable, str(script)],
                            extras={"n": n}).get_custom_messages() for n in range(5)]
        assert heard == [({"fit": n},) for n in range(5)]
        return dg.MaterializeResult()

    assert dg.materialize([reports]).success
