"""Per-sex baseline representations: raw, PCA, ICA, DiffMap, DeepPatient."""

import dagster as dg

from sphr import layout
from sphr.settings import RunSettings
from sphr_dagster import metadata as md
from sphr_dagster.config import from_settings, library_config, stage_config
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage

BaselinesConfig = stage_config(
    "baselines", "BaselinesConfig", "Which representations to fit, with what seed "
    "(DeepPatient epochs per layer, DiffMap landmarks): every field of the library's "
    "``sphr.baselines.config.BaselinesConfig`` (the device is the compute resource's).",
    module=__name__)


@dg.asset(key=["baselines", "representations"], group_name="baselines",
          partitions_def=sex_partitions, deps=[["cohorts", "cohort_splits"]],
          description="Representations R^n -> R^32 fitted on real training rows only and applied "
          "to train and test: not transformed, PCA, ICA, DiffMap (landmarks + Nystroem), "
          "DeepPatient (stacked denoising autoencoders).",
          check_specs=[dg.AssetCheckSpec("embedding_finite", asset=["baselines", "representations"],
                                         blocking=True)])
def baseline_representations(context: dg.AssetExecutionContext, config: BaselinesConfig,
                             storage: RunStorage, compute: Compute):
    import numpy as np
    import pandas as pd

    from sphr.artifacts import read_embeddings
    from sphr.baselines.pipeline import run_baselines

    sex = context.partition_key
    settings = library_config("baselines", config, device=compute.device)
    params = {"deep_patient": {"epochs": settings.deep_patient_epochs},
              "diffmap": {"n_landmarks": settings.diffmap_landmarks}}
    out = layout.baselines_dir(storage.run, sex)
    report = run_baselines(layout.cohort_dir(storage.run, sex), out, settings.representations,
                           seed=settings.seed, device=settings.device, params=params,
                           use_augmented=settings.use_augmented)
    reps = report["representations"]
    bad = {}
    for name in settings.representations:
        for part in ("train", "test"):
            _, Z = read_embeddings(out / name / f"embeddings_{part}.parquet")
            bad[f"{name}/{part}"] = int((~np.isfinite(Z)).any(axis=1).sum())
    timings = pd.DataFrame({n: {"fit_s": r["fit_s"], "transform_s": r["transform_s"],
                                "fit_rows": r["n_fit_rows"], "width": r["width"]}
                            for n, r in reps.items()}).T
    yield dg.MaterializeResult(metadata={
        "path": md.path(out), "representations": md.table(timings),
        "fitted_on": reps[settings.representations[0]]["fitted_on"],
    })
    yield dg.AssetCheckResult(passed=not any(bad.values()), severity=dg.AssetCheckSeverity.ERROR,
                              metadata={"rows_not_finite": dg.MetadataValue.json(bad)})


@dg.asset(key=["baselines", "fold_representations"], group_name="baselines",
          partitions_def=sex_partitions, deps=[["cohorts", "cohort_splits"]],
          description="The cross-fit's DeepPatient: one per fold of the cohort, fitted on the "
          "other folds (baselines/folds/<sex>/fold<k>/); the risk stage scores each fold's "
          "people with its own fold's. None when the cohort has no folds.")
def fold_representations(context: dg.AssetExecutionContext, config: BaselinesConfig,
                         storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
    from sphr.baselines.pipeline import FOLD_REPRESENTATIONS, fit_fold_baselines

    sex = context.partition_key
    settings = library_config("baselines", config, device=compute.device)
    names = [n for n in FOLD_REPRESENTATIONS if n in settings.representations]
    out = layout.fold_baselines_dir(storage.run, sex, 0).parent
    reports = fit_fold_baselines(layout.cohort_dir(storage.run, sex), out, seed=settings.seed,
                                 device=settings.device, names=names,
                                 params={"deep_patient": {"epochs": settings.deep_patient_epochs}})
    return dg.MaterializeResult(metadata={
        "path": md.path(out), "folds": len(reports), "representations": ", ".join(names),
        "fit_s": round(sum(r["representations"][n]["fit_s"] for r in reports for n in names),
                       1)})


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    baselines = from_settings(BaselinesConfig, settings.stages["baselines"])
    return {baseline_representations: baselines, fold_representations: baselines}
