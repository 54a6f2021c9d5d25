"""What the evaluation stage reads from earlier stages; it writes nothing outside its own folder.

- baselines: ``RUN/baselines/<sex>/<rep>/embeddings_test.parquet`` (``sphr baselines``);
- SPHR: ``RUN/train/<sex>/nplb/embeddings_test.parquet`` (``sphr train``; left out, and said
  so, when the training stage has not run);
- the loss comparison: ``RUN/train/<sex>/comparison/<loss>/`` (``sphr train --losses``).

A missing input raises :class:`~sphr.errors.InputError` naming the folder and the command
that writes it; ``sphr evaluate`` (the command, not this module) runs those stages first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.artifacts import Cohort, read_embeddings
from sphr.baselines import BASELINES
from sphr.errors import ConfigError, InputError
from sphr.io import read_json
from sphr.layout import COMPARISON_REPORT, baselines_dir, comparison_dir, train_dir

log = logging.getLogger(__name__)


def read_test_embeddings(path: Path, cohort: Cohort) -> np.ndarray:
    """The embeddings in ``path``, rows in the order of the cohort's test participants."""
    meta, Z = read_embeddings(path)
    want = cohort.test["eid"].to_numpy()
    have = meta["eid"].to_numpy()
    if len(have) == len(want) and np.array_equal(have, want):
        return Z
    pos = pd.Index(have)
    if not pos.is_unique:
        raise InputError("duplicate eid in embeddings", file=path, field="eid")
    idx = pos.get_indexer(want)
    if (idx < 0).any() or len(have) != len(want):
        missing = want[idx < 0]
        raise InputError(
            f"embeddings do not cover the cohort's test participants ({len(have)} rows vs "
            f"{len(want)}; e.g. eid {missing[0] if len(missing) else '?'} missing): "
            "were they made from another cohort?", file=path, field="eid")
    return Z[idx]


def missing_baselines(run_dir: str | Path, sex: str, representations: Sequence[str], *,
                      every: bool = False) -> list[str]:
    """The baselines of ``representations`` that ``RUN/baselines/<sex>`` lacks (``every``:
    all of them, for a refit)."""
    base = baselines_dir(run_dir, sex)
    return [r for r in representations if r in BASELINES
            and (every or not (base / r / "embeddings_test.parquet").exists())]


def collect_embeddings(run_dir: str | Path, cohort: Cohort, representations: Sequence[str]
                       ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Test embeddings by representation (cohort test order), and which were read or missing."""
    sex = cohort.sex
    base = baselines_dir(run_dir, sex)
    absent = missing_baselines(run_dir, sex, representations)
    if absent:
        raise InputError(f"missing baseline embeddings for {', '.join(absent)}: run `sphr "
                         f"baselines {cohort.directory} --out {base}` (or `sphr evaluate`, "
                         "which fits them first)", file=base)
    out: dict[str, np.ndarray] = {}
    info: dict[str, Any] = {"read": [], "missing": []}
    for rep in representations:
        if rep in BASELINES:
            path = base / rep / "embeddings_test.parquet"
        elif rep == "sphr":
            path = train_dir(run_dir, sex, "nplb") / "embeddings_test.parquet"
            if not path.exists():
                log.warning("%s: no SPHR embeddings at %s (run `sphr train`); SPHR is left out",
                            sex, path)
                info["missing"].append(rep)
                continue
        else:
            raise ConfigError(f"unknown representation {rep!r}")
        out[rep] = read_test_embeddings(path, cohort)
        info["read"].append(rep)
    return out, info


def read_loss_comparison(run_dir: str | Path, cohort: Cohort, losses: Sequence[str]
                         ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Test embeddings by loss from ``RUN/train/<sex>/comparison/<loss>/``, and what the
    training stage reported (profile, the shared config, what it trained or reused)."""
    directory = comparison_dir(run_dir, cohort.sex)
    absent = [x for x in losses if not (directory / x / "embeddings_test.parquet").exists()
              or not (directory / x / "train_config.json").exists()]
    if absent:
        raise InputError(f"no loss comparison for {', '.join(absent)}: run `sphr train "
                         f"{cohort.directory} --losses {','.join(losses)}` (or `sphr evaluate`, "
                         "which trains it first)", file=directory)
    # the table compares losses, so everything else must be the same (as one training call
    # makes it): folders left by calls with other settings are refused, not mixed
    settings = {x: {k: v for k, v in read_json(directory / x / "train_config.json").items()
                    if k != "loss"} for x in losses}
    first = settings[losses[0]]
    differ = [x for x in losses if settings[x] != first]
    if differ:
        raise InputError(f"{', '.join(differ)} trained with other settings or data than "
                         f"{losses[0]}: rerun `sphr train {cohort.directory} --losses "
                         f"{','.join(losses)}`", file=directory)
    report_path = directory / COMPARISON_REPORT
    report = read_json(report_path) if report_path.exists() else {}
    info: dict[str, Any] = {
        "directory": str(directory), "profile": report.get("profile"),
        **{k: report[k] for k in ("reused", "from_training_stage", "trained", "train_s",
                                  "model_selection", "stack_held_by") if k in report},
        "config": {k: v for k, v in first.items() if k != "data"}}
    Z = {x: read_test_embeddings(directory / x / "embeddings_test.parquet", cohort) for x in losses}
    return Z, info
