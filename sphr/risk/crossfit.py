"""The cross-fitted risk stage of one sex (docs/METHODS.md, "Cross-fitting").

``sphr cohorts`` deals each sex into K folds and writes one cohort per fold (fitted on the
other folds, testing on its own); the training and baselines stages fit SPHR and DeepPatient
on each. Here each fold's risk model (marker scaler, references, standardization,
PhenoAge's line, the supervised comparators, the absolute-risk models) is fitted on its
fold cohort, exactly as the single split's is, and scores only its own fold: every
participant gets an **out-of-fold** score from fits that never saw them.

The groups then come from **healthy-reference centiles** (:mod:`sphr.risk.centiles`): per
method, the out-of-fold values of every bona fide healthy person, modelled as smooth
functions of age, give each participant the share of healthy people of their sex and age
farther out. A healthy person's own centile comes from the centile model fitted without their
fold, so no one's group is read off a model that saw them.

The model that ``sphr score`` applies is the single split's risk model with each calibrated
method's standardizer and bounds replaced by the centile model fitted on every healthy
person's out-of-fold value (METHODS.md says why, and what it assumes: that a new person's
value under the shipped fit is distributed as an out-of-fold value under a fold's fit).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.errors import InputError
from sphr.labels import BONA_FIDE_HEALTHY
from sphr.layout import baselines_dir, cohort_dir, fold_count, train_dir
from sphr.risk.centiles import HealthyCentiles
from sphr.risk.config import SPHR_VARIANTS, RiskConfig
from sphr.risk.distance import centile_rows
from sphr.risk.fit import age_groups, read_inputs
from sphr.risk.model import RiskModel

log = logging.getLogger(__name__)

#: the methods that read each representation an earlier stage fits per fold
REPRESENTATION_USERS: dict[str, tuple[str, ...]] = {"deep_patient": ("deep_patient",),
                                                    "sphr": ("sphr", *SPHR_VARIANTS)}
#: the partition name of an out-of-fold row: scored by fits that never saw the person, as the
#: single split's test partition is (every table that reads held-out people reads these)
OUT_OF_FOLD = "test"


@dataclass
class CrossFit:
    """What the cross-fit of one sex gives: every participant's out-of-fold rows (their
    ``fold``), their absolute-risk rows, the centile model of each calibrated method (fitted
    on every healthy person's out-of-fold value) and why a fold skipped a method."""

    folds: int
    rows: pd.DataFrame
    absolute_rows: pd.DataFrame
    centiles: dict[str, HealthyCentiles] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def folds_of(run: str | Path, sex: str) -> int:
    """How many cross-fit folds the sex's cohort holds (0: the single split only)."""
    return fold_count(cohort_dir(run, sex))


def _fold_rows(run: Path, sex: str, config: RiskConfig, fold: int
               ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, str]]:
    """(rows, absolute-risk rows, skipped) of fold ``fold``'s people under its own fit."""
    inputs = read_inputs(run, sex, config, fold=fold)
    main = {"deep_patient": baselines_dir(run, sex) / "deep_patient" / "model.joblib",
            "sphr": train_dir(run, sex) / "model.pt"}
    for name, users in REPRESENTATION_USERS.items():
        # a method the single split has must be out of fold too, or its rows would be missing
        # for everyone: a fold without its model stops the stage
        path = Path(inputs.representations[name])
        if set(users) & set(config.methods) and main[name].exists() and not path.exists():
            raise InputError(f"{sex} fold {fold} has no {name} model, although the single "
                             "split has one: fit the cross-fit's fold models (Dagster "
                             "train/fold_models and baselines/fold_representations)", file=path)
    model = RiskModel(config, age_groups(run)).fit([inputs])
    # the fold cohort's test partition is fold k: its people are the fold's out-of-fold rows
    rows = model.rows_.loc[model.rows_["partition"] == OUT_OF_FOLD].assign(fold=fold)
    absolute = model.absolute_rows_
    absolute = absolute.loc[absolute["partition"] == OUT_OF_FOLD].assign(fold=fold)
    return rows, absolute, {f"fold{fold}/{k}": v for k, v in model.skipped_.items()}


def crossfit_sex(run: str | Path, sex: str, config: RiskConfig) -> CrossFit:
    """Every fold's risk fit and the centile models of one sex (module docstring)."""
    run = Path(run)
    k = folds_of(run, sex)
    if k < 2:
        raise InputError(f"no cross-fit folds for {sex} (run `sphr cohorts` with folds >= 2)",
                         file=cohort_dir(run, sex) / "folds")
    parts, absolute, skipped = [], [], {}
    for fold in range(k):
        rows, abs_rows, why = _fold_rows(run, sex, config, fold)
        parts.append(rows)
        absolute.append(abs_rows)
        skipped.update(why)
    rows = pd.concat(parts, ignore_index=True)
    rows["fold"] = rows["fold"].astype("Int64")
    fit = CrossFit(k, rows, pd.concat(absolute, ignore_index=True), skipped=skipped)
    if config.reference == "centiles":
        fit.rows = _read_centiles(fit, config)
    return fit


