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


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    return {baseline_representations: from_settings(BaselinesConfig, settings.stages["baselines"])}
