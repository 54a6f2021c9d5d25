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
    retrieval_comparison,
    risk_refresh,
    sphr_pipeline,
    unattended_failure_reason,
    unattended_success,
    weekly_risk_refresh,
)
from sphr_dagster.resources import default_resources

ASSET_MODULES = (ingest, cohorts, training, baselines, evaluation, risk, retrieval, refresh)
#: the modules whose assets take run config (each has ``configs(settings)``)
CONFIGURED_MODULES = (ingest, cohorts, training, baselines, evaluation, risk, retrieval)

ASSETS = dg.load_assets_from_modules(ASSET_MODULES)
CHECKS = dg.load_asset_checks_from_modules([checks, refresh])

# What `python -m sphr_dagster run` materializes, in this order (their asset checks with
# them): the export and its ingest; every per-sex asset, one run per sex partition, beside
# the image-retrieval comparison (it reads neither sex's folders); then the merges of both
# sexes. The loss comparison is per sex; a run without it leaves it (and the loss table) out.
INGEST = dg.AssetSelection.assets(ingest.ukb_export, ingest.ingest)
PER_SEX = dg.AssetSelection.assets(cohorts.cohorts, training.sphr_training,
                                   training.fold_models, training.loss_comparison,
                                   baselines.baseline_representations,
                                   baselines.fold_representations,
                                   evaluation.evaluation_tables, risk.risk_groups)
LOSS_COMPARISON = dg.AssetSelection.assets(training.loss_comparison)
RETRIEVAL = dg.AssetSelection.assets(*retrieval.retrieval_assets)
CROSS_SEX = dg.AssetSelection.assets(evaluation.evaluation_report, risk.risk_report)

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS,
    jobs=[cohort_refresh, sphr_pipeline, retrieval_comparison, risk_refresh, retrain],
    schedules=[weekly_risk_refresh, monthly_retrain],
    sensors=[new_export_sensor, unattended_failure_reason, unattended_success],
    resources=default_resources(),
)
