"""The run contract: how a stage reads a cohort folder and reads or writes embeddings.

Every stage after ``sphr cohorts`` reads ``RUN/cohorts/<sex>/`` through :func:`load_cohort`
and writes or reads ``embeddings_{train,test}.parquet`` (eid, label, augmented, age_years,
age_group, e00..) through :func:`embedding_frame` / :func:`read_embeddings`, whichever
stage made them (training, the loss comparison, the baselines). Folder names come from
:mod:`sphr.layout`; the files' columns are described in docs/ARCHITECTURE.md. A shared
module: it imports no stage, so training, baselines, evaluation and risk all use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sphr.errors import InputError
from sphr.io import read_json

META_COLUMNS: tuple[str, ...] = ("eid", "label", "augmented", "age_years", "age_group")


@dataclass
class Cohort:
    """One sex's cohort folder, read into memory."""

    directory: Path
    features: list[str]
    train: pd.DataFrame
    test: pd.DataFrame
    #: the calibration partition (real healthy training participants no fit sees); empty
    #: for cohort folders written before it existed
    calibration: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def sex(self) -> str:
        return self.directory.name

    def matrix(self, part: str, *, real_only: bool = False) -> np.ndarray:
        df = self.train if part == "train" else self.test
        if real_only:
            df = df[~df["augmented"].to_numpy(bool)]
        return df[self.features].to_numpy(np.float32)


def _read_features(path: Path) -> list[str]:
    if not path.exists():
        raise InputError("missing features.json (run `sphr cohorts` first)", file=path)
    obj = read_json(path)
    if isinstance(obj, dict):  # tolerate {"features": [...]}
        obj = obj.get("features", obj.get("names"))
    if not isinstance(obj, list) or not all(isinstance(f, str) for f in obj) or not obj:
        raise InputError("expected a JSON list of feature names", file=path)
    return list(obj)


def _check_frame(df: pd.DataFrame, features: Sequence[str], path: Path) -> pd.DataFrame:
    missing = [c for c in ("eid", "label", *features) if c not in df.columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing[:5])}", file=path, field=missing[0])
    if "augmented" not in df.columns:
        df = df.assign(augmented=False)
    for col in ("age_years", "age_group"):
        if col not in df.columns:
            df = df.assign(**{col: None})
    if df["eid"].duplicated().any():
        row = int(np.flatnonzero(df["eid"].duplicated().to_numpy())[0]) + 1
        raise InputError("duplicate eid", file=path, field="eid", row=row)
    labels = df["label"].to_numpy()
    bad = ~np.isin(labels, (0, 1, 2))
    if bad.any():
        raise InputError(f"label must be 0, 1 or 2, got {labels[bad][0]!r}", file=path,
                         field="label", row=int(np.flatnonzero(bad)[0]) + 1)
    values = df[list(features)].to_numpy(np.float64)
    if not np.isfinite(values).all():
        r, c = np.argwhere(~np.isfinite(values))[0]
        raise InputError("missing or non-finite feature value", file=path, field=features[c],
                         row=int(r) + 1)
    return df.reset_index(drop=True)


def load_cohort(cohort_dir: str | Path) -> Cohort:
    """Read a cohort folder written by ``sphr cohorts`` (one sex)."""
    d = Path(cohort_dir)
    features = _read_features(d / "features.json")
    frames = {}
    for part in ("train", "test"):
        path = d / f"{part}.parquet"
        if not path.exists():
            raise InputError(f"missing {part}.parquet (run `sphr cohorts` first)", file=path)
        frames[part] = _check_frame(pd.read_parquet(path), features, path)
    if frames["test"]["augmented"].to_numpy(bool).any():
        raise InputError("test.parquet holds augmented rows; evaluation uses real participants "
                         "only", file=d / "test.parquet", field="augmented")
    calib_path = d / "calibration.parquet"
    calibration = (_check_frame(pd.read_parquet(calib_path), features, calib_path)
                   if calib_path.exists() else pd.DataFrame(columns=frames["test"].columns))
    return Cohort(directory=d, features=features, train=frames["train"], test=frames["test"],
                  calibration=calibration)


def embedding_columns(width: int) -> list[str]:
    return [f"e{i:02d}" for i in range(width)]


def embedding_frame(meta: pd.DataFrame, Z: np.ndarray) -> pd.DataFrame:
    """Meta columns (row order kept) + ``e00..``: the run-directory embedding layout."""
    if len(meta) != Z.shape[0]:
        raise ValueError(f"{len(meta)} rows of metadata, {Z.shape[0]} embeddings")
    out = meta[[c for c in META_COLUMNS if c in meta.columns]].reset_index(drop=True).copy()
    emb = pd.DataFrame(np.asarray(Z, dtype=np.float32), columns=embedding_columns(Z.shape[1]))
    return pd.concat([out, emb], axis=1)


def read_embeddings(path: str | Path) -> tuple[pd.DataFrame, np.ndarray]:
    """(meta columns, float32 matrix of the ``eNN`` columns in order)."""
    path = Path(path)
    if not path.exists():
        raise InputError("missing embeddings file", file=path)
    df = pd.read_parquet(path)
    cols = sorted((c for c in df.columns if c[:1] == "e" and c[1:].isdigit()),
                  key=lambda c: int(c[1:]))
    if not cols or "eid" not in df.columns:
        raise InputError("expected eid and e00.. columns", file=path)
    return df[[c for c in df.columns if c not in cols]], df[cols].to_numpy(np.float32)
