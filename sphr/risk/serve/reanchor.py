"""Re-anchoring: a fitted risk model refitted, in the parts that describe a population, on
the healthy people of a new export (``sphr score --reanchor``; docs/METHODS.md,
"Re-anchoring").

The parts (:data:`PARTS`), per sex:

``normalizer``
    the quantile normalizer of the features (and with it the training medians that impute);
``marker_scaler``
    the marker space's robust log-scaler;
``references``
    each distance method's age-group BFH references; for a method whose reference is the
    origin of its space (homeostatic dysregulation's young mean, the SPHR variants' young
    centre and age line) that centre: the space's covariance, scales and network are kept;
``standardizers``
    the age standardization of every score (median and IQR per age group among BFH);
``bounds``
    the calibrated 95% / 99% bounds.

Which parts ``--reanchor`` refits is :data:`REANCHOR_PARTS`, the choice of the rule written
before the transport benchmark ran (docs/METHODS.md). Nothing else changes: every learned
representation (SPHR, DeepPatient, the supervised comparators' trees, the Mahalanobis and
homeostatic covariances, the joint space's scales, PhenoAge's line on age) is the fitted
model's, byte for byte.

**Out of sample on the new people, never their outcomes.** The sex's people of the export
are split at random (seeded, within each class) into an *anchor* share and a *calibration*
share (:data:`CALIBRATION_SHARE`); the normalizer and the scaler are fitted on the anchor
people with every feature, the references and standardizers on the anchor BFH, the bounds
on the calibration BFH, which no other part has seen. The BFH are the export's own: the
ingest labels (conditions, medications) and the model's P0 ranges, through the cohort code
(:func:`sphr.cohorts.ranges.assign_classes`). A sex with fewer than :data:`MIN_BFH` BFH
with every feature stops with one message.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.cohorts.ranges import assign_classes, ranges_from_records
from sphr.errors import ConfigError, InputError
from sphr.io import write_json
from sphr.labels import BONA_FIDE_HEALTHY, SEX_CODE
from sphr.risk.calibration import AgeStandardizer, CalibratedBounds, Healthy
from sphr.risk.comparators import ScoreModel
from sphr.risk.config import (
    REANCHOR_ALL_PARTS,
    REANCHOR_MIN_BFH,
    REANCHOR_PARTS,
    REANCHOR_SEED,
)
from sphr.risk.model import DistanceMethod, RiskModel, ScoreMethod, SexModel
from sphr.risk.model.scoring import new_people
from sphr.risk.population import PopulationSummary

#: every part re-anchoring can refit (module docstring)
PARTS = REANCHOR_ALL_PARTS
#: fewest BFH with every feature per sex (anchor and calibration together): below it the
#: references of the age groups and a 95% bound rest on too few people
MIN_BFH = REANCHOR_MIN_BFH
#: share of each sex's new people (per class) kept apart for the calibrated bounds
CALIBRATION_SHARE = 0.3
#: the provenance file of a re-anchored model folder
PROVENANCE_FILE = "reanchor.json"


def check_parts(parts: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    unknown = [p for p in parts if p not in PARTS]
    if unknown or not parts:
        raise ConfigError(f"re-anchoring parts {unknown or list(parts)}: choose from "
                          f"{', '.join(PARTS)}")
    return tuple(p for p in PARTS if p in parts)


def roles(labels: np.ndarray, seed: int, sex_index: int) -> np.ndarray:
    """``anchor`` / ``calibration`` per person, drawn within each class (seeded)."""
    rng = np.random.default_rng([seed, sex_index])
    out = np.full(len(labels), "anchor", dtype=object)
    for cls in np.unique(labels):
        idx = rng.permutation(np.flatnonzero(labels == cls))
        out[idx[:round(CALIBRATION_SHARE * idx.size)]] = "calibration"
    return out


class _NewPopulation:
    """One sex's people of the export, their class, role and completeness."""

    def __init__(self, model: SexModel, baseline: pd.DataFrame, seed: int, sex_index: int,
                 source: Path | None, min_bfh: int = MIN_BFH) -> None:
        frame = baseline.loc[baseline["sex"] == SEX_CODE[model.sex]]
        self.frame = frame.loc[frame["age"].notna()].reset_index(drop=True)
        self.labels = assign_classes(self.frame, model.sex,
                                     ranges_from_records(model.clinical_ranges_))
        self.roles = roles(self.labels, seed, sex_index)
        self.complete = self.frame[model.features_].notna().all(axis=1).to_numpy()
        bfh = self.complete & (self.labels == BONA_FIDE_HEALTHY)
        self.counts = {"people": len(self.frame), "complete": int(self.complete.sum()),
                       "anchor": int((self.complete & (self.roles == "anchor")).sum()),
                       "bfh_anchor": int((bfh & (self.roles == "anchor")).sum()),
                       "bfh_calibration": int((bfh & (self.roles == "calibration")).sum())}
        n_bfh = self.counts["bfh_anchor"] + self.counts["bfh_calibration"]
        if n_bfh < min_bfh:
            raise InputError(
                f"{model.sex}: {n_bfh} bona fide healthy people with every feature in the "
                f"export; re-anchoring needs at least {min_bfh} per sex (docs/METHODS.md, "
                "'Re-anchoring'): score without --reanchor", file=source)

    def rows(self, role: str, bfh_only: bool) -> pd.DataFrame:
        keep = self.complete & (self.roles == role)
        if bfh_only:
            keep &= self.labels == BONA_FIDE_HEALTHY
        return self.frame.loc[keep].reset_index(drop=True)


