"""Per-sex SPHR training with the NPLB loss (the model and the participants' embeddings), and
the loss comparison (one model per loss, the evaluation's loss table reads them)."""

import dagster as dg
import numpy as np

from sphr import layout
from sphr.profiles import DEFAULT_PROFILE, PROFILES
from sphr.settings import RunSettings, stage_defaults, stage_docs
from sphr_dagster import metadata as md
from sphr_dagster.config import PROFILE_TAG, from_settings, library_config, stage_config
from sphr_dagster.fits import Fit, FitEngine, fit_log_dir
from sphr_dagster.partitions import sex_partitions
from sphr_dagster.resources import Compute, RunStorage

#: the keys of [train] that are not TrainConfig's: the comparison's loss list
_COMPARISON_KEYS = ("comparison_losses",)

TrainingConfig = stage_config(
    "train", "TrainingConfig", "Run configuration of SPHR training: every field of the "
    "library's ``sphr.train.config.TrainConfig`` (the device is the compute resource's); "
    "defaults: the default profile's. Where the fits run is the fit_engine resource's "
    "(docs/SCALE_OUT.md).", drop=_COMPARISON_KEYS, module=__name__)


def profile_label(context: dg.AssetExecutionContext) -> str:
    """The profile the run's settings came from (the run tag), for the reports; a launch
    without the tag ran the Config's defaults, the default profile's."""
    profile = context.run.tags.get(PROFILE_TAG, DEFAULT_PROFILE)
    return profile if profile in PROFILES else DEFAULT_PROFILE


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
                  storage: RunStorage, compute: Compute, fit_engine: FitEngine):
    from sphr.artifacts import read_embeddings
    from sphr.evaluate.plots import representation_scatter
    from sphr.train.pipes_entry import CONFIG_EXTRA

    sex = context.partition_key
    # the one TrainConfig of this step, from the Config and the compute resource's device;
    # it travels to the trainer as itself (to_dict / from_dict across Pipes)
    settings = library_config("train", config, device=compute.device)
    out = layout.train_dir(storage.run, sex, settings.loss)
    # the fit through the engine (the step's process, a subprocess, a cluster's job); it
    # reports the model's metadata (sphr.train.run.model_metadata) as the materialization's
    fit = Fit(sex, ("--fit", sex, str(layout.cohort_dir(storage.run, sex)), str(out)),
              {CONFIG_EXTRA: settings.to_dict()}, str(fit_log_dir(storage.run)))
    model_meta = fit_engine.run_fits(context, [fit])[sex]
    model_meta.update(profile=profile_label(context), loss=settings.loss,
                      **fit_engine.where())
    meta, Z = read_embeddings(out / "embeddings_test.parquet")
    _, Z_train = read_embeddings(out / "embeddings_train.parquet")
    yield dg.MaterializeResult(asset_key=["train", "sphr_model"], metadata=model_meta)
    yield dg.MaterializeResult(asset_key=["train", "embeddings"], metadata={
        "path": md.path(out / "embeddings_test.parquet"), "test_rows": len(Z),
        "train_rows": len(Z_train), "width": int(Z.shape[1]),
        "test_embedding": md.image(representation_scatter(
            "sphr", Z, meta["label"].to_numpy(np.int64), seed=settings.seed), "SPHR embedding"),
    })
    bad = int((~np.isfinite(Z)).any(axis=1).sum() + (~np.isfinite(Z_train)).any(axis=1).sum())
    yield dg.AssetCheckResult(check_name="embedding_finite", asset_key=["train", "embeddings"],
                              passed=bad == 0, severity=dg.AssetCheckSeverity.ERROR,
                              metadata={"rows_not_finite": bad})


@dg.asset(key=["train", "fold_models"], group_name="training", partitions_def=sex_partitions,
          deps=[["cohorts", "cohort_splits"]],
          description="The cross-fit's SPHR models: one per fold of the cohort, each trained "
          "on the other folds with the same settings as train/sphr_model (train/<sex>/folds/"
          "fold<k>/); the risk stage scores each fold's people with its own fold's model. "
          "None when the cohort has no folds ([cohorts] folds = 0).")
