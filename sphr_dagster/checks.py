"""Asset checks on the ingested tables (checks that live beside their asset's
computation, e.g. the cohort checks, are declared there as ``check_specs``)."""

from __future__ import annotations

import dagster as dg
import pandas as pd

from sphr_dagster import metadata as md

REQUIRED_COLUMNS = ("eid", "sex", "age", "label", "diabetes", "cancer", "other_serious")


@dg.asset_check(asset=["ingest", "baseline"], blocking=True,
                description="Sex, age, conditions and label are present; predictors are not "
                "entirely missing.")
def required_fields_present(baseline: pd.DataFrame) -> dg.AssetCheckResult:
    from sphr.data.fields import PREDICTOR_NAMES

    missing = [c for c in REQUIRED_COLUMNS if c not in baseline.columns]
    empty = [c for c in PREDICTOR_NAMES if c in baseline.columns and baseline[c].isna().all()]
    return dg.AssetCheckResult(
        passed=not missing and len(empty) < len(PREDICTOR_NAMES),
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"missing_columns": str(missing), "empty_predictors": str(empty)},
    )


@dg.asset_check(asset=["ingest", "baseline"],
                description="Each predictor's completeness; below 75% it will be dropped.")
def completeness_per_field(baseline: pd.DataFrame) -> dg.AssetCheckResult:
    from sphr.data.fields import PREDICTOR_NAMES

    share = baseline[list(PREDICTOR_NAMES)].notna().mean().sort_values()
    low = share[share < 0.75]
    return dg.AssetCheckResult(
        passed=low.empty, severity=dg.AssetCheckSeverity.WARN,
        metadata={"below_75_percent": md.table(low.to_frame("completeness")),
                  "least_complete": md.table(share.head(8).to_frame("completeness"))},
    )


@dg.asset_check(asset=["ingest", "baseline"], blocking=True,
                description="Both sexes have unhealthy and apparently healthy participants.")
def label_counts_nonzero(baseline: pd.DataFrame) -> dg.AssetCheckResult:
    counts = baseline.groupby(["sex", "label"]).size().unstack(fill_value=0)
    ok = all(counts.get(lbl, pd.Series(0, index=[0, 1])).reindex([0, 1], fill_value=0).gt(0).all()
             for lbl in ("unhealthy", "apparently_healthy"))
    return dg.AssetCheckResult(passed=bool(ok), severity=dg.AssetCheckSeverity.ERROR,
                               metadata={"counts": md.table(counts)})