def _read_centiles(fit: CrossFit, config: RiskConfig) -> pd.DataFrame:
    """The cross-fit's rows read against centiles of every healthy person's out-of-fold value."""
    bfh = fit.rows["label"].to_numpy() == BONA_FIDE_HEALTHY
    rows, centiles, skipped = read_centiles(fit.rows, bfh, fit.rows["fold"].to_numpy(), config)
    fit.centiles, fit.skipped = centiles, {**fit.skipped, **skipped}
    return rows


def read_centiles(rows: pd.DataFrame, reference: np.ndarray, folds: np.ndarray,
                  config: RiskConfig
                  ) -> tuple[pd.DataFrame, dict[str, HealthyCentiles], dict[str, str]]:
    """(rows, centile model per method, methods left as they were and why): every calibrated
    method's rows read against the centiles of the ``reference`` rows' values (healthy people
    no fit of theirs has seen); a reference person's own row from the centile model fitted
    without their ``folds`` entry, so no one's group is read off a model that saw them."""
    out = [rows.loc[rows["mode"] != "calibrated"]]
    fitted: dict[str, HealthyCentiles] = {}
    skipped: dict[str, str] = {}
    calibrated = (rows["mode"] == "calibrated").to_numpy()
    for method in dict.fromkeys(rows.loc[calibrated, "method"]):
        mask = calibrated & (rows["method"] == method).to_numpy()
        part = rows.loc[mask].reset_index(drop=True)
        values, ages = part["distance"].to_numpy(float), part["age_years"].to_numpy(float)
        ref = reference[mask] & np.isfinite(values)
        if ref.sum() < 3:
            skipped[method] = (f"centiles: {int(ref.sum())} healthy reference people with a "
                               "value; its age-group bounds kept")
            out.append(part)
            continue
        centiles = HealthyCentiles(form=config.centile_form, tail=config.centile_tail,
                                   random_state=config.seed).fit(values[ref], ages[ref])
        fitted[method] = centiles
        read = centile_rows(centiles, values, part["age_group"].to_numpy(object), ages)
        own = _own_fold_rows(centiles, values[ref], part.loc[ref],
                             np.asarray(folds)[mask][ref], config)
        read.loc[np.flatnonzero(ref), own.columns] = own.to_numpy()
        for col in read.columns:
            part[col] = read[col].to_numpy()
        out.append(part)
    return pd.concat(out, ignore_index=True), fitted, skipped


def _own_fold_rows(full: HealthyCentiles, values: np.ndarray, people: pd.DataFrame,
                   folds: np.ndarray, config: RiskConfig) -> pd.DataFrame:
    """The reference people's own rows, each from the centile model fitted without their fold
    (``full``, fitted on everyone, where the other folds hold fewer than 3 of them)."""
    ages, groups = people["age_years"].to_numpy(float), people["age_group"].to_numpy(object)
    folds = np.asarray(folds, dtype=np.int64)
    columns = ["score", "group", "normal_high", "lower_high", "centile"]
    read = pd.DataFrame(index=range(len(values)), columns=columns, dtype=object)
    for k in np.unique(folds):
        held = folds == k
        other = full if (~held).sum() < 3 else HealthyCentiles(
            form=config.centile_form, tail=config.centile_tail,
            random_state=config.seed).fit(values[~held], ages[~held])
        part = centile_rows(other, values[held], groups[held], ages[held])
        read.loc[np.flatnonzero(held), columns] = part[columns].to_numpy()
    for col in ("score", "normal_high", "lower_high", "centile"):
        read[col] = read[col].astype(float)
    return read


def with_centiles(model: RiskModel, sex: str, centiles: dict[str, HealthyCentiles]
                  ) -> RiskModel:
    """The single split's model, its calibrated methods read against ``centiles`` (what
    ``sphr score`` applies); a method without centiles keeps its bounds."""
    for method, fitted in model.sexes_[sex].methods_.items():
        centiles_of = centiles.get(method)
        if centiles_of is None:
            continue
        if hasattr(fitted, "modes"):
            if "calibrated" in fitted.modes:
                fitted.modes["calibrated"].centiles_ = centiles_of
        else:
            fitted.model.centiles = centiles_of
    return model


def crossfit_summary(fit: CrossFit) -> dict[str, Any]:
    """What risk_report.json records of the cross-fit."""
    return {"folds": fit.folds, "participants": int(fit.rows["eid"].nunique()),
            "skipped": fit.skipped}
