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
