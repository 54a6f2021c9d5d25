"""benchmarks/worlds.py: the loss table it writes into docs/notes/WORLDS*.md, and its chance
reference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark


@pytest.fixture(scope="module")
def worlds():
    return load_benchmark("worlds")


def _rows(sex: str, key: str, values: dict[str, tuple[float, float]], **extra) -> list[dict]:
    return [{"sex": sex, "task": task, "metric": "weighted_f1", "classifier": "xgboost",
             key: name, "mean": m + (0.01 if task == "multi" else 0.0), "sd": sd,
             "n_splits": 5, **extra}
            for name, (m, sd) in values.items() for task in ("binary", "multi")]


def _run(tmp_path: Path) -> Path:
    losses = {"triplet": (0.60, 0.02), "infonce": (0.64, 0.02), "nplb": (0.62, 0.02)}
    for sex in ("female", "male"):
        ev = tmp_path / "evaluate" / sex
        ev.mkdir(parents=True)
        pd.DataFrame(_rows(sex, "loss", losses)).to_parquet(ev / "losses.parquet")
        pd.DataFrame(_rows(sex, "representation", {"raw": (0.66, 0.04), "sphr": (0.5, 0.1)})
                     ).to_parquet(ev / "representations.parquet")
        comp = tmp_path / "train" / sex / "comparison"
        comp.mkdir(parents=True)
        chosen = {x: {"best_epoch": 3 if x == "infonce" else 1, "epochs_run": 53,
                      "best_val_loss": 1.0} for x in losses}
        (comp / "comparison_report.json").write_text(json.dumps({"model_selection": chosen}))
    return tmp_path


def test_loss_table_has_kept_epochs_raw_reference_and_gaps(worlds, tmp_path):
    lines, verdicts = worlds.loss_summary(_run(tmp_path))
    table = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    assert "3 of 53; 3 of 53" in table["InfoNCE"]
    assert table["InfoNCE"].count("**") == 8  # best loss in all four columns
    assert "0.660 ± 0.040" in table["(raw features)"] and "MDR" not in table
    v = verdicts[0]
    assert (v["best_other"], v["nplb"], v["raw_f1"]) == ("infonce", 0.62, 0.66)
    assert v["sds"] == pytest.approx(-1.0) and v["sds_vs_raw"] == pytest.approx(
        -0.04 / np.sqrt((0.02 ** 2 + 0.04 ** 2) / 2), abs=0.01)
    assert any("3 equally good losses" in line for line in lines)


def test_loss_table_is_empty_without_a_loss_comparison(worlds, tmp_path):
    assert worlds.loss_summary(tmp_path) == ([], [])


def test_null_gap_of_two_losses_is_the_single_reference_and_grows_with_more(worlds):
    mean2, low2, single2 = worlds.null_gap(n_losses=2, draws=40_000)
    assert abs(mean2) < 0.02 and low2 == pytest.approx(single2)
    mean7, low7, single7 = worlds.null_gap(n_losses=7, draws=40_000)
    assert mean7 < -0.5 and low7 < low2 and single7 == pytest.approx(single2, abs=0.05)
    assert worlds.null_gap(n_losses=7, draws=40_000) == (mean7, low7, single7)  # seeded
