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


def test_every_entry_point_defaults_to_one_profile(monkeypatch):
    """The CLI stages, the Dagster configs and `python -m pipeline run` share one default."""
    import argparse

    import sphr_dagster.__main__ as runner
    from sphr.cli import build_parser
    from sphr.profiles import DEFAULT_PROFILE
    from sphr_dagster.assets.cohorts import CohortConfig
    from sphr_dagster.assets.training import LossComparisonConfig, TrainingConfig

    parser = build_parser()
    stages = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    defaults = {name: stages.choices[name].get_default("profile")
                for name in ("cohorts", "train")}
    defaults["evaluate --loss-profile"] = stages.choices["evaluate"].get_default("loss_profile")
    defaults["dagster cohorts"] = CohortConfig().profile
    defaults["dagster training"] = TrainingConfig().profile
    defaults["dagster loss comparison"] = LossComparisonConfig().profile
    seen = {}
    monkeypatch.setattr(runner, "run", lambda args: seen.setdefault("profile", args.profile) and 0)
    runner.main(["run"])
    defaults["python -m pipeline run"] = seen["profile"]
    assert set(defaults.values()) == {DEFAULT_PROFILE}, defaults
