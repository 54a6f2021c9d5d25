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

import pandas as pd

from sphr.artifacts import Cohort, embedding_frame, load_cohort
from sphr.baselines import BASELINES, make_representation
from sphr.baselines.base import Representation
from sphr.errors import InputError
from sphr.io import staged_outputs, write_json, write_parquet

log = logging.getLogger(__name__)

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


#: the representations the risk stage reads, so the only ones the cross-fit fits per fold
FOLD_REPRESENTATIONS: tuple[str, ...] = ("deep_patient",)


def fit_fold_baselines(cohort_dir: str | Path, out_dir: str | Path, *, seed: int = 0,
                       device: str = "auto",
                       params: Mapping[str, Mapping[str, Any]] | None = None,
                       names: Sequence[str] = FOLD_REPRESENTATIONS) -> list[dict[str, Any]]:
    """The cross-fit's representations: :func:`run_baselines` of ``names`` on each fold cohort
    of ``cohort_dir`` (``folds/fold<k>``, fitted on the other folds) into ``out_dir/fold<k>``."""
    from sphr.layout import fold_count

    cohort_dir, out_dir = Path(cohort_dir), Path(out_dir)
    return [run_baselines(cohort_dir / "folds" / f"fold{k}", out_dir / f"fold{k}", names,
                          seed=seed, device=device, params=params)
            for k in range(fold_count(cohort_dir))]
