"""The risk stage's fit on a run directory: each sex's cohort read into the inputs
:meth:`sphr.risk.model.RiskModel.fit` takes (:class:`~sphr.risk.model.CohortInputs`).

What is read, and only where a configured method needs it: ``cohorts/<sex>/`` (the
normalized partitions, the normalizer, the clinical ranges of ``cohort_report.json``, the
raw values of the marker space), the representations of the earlier stages (DeepPatient's
``baselines/<sex>/deep_patient/model.joblib``, SPHR's ``train/<sex>/nplb/model.pt``), and
for the comparators and the absolute-risk models ``ingest/baseline.parquet`` (PhenoAge's
markers as measured) and ``ingest/outcomes.parquet`` (linked outcomes), and
``ingest/followup.parquet`` (the supervised repeat-visit target). An
input a method cannot do without is recorded with the reason, and the fit skips that
method with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from sphr.cohorts.age import DEFAULT_AGE_GROUPS
from sphr.cohorts.normalize import QuantileNormalizer
from sphr.errors import InputError
from sphr.io import read_json
from sphr.layout import (
    baselines_dir,
    cohort_dir,
    fold_baselines_dir,
    fold_cohort_dir,
    fold_train_dir,
    ingest_dir,
    train_dir,
)
from sphr.risk.config import MARKER_SPACE_METHODS, RiskConfig
from sphr.risk.model import PARTITIONS, CohortInputs, RiskModel
from sphr.risk.phenoage import REQUIRED


def read_age_groups(run: Path) -> tuple[tuple[int, int], ...] | None:
    """The age groups ``sphr cohorts`` used (its report), or None for the default."""
    report = Path(run) / "cohorts" / "cohort_report.json"
    if report.exists():
        groups = read_json(report).get("config", {}).get("age_groups")
        if groups:
            return tuple(tuple(int(v) for v in g) for g in groups)
    # a partitioned (Dagster) run writes only each sex's report
    for path in sorted((Path(run) / "cohorts").glob("*/cohort_report.json")):
        groups = read_json(path).get("age_group_bounds")
        if groups:
            return tuple(tuple(int(v) for v in g) for g in groups)
    return None


def age_groups(run: Path) -> tuple[tuple[int, int], ...]:
    return read_age_groups(run) or DEFAULT_AGE_GROUPS


def clinical_ranges(run: Path, sex: str) -> list[dict]:
    """The P0 ranges ``sphr cohorts`` used for ``sex`` (its report), as records."""
    from sphr.cohorts.ranges import P0_RANGES, ranges_for

    report = cohort_dir(run, sex) / "cohort_report.json"
    records = read_json(report).get("clinical_ranges") if report.exists() else None
    return records or [asdict(r) for r in ranges_for(sex, P0_RANGES)]


def _raw(cdir: Path, part: str, frame: pd.DataFrame) -> pd.DataFrame:
    path = cdir / f"{part}_raw.parquet"
    if not path.exists():
        raise InputError(f"missing {part}_raw.parquet (re-run `sphr cohorts`)", file=path)
    raw = pd.read_parquet(path)
    if len(frame) != len(raw) or not np.array_equal(frame["eid"].to_numpy(),
                                                    raw["eid"].to_numpy()):
        raise InputError(f"{part}_raw.parquet and {part}.parquet list other participants",
                         file=path, field="eid")
    return raw


def first_visit_any(run: Path) -> pd.Series:
    """New diagnosis (any) at the first repeat visit, indexed by eid (absent: no visit)."""
    from sphr.risk.followup import new_any_diagnosis

    path = ingest_dir(run) / "followup.parquet"
    if not path.exists():
        raise InputError("no follow-up visits to learn from", file=path)
    fu = pd.read_parquet(path)
    fu = fu.loc[fu["instance"] == 1].drop_duplicates("eid").set_index("eid")
    if fu.empty:
        raise InputError("nobody has a repeat visit", file=path)
    return new_any_diagnosis(fu).dropna().astype(bool)


def _read_comparators(run: Path, inputs: CohortInputs, config: RiskConfig) -> None:
    """PhenoAge's markers and the linked outcomes (PhenoAge, the supervised targets and the
    absolute-risk models read them), and the repeat visits where the supervised comparators
    are configured."""
    path = ingest_dir(run) / "baseline.parquet"
    if path.exists():
        present = set(pq.read_schema(path).names)
        inputs.baseline = pd.read_parquet(path, columns=["eid", *[c for c in REQUIRED
                                                                   if c != "age" and c in present]])
    else:
        inputs.unavailable["phenoage"] = str(InputError(
            "PhenoAge reads the raw markers of the baseline (run `sphr ingest`)", file=path))
    outcomes = ingest_dir(run) / "outcomes.parquet"
    if outcomes.exists():
        inputs.outcomes = pd.read_parquet(outcomes)
    if "calibrated" not in config.modes:
        return
    if "supervised_xgboost" in config.methods:
        try:
            inputs.first_visit = first_visit_any(run)
        except InputError as exc:
            inputs.unavailable["supervised_xgboost"] = f"repeat visit: {exc}"


def read_inputs(run: str | Path, sex: str, config: RiskConfig, fold: int | None = None
                ) -> CohortInputs:
    """One sex's cohort of ``run`` in the forms ``config``'s methods read (module docstring);
    ``fold``: the cross-fit's fold ``fold`` instead (its cohort, which fits on the other folds
    and tests on this one, and the SPHR and DeepPatient models fitted on it)."""
    from sphr.artifacts import load_cohort

    run = Path(run)
    cdir = cohort_dir(run, sex) if fold is None else fold_cohort_dir(run, sex, fold)
    representations = (
        {"deep_patient": baselines_dir(run, sex) / "deep_patient" / "model.joblib",
         "sphr": train_dir(run, sex) / "model.pt"} if fold is None else
        {"deep_patient": fold_baselines_dir(run, sex, fold) / "deep_patient" / "model.joblib",
         "sphr": fold_train_dir(run, sex, fold) / "model.pt"})
    cohort = load_cohort(cdir)
    if cohort.calibration.empty and "calibrated" in config.modes:
        raise InputError("no calibration partition: re-run `sphr cohorts` (calibration_size > 0)",
                         file=cdir / "calibration.parquet")
    inputs = CohortInputs(
        sex, cohort.features, cohort.train, cohort.calibration, cohort.test,
        QuantileNormalizer.load(cdir / "normalizer.json"), clinical_ranges(run, sex),
        representations=representations)
    if config.distance_space == "marker" and set(config.methods) & set(MARKER_SPACE_METHODS):
        inputs.raw = {part: _raw(cdir, part, getattr(cohort, part)) for part in PARTITIONS}
        if (cdir / "imputed.parquet").is_file():
            inputs.imputed = pd.read_parquet(cdir / "imputed.parquet")
    _read_comparators(run, inputs, config)
    return inputs


def fit_run(run: str | Path, config: RiskConfig, sexes: Sequence[str] | None = None
            ) -> RiskModel:
    """The risk model of ``run``'s cohorts (``sexes``: default ``config.sexes``), fitted."""
    config.check()
    return RiskModel(config, age_groups(Path(run))).fit(
        [read_inputs(run, sex, config) for sex in (sexes or config.sexes)])
