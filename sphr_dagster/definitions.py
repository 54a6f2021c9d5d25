"""The code location: every asset, check, job, schedule, sensor and resource in one place."""

from __future__ import annotations

import dagster as dg

from sphr_dagster import checks
from sphr_dagster.assets import (
    baselines,
    cohorts,
    evaluation,
    ingest,
    refresh,
    retrieval,
    risk,
    training,
)
from sphr_dagster.automation import (
    cohort_refresh,
    monthly_retrain,
    new_export_sensor,
    retrain,
    risk_refresh,
    sphr_pipeline,
    weekly_risk_refresh,
)
from sphr_dagster.resources import default_resources

ASSET_MODULES = (ingest, cohorts, training, baselines, evaluation, risk, retrieval, refresh)
#: asset groups partitioned by sex, the groups that read both sexes (run after them), and
#: the groups that read neither (run beside them)
PER_SEX_GROUPS = ("cohorts", "training", "baselines", "evaluation", "risk")
CROSS_SEX_GROUPS = ("evaluation_report", "risk_report")
STANDALONE_GROUPS = ("retrieval",)

ASSETS = dg.load_assets_from_modules(ASSET_MODULES)
CHECKS = dg.load_asset_checks_from_modules([checks, refresh])

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[cohort_refresh, sphr_pipeline, risk_refresh, retrain],
    schedules=[weekly_risk_refresh, monthly_retrain],
    sensors=[new_export_sensor],
    resources=default_resources(),
)
