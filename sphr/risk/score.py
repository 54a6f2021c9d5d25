"""``sphr score``: risk groups for the participants of a new UK Biobank export.

Uses only what ``sphr risk`` saved under ``RUN/risk/model/``: per sex the
normalizer and feature list of the cohort, the representation files, and the
references and intervals of every method and mode. Nothing is refitted.

Refusals (``InputError`` naming the export and the UKB field):

* a fitted feature the export does not have (or has no value for anyone);
* **units**: a feature for which more than half of the new values (and at
  least one) fall outside the range seen in training (the normalizer's
  minimum and maximum, raw UKB units). A column in other units (glucose in
  mg/dL instead of mmol/L is x18) lands almost entirely outside; a correct
  file almost never does. ``allow_out_of_range=True`` scores anyway (a
  value outside the range is then treated as the training extreme, which is
  what the quantile normalizer does).

Participants with a missing value in a fitted feature cannot be placed; they
are left out and counted in ``score_report.json``. Ages outside every age
group join the nearest group (:func:`sphr.cohorts.age.assign_age_groups`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.age import assign_age_groups
from sphr.cohorts.normalize import QuantileNormalizer
from sphr.cohorts.ranges import bona_fide_mask
from sphr.data.fields import BY_NAME
from sphr.errors import InputError
from sphr.io import read_json, staged_outputs, write_json, write_parquet, write_text
from sphr.labels import SEX_CODE
from sphr.risk.model import RiskModel
from sphr.risk.pipeline import COLUMNS
from sphr.risk.spaces import load_space

log = logging.getLogger(__name__)
#: share of a feature's new values outside the training range that means "wrong units"
OUT_OF_RANGE_SHARE = 0.5


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


def _labels(frame: pd.DataFrame, sex: str) -> np.ndarray:
    """0 unhealthy, 1 apparently healthy, 2 BFH, -1 unknown (from the export's answers)."""
    label = frame["label"].to_numpy(object)
    out = np.full(len(frame), -1, dtype=np.int8)
    out[label == "unhealthy"] = 0
    healthy = label == "apparently_healthy"
    out[healthy] = 1
    out[healthy & bona_fide_mask(frame, sex)] = 2
    return out


def score_sex(baseline: pd.DataFrame, sex: str, model_dir: Path, spec: dict[str, Any],
              export: Path, *, allow_out_of_range: bool = False, device: str = "auto"
              ) -> tuple[pd.DataFrame, dict[str, Any]]:
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
    complete = frame[features].notna().all(axis=1).to_numpy()
    report = {"participants": len(frame), "scored": int(complete.sum()),
              "left_out_missing_values": int((~complete).sum())}
    frame = frame.loc[complete].reset_index(drop=True)
    shares = check_units(frame, norm, export, allow_out_of_range=allow_out_of_range)
    report["out_of_range_share"] = {k: v for k, v in shares.items() if v > 0}
    if frame.empty:
        return pd.DataFrame(columns=list(COLUMNS)), report
    age_groups = tuple(tuple(g) for g in read_json(model_dir / "risk_model.json")["age_groups"])
    groups, outside = assign_age_groups(frame["age"].to_numpy(float), age_groups)
    report["ages_outside_groups"] = outside
    normalized = pd.DataFrame(norm.transform(frame[features].to_numpy(float)), columns=features)
    normalized["age_group"] = groups
    labels = _labels(frame, sex)
    out = []
    report["not_scorable"] = {}
    for method, entry in spec["methods"].items():
        if entry.get("scorable") is False:  # the supervised ceiling needs outcomes
            report["not_scorable"][method] = entry.get("score", "")
            continue
        if "phenoage_line" in entry:
            from sphr.risk.scores import ScoreModel, phenoage_acceleration_new

            data = entry["modes"]["calibrated"]
            res = ScoreModel.from_dict(data).transform(
                phenoage_acceleration_new(frame, entry["phenoage_line"]), groups)
            res.insert(0, "eid", frame["eid"].to_numpy(np.int64))
            out.append(res.assign(sex=sex, method=method, mode="calibrated", partition="new",
                                  label=labels, age_years=frame["age"].to_numpy(float)))
            continue
        space = load_space(entry["space"], sex_dir, features, device)
        for mode, data in entry["modes"].items():
            res = RiskModel.from_dict(data, space).transform(normalized)
            res.insert(0, "eid", frame["eid"].to_numpy(np.int64))
            out.append(res.assign(sex=sex, method=method, mode=mode, partition="new", label=labels,
                                  age_years=frame["age"].to_numpy(float)))
    return pd.concat(out, ignore_index=True)[list(COLUMNS)], report


def run_score(model: str | Path, export: str | Path, out: str | Path, *,
              allow_out_of_range: bool = False, device: str = "auto") -> dict[str, Any]:
    """Ingest ``export``, score everyone with the saved risk model, write ``out/``."""
    from sphr.data.ingest import ingest

    model_dir = find_model_dir(model)
    export = Path(export)
    spec = read_json(model_dir / "risk_model.json")
    baseline = ingest(export).baseline.to_pandas()
    frames, report = [], {"export": str(export), "model": str(model_dir), "sexes": {}}
    for sex, sex_spec in spec["sexes"].items():
        rows, rep = score_sex(baseline, sex, model_dir, sex_spec, export,
                              allow_out_of_range=allow_out_of_range, device=device)
        frames.append(rows)
        report["sexes"][sex] = rep
    unscored = ~baseline["sex"].isin([SEX_CODE[s] for s in spec["sexes"]])
    report["left_out_sex_not_fitted"] = int(unscored.sum())
    rows = pd.concat(frames, ignore_index=True)
    report["rows"] = len(rows)
    with staged_outputs(out) as stage:
        write_parquet(rows, stage / "risk_groups.parquet")
        write_text(rows.to_csv(index=False), stage / "risk_groups.csv")
        write_json(report, stage / "score_report.json")
    return report
