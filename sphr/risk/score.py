"""``sphr score``: risk groups for the participants of a new UK Biobank export.

Uses only what ``sphr risk`` saved under ``RUN/risk/model/``: per sex the
normalizer and feature list of the cohort, the representation files (and the marker
scaler of the marker-space methods), the supervised comparators' fold models (the mean of
their margins scores a new person), PhenoAge's line on age, and the references and
intervals of every method and mode. Nothing is refitted. PhenoAge reads the markers as
measured (never imputed): a person without its nine markers is not scored by it, counted
per method in the report's ``not_scored``.

Refusals (``InputError`` naming the export and the UKB field):

* a fitted feature the export does not have (or has no value for anyone);
* **units**: a feature for which more than half of the new values (and at
  least one) fall outside the range seen in training (the normalizer's
  minimum and maximum, raw UKB units). A column in other units (glucose in
  mg/dL instead of mmol/L is x18) lands almost entirely outside; a correct
  file almost never does. ``allow_out_of_range=True`` scores anyway (a
  value outside the range is then treated as the training extreme, which is
  what the quantile normalizer does).

Missing values (``impute=True``, the default): a participant with a missing
fitted feature is scored with that feature set to the per-sex training median
(:mod:`sphr.risk.impute`; 0 on the normal scale, fitted on the training
partition only) and flagged in ``participants.csv`` with the number and names
of imputed features. Still unscorable, listed with the reason in
``unscorable.csv``: a missing or unknown sex, a sex the model was not fitted
on, a missing age, or more than ``MAX_IMPUTED_SHARE`` of the features
missing. ``impute=False`` leaves out everyone with a missing value (the
earlier behaviour). Ages outside every age group join the nearest group
(:func:`sphr.cohorts.age.assign_age_groups`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.age import assign_age_groups
from sphr.cohorts.normalize import QuantileNormalizer
from sphr.cohorts.ranges import (
    P0_RANGES,
    ClinicalRange,
    assign_classes,
    ranges_for,
    ranges_from_records,
)
from sphr.data.fields import BY_NAME
from sphr.errors import InputError
from sphr.io import read_json, staged_outputs, write_json, write_parquet, write_text
from sphr.labels import SEX_CODE
from sphr.risk.fit import COLUMNS
from sphr.risk.model import RiskModel
from sphr.risk.spaces import load_space

log = logging.getLogger(__name__)
#: share of a feature's new values outside the training range that means "wrong units"
OUT_OF_RANGE_SHARE = 0.5
#: more than this share of a participant's fitted features missing: not scored (too little data)
MAX_IMPUTED_SHARE = 0.5


def find_model_dir(path: str | Path) -> Path:
    """RUN_DIR, RUN/risk or RUN/risk/model: the folder holding risk_model.json."""
    path = Path(path)
    for cand in (path / "risk" / "model", path / "model", path):
        if (cand / "risk_model.json").is_file():
            return cand
    raise InputError("no fitted risk model here (run `sphr risk` first): looked for "
                     "risk/model/risk_model.json", file=path)


def _ukb_field(name: str) -> str:
    f = BY_NAME.get(name)
    return f"{f.id}-0.0 ({name})" if f else name


def check_units(frame: pd.DataFrame, norm: QuantileNormalizer, export: Path, *,
                allow_out_of_range: bool = False) -> dict[str, float]:
    """Share of values outside the training range per feature; refuse the implausible ones."""
    shares = {}
    lo, hi = norm.quantiles_[0], norm.quantiles_[-1]
    for j, name in enumerate(norm.features_):
        v = frame[name].to_numpy(float)
        v = v[~np.isnan(v)]
        if v.size == 0:
            continue
        out = (v < lo[j]) | (v > hi[j])
        shares[name] = float(out.mean())
        if shares[name] > OUT_OF_RANGE_SHARE and not allow_out_of_range:
            med, ref = float(np.median(v)), float(np.median(norm.quantiles_[:, j]))
            ratio = med / ref if ref else float("nan")
            unit = getattr(BY_NAME.get(name), "unit", "")
            raise InputError(
                f"{out.sum()} of {v.size} values ({shares[name]:.0%}) are outside the range "
                f"the model was fitted on [{lo[j]:.4g}, {hi[j]:.4g}] {unit}; median {med:.4g} vs "
                f"{ref:.4g} in training (ratio {ratio:.3g}): wrong units (e.g. mg/dL instead of "
                "mmol/L)? Convert, or pass --allow-out-of-range", file=export,
                field=_ukb_field(name))
    return shares


def model_ranges(model_dir: Path, sex: str) -> tuple[ClinicalRange, ...]:
    """The clinical ranges the model's cohort was built with (``--ranges`` overrides included).

    ``RUN/risk/model/<sex>/clinical_ranges.json`` (written by ``sphr risk``); a model saved
    before that file existed falls back to its run's ``cohorts/<sex>/cohort_report.json``,
    then, with a warning, to the default ranges."""
    saved = model_dir / sex / "clinical_ranges.json"
    if saved.is_file():
        return ranges_from_records(read_json(saved))
    report = model_dir.parent.parent / "cohorts" / sex / "cohort_report.json"
    if model_dir.name == "model" and report.is_file():
        records = read_json(report).get("clinical_ranges")
        if records:
            return ranges_from_records(records)
    log.warning("%s: no clinical_ranges.json; labelling BFH with the default P0 ranges",
                model_dir / sex)
    return tuple(ranges_for(sex, P0_RANGES))


def score_people(baseline: pd.DataFrame, sex: str, model_dir: Path, spec: dict[str, Any],
                 export: Path, *, allow_out_of_range: bool = False, device: str = "auto",
                 impute: bool = True, max_imputed_share: float = MAX_IMPUTED_SHARE
                 ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Rows (``COLUMNS``), participants (eid, sex, imputed_features, imputed), unscorable
    (eid, sex, reason) and the report of one sex."""
    from sphr.risk.impute import impute_median

    sex_dir = model_dir / sex
    features = spec["features"]
    frame = baseline.loc[baseline["sex"] == SEX_CODE[sex]].reset_index(drop=True)
    for name in features:
        if name not in frame.columns or (len(frame) and frame[name].isna().all()):
            raise InputError(f"the model needs {name!r} and the export has no values for it",
                             file=export, field=_ukb_field(name))
    norm = QuantileNormalizer.load(sex_dir / "normalizer.json")
    if norm.features_ != features:
        raise InputError("normalizer and risk model disagree on the features", file=sex_dir)
    n_missing = frame[features].isna().sum(axis=1).to_numpy()
    reasons = np.full(len(frame), "", dtype=object)
    if impute:
        too_many = n_missing > max_imputed_share * len(features)
        reasons[too_many] = [f"{k} of {len(features)} features missing (more than "
                             f"{max_imputed_share:.0%})" for k in n_missing[too_many]]
    else:
        reasons[n_missing > 0] = "missing values (imputation off)"
    no_age = frame["age"].isna().to_numpy()
    reasons[no_age & (reasons == "")] = "age missing"
    keep = reasons == ""
    unscorable = pd.DataFrame({"eid": frame.loc[~keep, "eid"].to_numpy(np.int64), "sex": sex,
                               "reason": reasons[~keep]})
    report = {"participants": len(frame), "scored": int(keep.sum()),
              "imputed": int((keep & (n_missing > 0)).sum()),
              "unscorable": int((~keep).sum()),
              "left_out_missing_values": int((~keep).sum())}
    # units first, on the values as read (missing ones are ignored)
    shares = check_units(frame.loc[keep], norm, export, allow_out_of_range=allow_out_of_range)
    report["out_of_range_share"] = {k: v for k, v in shares.items() if v > 0}
    frame = frame.loc[keep].reset_index(drop=True)
    as_read = frame  # PhenoAge reads the markers as measured: an imputed CRP is no CRP
    frame, counts, names = impute_median(frame, norm)
    participants = pd.DataFrame({"eid": frame["eid"].to_numpy(np.int64), "sex": sex,
                                 "imputed_features": counts, "imputed": names})
    if frame.empty:
        return pd.DataFrame(columns=list(COLUMNS)), participants, unscorable, report
    age_groups = tuple(tuple(g) for g in read_json(model_dir / "risk_model.json")["age_groups"])
    groups, outside = assign_age_groups(frame["age"].to_numpy(float), age_groups)
    report["ages_outside_groups"] = outside
    normalized = pd.DataFrame(norm.transform(frame[features].to_numpy(float)), columns=features)
    normalized["age_group"] = groups
    labels = assign_classes(frame, sex, model_ranges(model_dir, sex))
    out, report["not_scored"] = [], {}
    ctx = _ScoringContext(frame, as_read, normalized, groups, labels, sex, sex_dir, features,
                          device)
    for method, entry in spec["methods"].items():
        res = _score_method(method, entry, ctx)
        scored = np.isfinite(res["distance"].to_numpy(float))
        first = (res["mode"] == res["mode"].iloc[0]).to_numpy()
        if (~scored & first).any():  # a method some people cannot get (PhenoAge without CRP)
            report["not_scored"][method] = int((~scored & first).sum())
        out.append(res.loc[scored])
    return pd.concat(out, ignore_index=True)[list(COLUMNS)], participants, unscorable, report


