"""Per-sex baseline representations: raw, PCA, ICA, DiffMap, DeepPatient."""

import dagster as dg

from pipeline import metadata as md
from pipeline.partitions import sex_partitions
from pipeline.resources import Compute, RunStorage
from sphr import layout


class BaselinesConfig(dg.Config):
    """Which representations to fit, with what seed (DeepPatient epochs per layer, DiffMap landmarks)."""

    representations: list[str] = ["raw", "pca", "ica", "diffmap", "deep_patient"]
    seed: int = 0
    deep_patient_epochs: int | None = None
    diffmap_landmarks: int | None = None


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

    from sphr.baselines.pipeline import read_embeddings, run_baselines

    sex = context.partition_key
    params: dict[str, dict] = {}
    if config.deep_patient_epochs is not None:
        params["deep_patient"] = {"epochs": config.deep_patient_epochs}
    if config.diffmap_landmarks is not None:
        params["diffmap"] = {"n_landmarks": config.diffmap_landmarks}
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
