"""Per-sex cohort assets: splits, normalizer, augmentation and triplets from one step."""

import dagster as dg
import numpy as np
import pandas as pd

from sphr import layout
from sphr.settings import RunSettings
from sphr_dagster import metadata as md
from sphr_dagster.config import from_settings, library_config, stage_config
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import RunStorage

#: plausible BFH share of a sex's cohort: the paper has ~5-6%; outside this, suspect units
BFH_SHARE_BOUNDS = (0.005, 0.30)

CohortConfig = stage_config(
    "cohorts", "CohortConfig", "Run configuration of the cohort step: every field of the "
    "library's ``sphr.cohorts.config.CohortConfig`` (the sex comes from the partition); "
    "defaults: the default profile's.", module=__name__)


def _spec(name: str, description: str) -> dg.AssetSpec:
    return dg.AssetSpec(["cohorts", name], group_name="cohorts", description=description,
                        partitions_def=sex_partitions, deps=[["ingest", "baseline"]])


#: what a check's "Execution failed" means: Dagster 1.13 has no "skipped" for a check whose
#: step failed before it could run (a planned check of a failed run resolves to
#: EXECUTION_FAILED), so the description says it; a check that ran and found a problem
#: shows "Failed"
NOT_RUN = ("'Execution failed' here means the cohort step stopped before the check could run "
           "(its error says why); only 'Failed' means the check ran and found a problem.")


@dg.multi_asset(
    specs=[
        _spec("cohort_splits", "Stratified 70/30 train/test split of complete cases with "
              "classes unhealthy / apparently healthy / bona fide healthy."),
        _spec("normalizer", "Quantile normalizer (to N(0,1)) fitted on real training rows."),
        _spec("augmentation", "Rejection-sampled BFH rows for the training partition only."),
        _spec("triplets", "Offline random triplets: int64 row indices into the training matrix."),
    ],
    check_specs=[
        dg.AssetCheckSpec("bfh_share_plausible", asset=["cohorts", "cohort_splits"], blocking=True,
                          description=f"BFH share of the cohort within {BFH_SHARE_BOUNDS}. "
                          + NOT_RUN),
        dg.AssetCheckSpec("no_test_participant_in_training", asset=["cohorts", "cohort_splits"],
                          blocking=True, description="Train and test share no participant; "
                          "augmented rows are in training only. " + NOT_RUN),
    ],
    partitions_def=sex_partitions,
    ins={"baseline": dg.AssetIn(["ingest", "baseline"], input_manager_key="parquet_io")},
)
def cohorts(context: dg.AssetExecutionContext, config: CohortConfig, storage: RunStorage,
            baseline: pd.DataFrame):
    from sphr.cohorts import build_cohorts
    from sphr.cohorts.build import write_sex_cohort
    from sphr.cohorts.plots import augmentation_check, classes_by_age_group
    from sphr.io import staged_outputs

    sex = context.partition_key
    settings = library_config("cohorts", config, sexes=(sex,))
    built, report = build_cohorts(baseline, settings)
    cohort = built[sex]
    out = layout.cohort_dir(storage.run, sex)
    with staged_outputs(out) as stage:
        write_sex_cohort(cohort, stage)
    r = cohort.report
    labels = cohort.train["label"].to_numpy()

    yield dg.MaterializeResult(asset_key=["cohorts", "cohort_splits"], metadata={
        "path": md.path(out), "participants": r["participants"],
        "train_rows": len(cohort.train), "test_rows": len(cohort.test),
        "calibration_rows": len(cohort.calibration),
        "bfh_share": r["bfh_share"], "classes": md.table(pd.DataFrame(
            {k: r[k] for k in ("classes", "train", "test", "augmented")})),
        "dropped_features": dg.MetadataValue.json(report["dropped_features"]),
        "classes_by_age_group": md.image(classes_by_age_group(r), "classes by age group"),
    })
    yield dg.MaterializeResult(asset_key=["cohorts", "normalizer"], metadata={
        "path": md.path(out / "normalizer.json"), "features": len(cohort.features),
        "dropped_constant": str(r["dropped_constant"]),
    })
    aug = r["augmentation"].get("bona_fide_healthy", {})
    yield dg.MaterializeResult(asset_key=["cohorts", "augmentation"], metadata={
        "new_rows": aug.get("new_rows", 0), "fold": aug.get("fold", 0),
        "rounds": aug.get("rounds", 0),
        "real_vs_augmented": md.image(augmentation_check(cohort.train_raw, labels),
                                      "real vs augmented BFH"),
    })
    yield dg.MaterializeResult(asset_key=["cohorts", "triplets"], metadata={
        "path": md.path(out / "triplets.npz"), "triplets": r["triplets"]["n"],
        "anchor_classes": dg.MetadataValue.json(r["triplets"]["anchor_classes"]),
        "seconds": r["triplets"]["seconds"],
    })

    lo, hi = BFH_SHARE_BOUNDS
    yield dg.AssetCheckResult(
        check_name="bfh_share_plausible", asset_key=["cohorts", "cohort_splits"],
        passed=bool(lo <= r["bfh_share"] <= hi), severity=dg.AssetCheckSeverity.ERROR,
        metadata={"bfh_share": r["bfh_share"], "bounds": str(BFH_SHARE_BOUNDS)})
    overlap = np.intersect1d(cohort.train["eid"], cohort.test["eid"]).size
    held_out = np.concatenate([cohort.test["eid"], cohort.calibration["eid"]])
    calib_overlap = np.intersect1d(cohort.train["eid"], held_out).size - overlap
    aug_in_test = int(cohort.test["augmented"].sum())
    yield dg.AssetCheckResult(
        check_name="no_test_participant_in_training", asset_key=["cohorts", "cohort_splits"],
        passed=overlap == 0 and calib_overlap == 0 and aug_in_test == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        description="no test or calibration participant among the training rows",
        metadata={"shared_participants": int(overlap),
                  "calibration_participants_in_training": int(calib_overlap),
                  "augmented_rows_in_test": aug_in_test,
                  "calibration_rows": len(cohort.calibration)})


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    return {cohorts: from_settings(CohortConfig, settings.stages["cohorts"])}