@dataclass
class _ScoringContext:
    """One sex's new people in every form the saved methods read."""

    frame: pd.DataFrame        # raw UKB units, imputed
    as_read: pd.DataFrame      # raw UKB units, not imputed (every column of the export)
    normalized: pd.DataFrame   # quantile-normalized features + age_group
    groups: np.ndarray
    labels: np.ndarray
    sex: str
    sex_dir: Path
    features: list[str]
    device: str

    def rows(self, res: pd.DataFrame, method: str, mode: str) -> pd.DataFrame:
        res.insert(0, "eid", self.frame["eid"].to_numpy(np.int64))
        return res.assign(sex=self.sex, method=method, mode=mode, partition="new",
                          label=self.labels, age_years=self.frame["age"].to_numpy(float))

    def marker(self) -> pd.DataFrame:
        """The features in the marker space of the saved model (``marker_scaler.json``)."""
        from sphr.cohorts.normalize import MarkerScaler
        from sphr.risk.fit import MARKER_SCALER

        path = self.sex_dir / MARKER_SCALER
        if not path.is_file():
            raise InputError("missing marker scaler of the risk model", file=path)
        scaler = MarkerScaler.load(path)
        out = pd.DataFrame(scaler.transform(self.frame[self.features].to_numpy(float)),
                           columns=self.features)
        out["age_group"] = self.groups
        return out


