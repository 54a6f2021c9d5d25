"""Per-sex SPHR training with the NPLB loss (the model and the participants' embeddings), and
the loss comparison (one model per loss, the evaluation's loss table reads them)."""

import dagster as dg
import numpy as np

from sphr import layout
from sphr.profiles import DEFAULT_PROFILE
from sphr.train.config import COMPARISON_LOSSES
from sphr_dagster import metadata as md
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage


class TrainingConfig(dg.Config):
    """Run configuration of SPHR training (defaults: the demo profile; `paper` = 1000 epochs)."""

    profile: str = DEFAULT_PROFILE
    loss: str = "nplb"
    seed: int = 0
    epochs: int | None = None
    batch_size: int | None = None
    #: "pipes": `python -m sphr.train.pipes_entry` launched by the pipes_client resource (a
    #: subprocess by default; PipesK8sClient for a GPU node, README); "in_process": call
    #: sphr.train.run_train in the step's own process
    launcher: str = "pipes"


@dg.multi_asset(
    specs=[
        dg.AssetSpec(["train", "sphr_model"], group_name="training", partitions_def=sex_partitions,
                     deps=[["cohorts", "triplets"], ["cohorts", "cohort_splits"]],
                     description="The SPHR MLP (n -> 512 -> 256 -> 32, PReLU) trained with the "
                     "NPLB loss on the cohort's triplets."),
        dg.AssetSpec(["train", "embeddings"], group_name="training", partitions_def=sex_partitions,
                     deps=[["train", "sphr_model"]],
                     description="32-d SPHR embeddings of the training and test participants."),
    ],
    check_specs=[dg.AssetCheckSpec("embedding_finite", asset=["train", "embeddings"],
                                   blocking=True, description="No NaN or inf in any embedding.")],
    partitions_def=sex_partitions,
)
def sphr_training(context: dg.AssetExecutionContext, config: TrainingConfig,
                  storage: RunStorage, compute: Compute,
                  pipes_client: dg.PipesSubprocessClient):
    import dataclasses
    import sys

    import pandas as pd

    from sphr.artifacts import read_embeddings
    from sphr.evaluate.plots import representation_scatter
    from sphr.io import read_json
    from sphr.train import TrainConfig, run_train

    sex = context.partition_key
    overrides = {"loss": config.loss, "seed": config.seed, "device": compute.device}
    if config.epochs is not None:
        overrides["epochs"] = config.epochs
    if config.batch_size is not None:
        overrides["batch_size"] = config.batch_size
    out = layout.train_dir(storage.run, sex, config.loss)
    reported = {}
    if config.launcher == "pipes":
        # the training side needs only sphr and dagster-pipes; it reports the loss curve and
        # metrics back as materialization metadata
        command = [sys.executable, "-m", "sphr.train.pipes_entry",
                   str(layout.cohort_dir(storage.run, sex)), str(out)]
        results = pipes_client.run(context=context, command=command,
                                   extras={"profile": config.profile, "overrides": overrides}
                                   ).get_results()
        reported = {k: v for r in results if r.asset_key == dg.AssetKey(["train", "sphr_model"])
                    for k, v in (r.metadata or {}).items()}
    elif config.launcher == "in_process":
        settings = dataclasses.replace(TrainConfig.profile(config.profile), **overrides)
        run_train(layout.cohort_dir(storage.run, sex), out, settings)
    else:
        raise ValueError(f"launcher {config.launcher!r}: choose pipes or in_process")

    report = read_json(out / "train_report.json")
    curve = pd.read_parquet(out / "loss_curve.parquet")
    meta, Z = read_embeddings(out / "embeddings_test.parquet")
    _, Z_train = read_embeddings(out / "embeddings_train.parquet")
    curve_png = (out / "loss_curve.png").read_bytes() if (out / "loss_curve.png").exists() else None
    model_meta = {
        "path": md.path(out / "model.pt"), "profile": config.profile, "loss": config.loss,
        "epochs": len(curve), "final_loss": float(curve["loss"].iloc[-1]),
        "train_report": dg.MetadataValue.json(report),
    }
    if curve_png:
        model_meta["loss_curve"] = md.image(curve_png, "loss curve")
    model_meta.update(reported)  # what the Pipes side reported (loss curve, metrics)
    model_meta["launcher"] = config.launcher
    yield dg.MaterializeResult(asset_key=["train", "sphr_model"], metadata=model_meta)
    yield dg.MaterializeResult(asset_key=["train", "embeddings"], metadata={
        "path": md.path(out / "embeddings_test.parquet"), "test_rows": len(Z),
        "train_rows": len(Z_train), "width": int(Z.shape[1]),
        "test_embedding": md.image(representation_scatter(
            "sphr", Z, meta["label"].to_numpy(np.int64), seed=config.seed), "SPHR embedding"),
    })
    bad = int((~np.isfinite(Z)).any(axis=1).sum() + (~np.isfinite(Z_train)).any(axis=1).sum())
    yield dg.AssetCheckResult(check_name="embedding_finite", asset_key=["train", "embeddings"],
                              passed=bad == 0, severity=dg.AssetCheckSeverity.ERROR,
                              metadata={"rows_not_finite": bad})


class LossComparisonConfig(dg.Config):
    """The loss comparison (Table 3 / A2): which losses, trained together with one profile."""

    losses: list[str] = list(COMPARISON_LOSSES)
    profile: str = DEFAULT_PROFILE
    seed: int = 0
    epochs: int | None = None
    batch_size: int | None = None


@dg.asset(key=["train", "loss_comparison"], group_name="training", partitions_def=sex_partitions,
          deps=[["cohorts", "triplets"], ["cohorts", "cohort_splits"], ["train", "sphr_model"]],
          description="One SPHR model per loss (Table 3 / A2), trained as one stack with the same "
          "data, triplets, seed and settings; the embeddings of each in "
          "train/<sex>/comparison/<loss>/. NPLB is copied from train/sphr_model when its config "
          "and data match. The evaluation reads them.")
def loss_comparison(context: dg.AssetExecutionContext, config: LossComparisonConfig,
                    storage: RunStorage, compute: Compute) -> dg.MaterializeResult:
    from sphr.train.comparison import train_loss_comparison

    sex = context.partition_key
    overrides = {k: v for k, v in (("epochs", config.epochs), ("batch_size", config.batch_size))
                 if v is not None}
    out = layout.comparison_dir(storage.run, sex)
    report = train_loss_comparison(layout.cohort_dir(storage.run, sex), out, config.losses,
                                   profile=config.profile, seed=config.seed,
                                   device=compute.device, overrides=overrides)
    return dg.MaterializeResult(metadata={
        "path": md.path(out), "losses": ", ".join(config.losses), "profile": config.profile,
        "trained": ", ".join(report["trained"]) or "none",
        "reused": ", ".join(report["reused"] + report["from_training_stage"]) or "none",
        "train_s": report.get("train_s", 0.0),
        "comparison_report": dg.MetadataValue.json(report),
    })