def _forms(model: SexModel, rows: pd.DataFrame, age_groups: tuple[tuple[int, int], ...]
           ) -> tuple[Any, dict[str, pd.DataFrame]]:
    """(the people as the model's methods read them, {"quantile", "marker"} cohort frames
    with ``label``, ``augmented`` and ``age_years``)."""
    people = new_people(model, rows, rows, age_groups, {}, None)
    extra = {"label": people.labels, "augmented": False, "age_years": rows["age"].to_numpy(float)}
    forms = {"quantile": people.normalized.assign(**extra)}
    if model.marker_scaler_ is not None:
        forms["marker"] = people.marker().assign(**extra)
    return people, forms


def _distance(method: DistanceMethod, anchor: dict[str, pd.DataFrame],
              calibration: dict[str, pd.DataFrame], parts: tuple[str, ...]) -> DistanceMethod:
    train, cal = anchor[method.input], calibration[method.input]
    space = method.space
    if "references" in parts and space.origin_reference:
        features = next(iter(method.modes.values())).features
        space = space.recentred(train[list(features)].to_numpy(np.float64),
                                train["age_years"].to_numpy(float))
    modes = {mode: m.reanchored(train, cal, space=space, references="references" in parts,
                                standardizer="standardizers" in parts, bounds="bounds" in parts)
             for mode, m in method.modes.items()}
    return DistanceMethod(space, method.input, modes)


def _score(method: ScoreMethod, name: str, anchor: Any, calibration: Any,
           parts: tuple[str, ...]) -> ScoreMethod:
    """A per-person score's standardizer (anchor BFH) and bounds (calibration BFH)."""
    model: ScoreModel = copy.copy(method.model)
    a, c = method.score(anchor, name), method.score(calibration, name)
    healthy = [Healthy(f["distance"].to_numpy(float), f["age_group"].to_numpy(object),
                       f["age_years"].to_numpy(float)) for f in (a, c)]
    if "standardizers" in parts and "bounds" in parts:
        return ScoreMethod(copy.copy(model).fit(*healthy), method.about, method.line,
                           method.supervised)
    anchor_h, cal_h = (h.rows(np.isfinite(h.scores)) for h in healthy)
    if "standardizers" in parts:
        model.standardizer = AgeStandardizer(
            model.standardizer.group_names, model.standardizer.min_group_size,
            model.standardizer.form).fit(anchor_h.scores, anchor_h.groups, anchor_h.ages)
    if "bounds" in parts:
        if cal_h.scores.size < 3:
            raise InputError(f"too few calibration BFH with a {name} score "
                             f"({cal_h.scores.size})")
        model.bounds = CalibratedBounds.fit(model.standardizer.transform(
            cal_h.scores, cal_h.groups, cal_h.ages), model.bounds.tail)
    return ScoreMethod(model, method.about, method.line, method.supervised)


