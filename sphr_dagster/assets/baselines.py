"""Per-sex baseline representations: raw, PCA, ICA, DiffMap, DeepPatient."""

import dagster as dg

from sphr import layout
from sphr.baselines.config import BaselinesConfig as Settings
from sphr_dagster import metadata as md
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage

#: the library's defaults, which this asset's run configuration takes as its own
_DEFAULTS = Settings()


class BaselinesConfig(dg.Config):
    """Which representations to fit, with what seed (DeepPatient epochs per layer, DiffMap
    landmarks). Defaults are the library's (``sphr.baselines.config.BaselinesConfig``)."""

    representations: list[str] = list(_DEFAULTS.representations)
    seed: int = _DEFAULTS.seed
    deep_patient_epochs: int = _DEFAULTS.deep_patient_epochs
    diffmap_landmarks: int = _DEFAULTS.diffmap_landmarks


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
    params = {"deep_patient": {"epochs": config.deep_patient_epochs},
              "diffmap": {"n_landmarks": config.diffmap_landmarks}}
    out = layout.baselines_dir(storage.run, sex)
    report = run_baselines(layout.cohort_dir(storage.run, sex), out, config.representations,
                           seed=config.seed, device=compute.device, params=params)
    reps = report["representations"]
    bad = {}
    for name in config.representations:
        for part in ("train", "test"):
            _, Z = read_embeddings(out / name / f"embeddings_{part}.parquet")
            bad[f"{name}/{part}"] = int((~np.isfinite(Z)).any(axis=1).sum())
    timings = pd.DataFrame({n: {"fit_s": r["fit_s"], "transform_s": r["transform_s"],
                                "fit_rows": r["n_fit_rows"], "width": r["width"]}
                            for n, r in reps.items()}).T
    yield dg.MaterializeResult(metadata={
        "path": md.path(out), "representations": md.table(timings),
        "fitted_on": reps[config.representations[0]]["fitted_on"],
    })
    yield dg.AssetCheckResult(passed=not any(bad.values()), severity=dg.AssetCheckSeverity.ERROR,
                              metadata={"rows_not_finite": dg.MetadataValue.json(bad)})
