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
