"""Fit the baseline representations on one cohort folder and write their embeddings.

Reads ``RUN/cohorts/<sex>/{train,test}.parquet`` + ``features.json`` and writes,
per representation, ``OUT/<name>/embeddings_{train,test}.parquet`` (eid, label,
augmented, age_years, age_group, e00..), ``model.joblib`` (the fitted estimator,
so later stages can map new vectors, e.g. the risk stage's percentile profiles)
and ``representation.json`` (settings, timings, diagnostics).

**Decision**: the unsupervised baselines are fitted on the *real* training rows
only. Augmented rows are synthetic draws made to balance the BFH class for the
supervised triplet loss; an unsupervised map fitted on them would learn a
density that no participant has. They are still *transformed* (every row of
train.parquet gets an embedding, in the same order). Test participants are
never seen by ``fit``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.baselines import BASELINES, make_representation
from sphr.baselines.base import Representation
from sphr.errors import InputError
from sphr.io import read_json, staged_outputs, write_json, write_parquet

log = logging.getLogger(__name__)

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
        raise InputError("test.parquet holds augmented rows; evaluation uses real participants only",
                         file=d / "test.parquet", field="augmented")
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
    cols = sorted((c for c in df.columns if c[:1] == "e" and c[1:].isdigit()), key=lambda c: int(c[1:]))
    if not cols or "eid" not in df.columns:
        raise InputError("expected eid and e00.. columns", file=path)
    return df[[c for c in df.columns if c not in cols]], df[cols].to_numpy(np.float32)


@dataclass
class FittedBaseline:
    name: str
    model: Representation
    train: pd.DataFrame
    test: pd.DataFrame
    info: dict[str, Any] = field(default_factory=dict)


def _diagnostics(model: Representation) -> dict[str, Any]:
    info: dict[str, Any] = {}
    for attr in ("converged_", "n_iter_", "epsilon_", "intrinsic_dim_"):
        if hasattr(model, attr):
            info[attr.rstrip("_")] = getattr(model, attr)
    if hasattr(model, "eigenvalues_"):
        info["eigenvalues"] = [float(v) for v in model.eigenvalues_]
        info["n_landmarks"] = len(model.landmark_index_)
    if hasattr(model, "loss_curve_"):
        info["loss_curve"] = model.loss_curve_
    return info


def fit_baselines(cohort: Cohort, names: Sequence[str] = BASELINES, *, seed: int = 0,
                  device: str = "auto", params: Mapping[str, Mapping[str, Any]] | None = None,
                  use_augmented: bool = False) -> dict[str, FittedBaseline]:
    """Fit each named representation on the training rows and embed train and test."""
    params = params or {}
    X_fit = cohort.matrix("train", real_only=not use_augmented)
    X_train = cohort.matrix("train")
    X_test = cohort.matrix("test")
    out: dict[str, FittedBaseline] = {}
    for name in names:
        model = make_representation(name, random_state=seed, device=device,
                                    **dict(params.get(name, {})))
        t0 = time.perf_counter()
        model.fit(X_fit)
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        Z_train = model.transform(X_train)
        Z_test = model.transform(X_test)
        transform_s = time.perf_counter() - t0
        info = {
            "representation": name,
            "estimator": type(model).__name__,
            "params": {k: v for k, v in model.get_params().items()},
            "seed": seed,
            "fitted_on": "real+augmented training rows" if use_augmented else "real training rows",
            "n_fit_rows": int(X_fit.shape[0]),
            "n_features": int(X_fit.shape[1]),
            "width": int(Z_test.shape[1]),
            "fit_s": round(fit_s, 3),
            "transform_s": round(transform_s, 3),
            **_diagnostics(model),
        }
        log.info("%s %s: fitted on %d rows in %.1f s", cohort.sex, name, X_fit.shape[0], fit_s)
        out[name] = FittedBaseline(name=name, model=model,
                                   train=embedding_frame(cohort.train, Z_train),
                                   test=embedding_frame(cohort.test, Z_test), info=info)
    return out


def write_baselines(fitted: Mapping[str, FittedBaseline], out_dir: str | Path) -> Path:
    """Write every fitted representation under ``out_dir/<name>/`` as one staged set."""
    import joblib

    out_dir = Path(out_dir)
    with staged_outputs(out_dir) as stage:
        for name, fb in fitted.items():
            write_parquet(fb.train, stage / name / "embeddings_train.parquet")
            write_parquet(fb.test, stage / name / "embeddings_test.parquet")
            joblib.dump(fb.model, stage / name / "model.joblib")
            write_json(fb.info, stage / name / "representation.json")
    return out_dir


def load_representation(rep_dir: str | Path) -> Representation:
    """The fitted estimator saved by :func:`write_baselines` (``rep_dir/model.joblib``)."""
    import joblib

    path = Path(rep_dir) / "model.joblib"
    if not path.exists():
        raise InputError("missing model.joblib (run `sphr baselines`)", file=path)
    return joblib.load(path)


def run_baselines(cohort_dir: str | Path, out_dir: str | Path, names: Sequence[str] = BASELINES,
                  *, seed: int = 0, device: str = "auto",
                  params: Mapping[str, Mapping[str, Any]] | None = None,
                  use_augmented: bool = False) -> dict[str, Any]:
    """Read a cohort folder, fit ``names``, write them; return a small report."""
    cohort = load_cohort(cohort_dir)
    fitted = fit_baselines(cohort, names, seed=seed, device=device, params=params,
                           use_augmented=use_augmented)
    write_baselines(fitted, out_dir)
    report = {"cohort": str(cohort.directory), "sex": cohort.sex,
              "representations": {n: {k: v for k, v in fb.info.items() if k != "loss_curve"}
                                  for n, fb in fitted.items()}}
    write_json(report, Path(out_dir) / "baselines_report.json")
    return report
