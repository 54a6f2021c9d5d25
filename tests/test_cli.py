"""The command line starts without the heavy libraries: they load when a command needs them."""

from __future__ import annotations

import subprocess
import sys


def test_parser_builds_without_heavy_imports():
    code = ("import sys; from sphr.cli import build_parser; build_parser(); "
            "print(','.join(m for m in ('torch', 'sklearn', 'pandas', 'polars', 'dagster', "
            "'xgboost', 'scipy', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_help_lists_every_stage():
    out = subprocess.run([sys.executable, "-m", "sphr.cli", "--help"], capture_output=True,
                         text=True, check=True)
    for command in ("synth", "ingest", "cohorts", "train", "baselines", "evaluate", "risk",
                    "score", "retrieval"):
        assert command in out.stdout


def test_every_entry_point_defaults_to_one_profile():
    """The CLI stages, the Dagster configs and `python -m sphr_dagster run` (without an export)
    share one default profile; the Dagster configs hold that profile's values."""
    import argparse

    import sphr_dagster.__main__ as runner
    from sphr.cli import build_parser
    from sphr.cohorts.config import CohortConfig as CohortSettings
    from sphr.profiles import DEFAULT_PROFILE
    from sphr.train.config import TrainConfig
    from sphr_dagster.assets.cohorts import CohortConfig
    from sphr_dagster.assets.training import LossComparisonConfig, TrainingConfig

    parser = build_parser()
    stages = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    defaults = {name: stages.choices[name].get_default("profile")
                for name in ("cohorts", "train")}
    defaults["evaluate --loss-profile"] = stages.choices["evaluate"].get_default("loss_profile")
    run = runner.build_parser().parse_args(["run"])
    defaults["python -m sphr_dagster run"] = runner.settings_from_args(run).profile
    assert set(defaults.values()) == {DEFAULT_PROFILE}, defaults
    # the profiles differ in these, so the configs' defaults say which profile they hold
    cohort, train = CohortSettings.profile(DEFAULT_PROFILE), TrainConfig.profile(DEFAULT_PROFILE)
    assert CohortConfig().n_triplets == cohort.n_triplets
    assert TrainingConfig().epochs == LossComparisonConfig().epochs == train.epochs
    assert TrainingConfig().patience == LossComparisonConfig().patience == train.patience


def _score_fails_with(monkeypatch, capsys, tmp_path, error: BaseException, *flags: str):
    """`sphr score` whose work raises ``error``: its exit code, stderr, and the output folder."""
    import sphr.risk.commands as commands
    from sphr.cli import main

    def fail(args):
        raise error

    monkeypatch.setattr(commands, "_score", fail)
    out = tmp_path / "scored"
    out.mkdir(exist_ok=True)
    code = main([*flags, "score", str(tmp_path), str(tmp_path / "x.csv"), "--out", str(out)])
    return code, capsys.readouterr().err, out


def test_an_unexpected_error_is_one_line_and_its_traceback_a_file(monkeypatch, capsys,
                                                                  tmp_path):
    code, err, out = _score_fails_with(monkeypatch, capsys, tmp_path,
                                       ValueError("n_neighbors = 50 >\nn_samples_fit = 43"))
    assert code == 1
    assert err.strip().splitlines() == [
        f"sphr score: internal error: ValueError: n_neighbors = 50 > n_samples_fit = 43 "
        f"(traceback in {out / 'sphr_error.log'})"]
    log = (out / "sphr_error.log").read_text()
    assert "Traceback" in log and "ValueError" in log and "in fail" in log
    code, err, _ = _score_fails_with(monkeypatch, capsys, tmp_path, KeyError("age"), "--verbose")
    assert code == 1 and "Traceback" in err and err.strip().endswith("sphr_error.log)")


def test_a_path_that_cannot_be_read_is_bad_input(monkeypatch, capsys, tmp_path):
    from sphr.errors import InputError

    code, err, _ = _score_fails_with(monkeypatch, capsys, tmp_path,
                                     IsADirectoryError(21, "Is a directory", "/data/exports"))
    assert code == 2
    assert err.strip() == "sphr score: error: /data/exports: Is a directory"
    code, err, _ = _score_fails_with(monkeypatch, capsys, tmp_path,
                                     InputError("export.csv, row 3: bad value"))
    assert code == 2 and err.count("\n") == 1 and "row 3" in err
    # an OSError about no file the user named (a full disk, a lost socket) is internal
    code, err, _ = _score_fails_with(monkeypatch, capsys, tmp_path, OSError(28, "No space"))
    assert code == 1 and "internal error: OSError" in err