def _score_method(method: str, entry: dict[str, Any], ctx: _ScoringContext) -> pd.DataFrame:
    """Rows of every saved mode of one method for the new people (NaN distance: no score)."""
    from sphr.risk.scores import ScoreModel

    if "phenoage_line" in entry or "supervised" in entry:
        if "phenoage_line" in entry:
            from sphr.risk.scores import phenoage_acceleration_new

            raw = phenoage_acceleration_new(ctx.as_read, entry["phenoage_line"])
        else:
            from sphr.risk.supervised import SupervisedScore

            model = SupervisedScore.load(entry["supervised"], ctx.sex_dir)
            raw = model.predict_margin(ctx.normalized[ctx.features].to_numpy(np.float32))
        res = ScoreModel.from_dict(entry["modes"]["calibrated"]).transform(raw, ctx.groups)
        return ctx.rows(res, method, "calibrated")
    data = ctx.marker() if entry.get("input") == "marker" else ctx.normalized
    space = load_space(entry["space"], ctx.sex_dir, ctx.features, ctx.device)
    return pd.concat([ctx.rows(RiskModel.from_dict(m, space).transform(data), method, mode)
                      for mode, m in entry["modes"].items()], ignore_index=True)


def score_sex(baseline: pd.DataFrame, sex: str, model_dir: Path, spec: dict[str, Any],
              export: Path, *, allow_out_of_range: bool = False, device: str = "auto",
              impute: bool = True) -> tuple[pd.DataFrame, dict[str, Any]]:
    rows, _, _, report = score_people(baseline, sex, model_dir, spec, export,
                                      allow_out_of_range=allow_out_of_range, device=device,
                                      impute=impute)
    return rows, report


def score_baseline(baseline: pd.DataFrame, model_dir: Path, export: Path, *,
                   allow_out_of_range: bool = False, device: str = "auto", impute: bool = True
                   ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Every sex of the model: rows, participants, unscorable and the report."""
    spec = read_json(model_dir / "risk_model.json")
    frames, people, lost = [], [], []
    report: dict[str, Any] = {"export": str(export), "model": str(model_dir), "sexes": {}}
    for sex, sex_spec in spec["sexes"].items():
        rows, part, unsc, rep = score_people(baseline, sex, model_dir, sex_spec, export,
                                             allow_out_of_range=allow_out_of_range,
                                             device=device, impute=impute)
        frames.append(rows)
        people.append(part)
        lost.append(unsc)
        report["sexes"][sex] = rep
    fitted = [SEX_CODE[s] for s in spec["sexes"]]
    other = baseline.loc[~baseline["sex"].isin(fitted)]
    reason = np.where(other["sex"].isna(), "sex missing", "sex not in the fitted model")
    lost.append(pd.DataFrame({"eid": other["eid"].to_numpy(np.int64),
                              "sex": other["sex"].astype(str).to_numpy(), "reason": reason}))
    report["left_out_sex_not_fitted"] = len(other)
    rows = pd.concat(frames, ignore_index=True)
    report["rows"] = len(rows)
    unscorable = pd.concat([f for f in lost if len(f)] or [lost[-1]], ignore_index=True)
    return rows, pd.concat(people, ignore_index=True), unscorable, report


def run_score(model: str | Path, export: str | Path, out: str | Path, *,
              allow_out_of_range: bool = False, device: str = "auto", impute: bool = True
              ) -> dict[str, Any]:
    """Ingest ``export``, score everyone with the saved risk model, write ``out/``."""
    from sphr.data.ingest import ingest

    model_dir = find_model_dir(model)
    export = Path(export)
    baseline = ingest(export).baseline.to_pandas()
    rows, participants, unscorable, report = score_baseline(
        baseline, model_dir, export, allow_out_of_range=allow_out_of_range, device=device,
        impute=impute)
    with staged_outputs(out) as stage:
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_text(participants.to_csv(index=False), stage / "participants.csv")
        write_text(unscorable.to_csv(index=False), stage / "unscorable.csv")
        write_json(report, stage / "score_report.json")
    return report