def reanchor_sex(model: SexModel, baseline: pd.DataFrame, age_groups: tuple[tuple[int, int], ...],
                 parts: tuple[str, ...], seed: int, sex_index: int,
                 source: Path | None, min_bfh: int = MIN_BFH
                 ) -> tuple[SexModel, dict[str, Any], pd.DataFrame]:
    """(the re-anchored sex model, its provenance, eid -> role of its people)."""
    pop = _NewPopulation(model, baseline, seed, sex_index, source, min_bfh)
    anchor_all = pop.rows("anchor", bfh_only=False)
    # every part the rule does not name is kept as fitted, the absolute-risk models among
    # them (their distance is measured from the references the score uses; docs/METHODS.md)
    out = model.fitted_copy()
    values = anchor_all[model.features_].to_numpy(float)
    if "normalizer" in parts:
        out.normalizer_ = QuantileNormalizer().fit(values, features=model.features_)
    if "marker_scaler" in parts and model.marker_scaler_ is not None:
        out.marker_scaler_ = MarkerScaler(log=model.marker_scaler_.log).fit(
            values, features=model.features_)
    if {"normalizer", "marker_scaler"} & set(parts):  # drift is then measured against them
        out.population_ = PopulationSummary().fit(values, model.features_)
    people_a, forms_a = _forms(out, pop.rows("anchor", bfh_only=True), age_groups)
    people_c, forms_c = _forms(out, pop.rows("calibration", bfh_only=True), age_groups)
    for name, method in model.methods_.items():
        out.methods_[name] = (_distance(method, forms_a, forms_c, parts)
                              if isinstance(method, DistanceMethod)
                              else _score(method, name, people_a, people_c, parts))
    role = pd.DataFrame({"eid": pop.frame["eid"].to_numpy(np.int64),
                         "role": np.where(pop.complete, pop.roles, "scored only")})
    return out, pop.counts, role


class Reanchored(NamedTuple):
    """What :func:`reanchor` gives: the new model (its ``provenance_`` says what was refitted
    on whom) and each person's role (eid, role: anchor / calibration / scored only)."""

    model: RiskModel
    roles: pd.DataFrame


def reanchor(model: RiskModel, baseline: pd.DataFrame, *,
             parts: tuple[str, ...] | list[str] = REANCHOR_PARTS, seed: int = REANCHOR_SEED,
             source: str | Path | None = None, min_bfh: int = MIN_BFH) -> Reanchored:
    """``model`` with the ``parts`` refitted on ``baseline``'s people (module docstring),
    through :meth:`RiskModel.reanchored` (``model`` itself is left as it is), and the role
    each person had; ``seed`` draws the anchor / calibration split."""
    parts = check_parts(parts)
    source = Path(source) if source is not None else None
    sexes, counts, role_frames = {}, {}, []
    for k, (sex, sex_model) in enumerate(model.sexes_.items()):
        sexes[sex], counts[sex], frame = reanchor_sex(
            sex_model, baseline, model.age_group_bounds, parts, seed, k, source, min_bfh)
        role_frames.append(frame)
    provenance = {"reanchored": list(parts), "kept": [p for p in PARTS if p not in parts],
                  "from_model": str(model.path_), "export": str(source), "seed": seed,
                  "calibration_share": CALIBRATION_SHARE, "min_bfh": min_bfh,
                  "people": counts}
    return Reanchored(model.reanchored(sexes, provenance),
                      pd.concat(role_frames, ignore_index=True))


def save_reanchored(model: RiskModel, directory: str | Path) -> Path:
    """The model folder (as ``sphr risk`` writes one) and its provenance file."""
    if model.provenance_ is None:
        raise InputError("save_reanchored: the model was not re-anchored (no provenance)")
    directory = Path(directory)
    model.save(directory)
    write_json(model.provenance_, directory / PROVENANCE_FILE)
    return directory