def fold_models(context: dg.AssetExecutionContext, config: TrainingConfig, storage: RunStorage,
                compute: Compute, fit_engine: FitEngine) -> dg.MaterializeResult:
    from sphr.io import read_json
    from sphr.train.pipes_entry import CONFIG_EXTRA, fold_metadata
    from sphr.train.run import completed_fit, fold_fits

    sex = context.partition_key
    settings = library_config("train", config, device=compute.device)
    cohort = layout.cohort_dir(storage.run, sex)
    out = layout.fold_train_dir(storage.run, sex, 0).parent
    fits = fold_fits(cohort, out)
    if not fits:
        return dg.MaterializeResult(metadata={"folds": 0, "note": "single split: no folds"})
    # one fit per fold, the engine's unit; a fold already fitted (this config, this data:
    # a re-execution after lost fits) is kept, so only the lost ones are launched
    todo = [(k, o) for k, c, o in fits if completed_fit(c, o, settings) is None]
    fit_engine.run_fits(context, [
        Fit(f"{sex}/fold{k}", ("--fold", str(k), "--fit", f"{sex}/fold{k}", str(cohort),
                               str(out)), {CONFIG_EXTRA: settings.to_dict()},
            str(fit_log_dir(storage.run))) for k, _ in todo])
    engine = {**fit_engine.where(), "trained": ", ".join(f"fold{k}" for k, _ in todo) or "none",
              "kept": ", ".join(f"fold{k}" for k, _, _ in fits if k not in dict(todo))
              or "none"}
    reports = [read_json(o / "train_report.json") for _, _, o in fits]
    return dg.MaterializeResult(metadata={**md.from_pipes(fold_metadata(reports)), **engine,
                                          "path": md.path(out),
                                          "profile": profile_label(context)})


LossComparisonConfig = stage_config(
    "train", "LossComparisonConfig", "The loss comparison (Table 3 / A2): which losses, "
    "trained together with the same settings (those of ``sphr.train.config.TrainConfig``, as "
    "for train/sphr_model, which it copies NPLB from when they match); defaults: the default "
    "profile's.", drop=("loss", *_COMPARISON_KEYS), module=__name__, extra={
        "losses": (list[str], list(stage_defaults("train")["comparison_losses"]),
                   stage_docs("train")["comparison_losses"])})


@dg.asset(key=["train", "loss_comparison"], group_name="training", partitions_def=sex_partitions,
          deps=[["cohorts", "triplets"], ["cohorts", "cohort_splits"], ["train", "sphr_model"]],
          description="One SPHR model per loss (Table 3 / A2), trained as one stack with the same "
          "data, triplets, seed and settings; the embeddings of each in "
          "train/<sex>/comparison/<loss>/. NPLB is copied from train/sphr_model when its config "
          "and data match. The evaluation reads them.")
def loss_comparison(context: dg.AssetExecutionContext, config: LossComparisonConfig,
                    storage: RunStorage, compute: Compute,
                    fit_engine: FitEngine) -> dg.MaterializeResult:
    from sphr.train.pipes_entry import CONFIG_EXTRA

    sex = context.partition_key
    settings = library_config("train", config, device=compute.device)
    profile = profile_label(context)
    out = layout.comparison_dir(storage.run, sex)
    # one fit through the engine, as the SPHR models are: the stack is the comparison's unit
    # (its losses share one training loop); the TrainConfig itself travels, every loss
    # trains with it, and the profile only names it
    name = f"{sex}/comparison"
    report = fit_engine.run_fits(context, [Fit(
        name, ("--comparison", ",".join(config.losses), "--profile", profile, "--fit", name,
               str(layout.cohort_dir(storage.run, sex)), str(out)),
        {CONFIG_EXTRA: settings.to_dict()}, str(fit_log_dir(storage.run)))])[name]
    return dg.MaterializeResult(metadata={
        "path": md.path(out), "losses": ", ".join(config.losses), "profile": profile,
        "trained": ", ".join(report["trained"]) or "none",
        "reused": ", ".join(report["reused"] + report["from_training_stage"]) or "none",
        "train_s": report.get("train_s", 0.0),
        "comparison_report": dg.MetadataValue.json(report), **fit_engine.where(),
    })


def configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """This module's assets' run config for a run's settings."""
    train = settings.stages["train"]
    return {sphr_training: from_settings(TrainingConfig, train),
            fold_models: from_settings(TrainingConfig, train),
            loss_comparison: from_settings(LossComparisonConfig, train,
                                           losses=list(train["comparison_losses"]))}
