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


#: each sex its own numbers, so a cell read from the other sex or task shows
LOSSES = {"female": {"triplet": (0.60, 0.02), "infonce": (0.64, 0.02), "nplb": (0.62, 0.02)},
          "male": {"triplet": (0.58, 0.03), "infonce": (0.55, 0.03), "nplb": (0.63, 0.03)}}
RAW = {"female": (0.66, 0.04), "male": (0.61, 0.05)}


def _run(tmp_path: Path) -> Path:
    for sex, losses in LOSSES.items():
        ev = tmp_path / "evaluate" / sex
        ev.mkdir(parents=True)
        pd.DataFrame(_rows(sex, "loss", losses)).to_parquet(ev / "losses.parquet")
        pd.DataFrame(_rows(sex, "representation", {"raw": RAW[sex], "sphr": (0.5, 0.1)})
                     ).to_parquet(ev / "representations.parquet")
        comp = tmp_path / "train" / sex / "comparison"
        comp.mkdir(parents=True)
        chosen = {x: {"best_epoch": (3 if x == "infonce" else 1) + (sex == "male"),
                      "epochs_run": 53, "best_val_loss": 1.0} for x in losses}
        (comp / "comparison_report.json").write_text(json.dumps({"model_selection": chosen}))
    return tmp_path


def _sds(a: tuple[float, float], b: tuple[float, float]) -> float:
    return (a[0] - b[0]) / np.sqrt((a[1] ** 2 + b[1] ** 2) / 2)


def test_loss_table_has_kept_epochs_raw_reference_and_gaps(worlds, tmp_path):
    lines, verdicts = worlds.loss_summary(_run(tmp_path))
    header = [c.strip() for c in lines[0].strip("| ").split(" | ")]
    table = {row[0]: dict(zip(header, row, strict=True)) for row in
             ([c.strip() for c in line.strip("| ").split(" | ")]
              for line in lines[2:] if line.startswith("| "))}
    assert table["InfoNCE"]["kept epoch (women; men)"] == "3 of 53; 4 of 53"
    assert "MDR" not in table
    for sex, who in (("female", "women"), ("male", "men")):
        for task, shift in (("binary", 0.0), ("multi", 0.01)):
            col = f"{who}, {task}"
            best = max(LOSSES[sex], key=lambda x: LOSSES[sex][x][0])
            for loss, (m, sd) in LOSSES[sex].items():
                cell = table[worlds.LOSS_NAMES[loss]][col]
                assert cell.strip("*") == f"{m + shift:.3f} ± {sd:.3f}", (loss, col)
                assert cell.startswith("**") == (loss == best), (loss, col)
            assert table["(raw features)"][col] == f"{RAW[sex][0] + shift:.3f} ± {RAW[sex][1]:.3f}"
    # one verdict per sex and task, each against that cell's best other loss and raw features
    assert [(v["sex"], v["task"]) for v in verdicts] == [
        (s, t) for s in ("female", "male") for t in ("binary", "multi")]
    for v in verdicts:
        shift = 0.01 if v["task"] == "multi" else 0.0
        losses = {k: (m + shift, sd) for k, (m, sd) in LOSSES[v["sex"]].items()}
        raw = (RAW[v["sex"]][0] + shift, RAW[v["sex"]][1])
        top = max((k for k in losses if k != "nplb"), key=lambda k: losses[k][0])
        assert (v["best_other"], v["nplb"], v["raw_f1"]) == (
            top, round(losses["nplb"][0], 4), round(raw[0], 4))
        assert v["sds"] == pytest.approx(_sds(losses["nplb"], losses[top]), abs=0.006)
        assert v["sds_vs_raw"] == pytest.approx(_sds(losses["nplb"], raw), abs=0.006)
    # the chance reference is null_gap's own numbers for these three losses
    mean, low, single = worlds.null_gap(n_losses=3, n_splits=5)
    line = next(x for x in lines if x.startswith("With 3 equally good losses"))
    assert f"by {-mean:.2f} split SDs" in line and f"more than {-low:.2f}" in line
    assert f"below {single:.2f}" in line


def test_loss_table_is_empty_without_a_loss_comparison(worlds, tmp_path):
    assert worlds.loss_summary(tmp_path) == ([], [])


def test_null_gap_of_two_losses_is_the_single_reference_and_grows_with_more(worlds):
    mean2, low2, single2 = worlds.null_gap(n_losses=2, draws=40_000)
    assert abs(mean2) < 0.02 and low2 == pytest.approx(single2)
    mean7, low7, single7 = worlds.null_gap(n_losses=7, draws=40_000)
    assert mean7 < -0.5 and low7 < low2 and single7 == pytest.approx(single2, abs=0.05)
    assert worlds.null_gap(n_losses=7, draws=40_000) == (mean7, low7, single7)  # seeded
