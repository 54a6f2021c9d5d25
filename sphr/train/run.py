"""``run_train``: one cohort folder in, ``RUN/train/<sex>/<loss>/`` out."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.cohorts.triplets import read_triplets
from sphr.io import staged_outputs, write_bytes, write_json, write_parquet
from sphr.profiles import DEFAULT_PROFILE
from sphr.train.config import TrainConfig
from sphr.train.embedding import SPHREmbedding
from sphr.train.stack_data import TrainData
from sphr.train.tracking import TRACK_COLUMNS, RowFacts
from sphr.train.trainer import TrainResult

log = logging.getLogger(__name__)


def data_key(X: np.ndarray, labels: np.ndarray, triplets: np.ndarray) -> str:
    """sha256 of what a model is trained on (matrix, labels, triplets): a model or its
    embeddings are reused only for the same key and config."""
    import hashlib

    h = hashlib.sha256(np.ascontiguousarray(X).tobytes())
    h.update(np.asarray(labels, np.int64).tobytes())
    h.update(np.ascontiguousarray(triplets).tobytes())
    return h.hexdigest()


def loss_curve_png(curve: list[float], title: str, validation: dict[str, Any] | None = None
                   ) -> bytes | None:
    try:
        from sphr.plots import new_figure, to_png
    except ImportError:  # no matplotlib on a bare GPU box
        return None
    epochs = np.arange(1, len(curve) + 1)
    fig, axes = new_figure(11.0 if validation else 5.5, 3.5, ncols=2 if validation else 1,
                           squeeze=False)
    ax = axes[0][0]
    ax.plot(epochs, curve, lw=1.5, label="training")
    if validation:
        ax.plot(epochs[:len(validation["val_loss"])], validation["val_loss"], lw=1.5,
                label="validation")
        for a in axes[0]:
            a.axvline(validation["best_epoch"], color="k", ls="--", lw=0.8)
        f1 = axes[0][1]
        f1.plot(epochs[:len(validation["val_knn_f1"])], validation["val_knn_f1"], lw=1.5,
                color="#7b3294")
        f1.set_xlabel("epoch")
        f1.set_ylabel("validation kNN weighted F1")
        f1.set_title(f"best epoch {validation['best_epoch']} (dashed)")
        f1.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax.set_xlabel("epoch")
    ax.set_ylabel("mean loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return to_png(fig)


def model_selection_summary(res: TrainResult) -> dict[str, Any] | None:
    """The chosen epoch and its validation loss, without the curves (those go to
    ``loss_curve.parquet``)."""
    curves = ("val_loss", "val_knn_f1", *TRACK_COLUMNS)
    return {k: v for k, v in res.validation.items() if k not in curves} or None


def write_loss_curve(res: TrainResult, title: str, directory: Path) -> None:
    """``loss_curve.parquet`` (training loss per epoch, and with model selection the
    validation loss and kNN F1) and ``loss_curve.png`` into ``directory``."""
    curve = pd.DataFrame({"epoch": np.arange(1, len(res.loss_curve) + 1, dtype=np.int64),
                          "loss": np.asarray(res.loss_curve, dtype=np.float64)})
    if res.validation:
        curve["val_loss"] = np.asarray(res.validation["val_loss"], dtype=np.float64)
        curve["val_knn_f1"] = np.asarray(res.validation["val_knn_f1"], dtype=np.float64)
        for name in TRACK_COLUMNS:  # the health distance's per-epoch tracking
            if name in res.validation:
                curve[name] = np.asarray(res.validation[name], dtype=np.float64)
    write_parquet(curve, directory / "loss_curve.parquet")
    png = loss_curve_png(res.loss_curve, title, res.validation or None)
    if png is not None:
        write_bytes(png, directory / "loss_curve.png")


def row_facts(train: pd.DataFrame, death: pd.DataFrame | None = None) -> RowFacts:
    """The per-epoch tracking's facts of the cohort's training rows: ``age_years`` and, when
    ``death`` (eid, time_years, event: the death rows of ``ingest/outcomes.parquet``) is
    given, each row's death follow-up (augmented rows, which are no one, get none)."""
    age = train["age_years"].to_numpy(float) if "age_years" in train.columns else None
    if death is None:
        return RowFacts(age=age)
    by_eid = death.drop_duplicates("eid").set_index("eid")
    real = ~train["augmented"].to_numpy(bool)
    eids = train["eid"].to_numpy()
    time = np.where(real, by_eid["time_years"].reindex(eids).to_numpy(float), np.nan)
    event = np.where(real, by_eid["event"].reindex(eids).fillna(0).to_numpy(float), 0)
    return RowFacts(age=age, death_time=time, death_event=event.astype(bool))


#: the train_report.json counts a materialization shows beside the loss curve
REPORTED_COUNTS: tuple[str, ...] = ("n_triplets", "n_train_rows", "n_test_rows", "n_features")


def model_metadata(out_dir: str | Path) -> dict[str, Any]:
    """The materialization metadata of a model folder written by :func:`run_train`, in Dagster
    Pipes' plain form (a number, or ``{"raw_value", "type"}``): both routes of the Dagster
    asset ``train/sphr_model`` report this, the Pipes side (:mod:`sphr.train.pipes_entry`)
    and the asset's own process."""
    import json

    from sphr.io import read_json
    from sphr.plots import markdown_image

    out = Path(out_dir)
    report = read_json(out / "train_report.json")
    curve = pd.read_parquet(out / "loss_curve.parquet")
    meta: dict[str, Any] = {
        "path": {"raw_value": str(out / "model.pt"), "type": "path"},
        "epochs": len(curve),
        "final_loss": float(curve["loss"].iloc[-1]) if len(curve) else None,
        "loss_curve_values": {"raw_value": [float(x) for x in curve["loss"]], "type": "json"},
        "train_report": {"raw_value": json.loads(json.dumps(report, default=str)),
                         "type": "json"}}
    png = out / "loss_curve.png"
    if png.exists():
        meta["loss_curve"] = {"raw_value": markdown_image(png.read_bytes(), "loss curve"),
                              "type": "md"}
    for key in REPORTED_COUNTS:
        if isinstance(report.get(key), (int, float)):
            meta[key] = report[key]
    return meta


@dataclass(frozen=True)
class CohortFit:
    """What one fit reads from a cohort folder: the cohort, its training and test matrices,
    and the training set the trainer takes (rows, triplets, classes, augmented flags, facts)."""

    cohort: Any
    X_test: np.ndarray
    data: TrainData


def cohort_fit(cohort_dir: str | Path, death: pd.DataFrame | None = None) -> CohortFit:
    """A cohort folder read for training (``death`` as in :func:`run_train`)."""
    from sphr.artifacts import load_cohort

    cohort = load_cohort(cohort_dir)
    X = cohort.matrix("train")
    data = TrainData(X, read_triplets(cohort.directory / "triplets.npz", len(X)),
                     cohort.train["label"].to_numpy(np.int64),
                     cohort.train["augmented"].to_numpy(bool), row_facts(cohort.train, death))
    return CohortFit(cohort, cohort.matrix("test"), data)


def run_train(cohort_dir: str | Path, out_dir: str | Path, config: TrainConfig | None = None, *,
              resume: bool = False, checkpoint_dir: str | Path | None = None,
              death: pd.DataFrame | None = None) -> dict[str, Any]:
    """Train on a cohort folder and write model, embeddings, loss curve and report to ``out_dir``.

    Checkpoints go to ``checkpoint_dir`` (default ``out_dir/checkpoint`` when
    ``config.checkpoint_every`` > 0); ``resume`` continues from there. ``death`` (eid,
    time_years, event) adds the training rows' death C-index to the per-epoch tracking (a
    cross-fit's training folds only: it is never a held-out row's).
    """
    config = config or TrainConfig.profile(DEFAULT_PROFILE)
    out_dir = Path(out_dir)
    fit = cohort_fit(cohort_dir, death)
    if checkpoint_dir is None and config.checkpoint_every > 0:
        checkpoint_dir = out_dir / "checkpoint"
    d = fit.data
    sphr = SPHREmbedding(config).fit(d.X, labels=d.labels, triplets=d.triplets,
                                     augmented=d.augmented, feature_names=fit.cohort.features,
                                     checkpoint_dir=checkpoint_dir, resume=resume,
                                     facts=d.facts)
    return write_fit(fit, sphr, out_dir)


def write_fit(fit: CohortFit, sphr: SPHREmbedding, out_dir: str | Path) -> dict[str, Any]:
    """A trained model's folder, written at once: ``model.pt``, both partitions' embeddings,
    the loss curve and ``train_report.json`` (returned)."""
    from sphr.artifacts import embedding_frame

    res: TrainResult = sphr.training_
    config, cohort, d = sphr.config_, fit.cohort, fit.data
    Z_train, Z_test = sphr.transform(d.X), sphr.transform(fit.X_test)
    report = {
        "cohort": str(cohort.directory), "sex": cohort.sex, "loss": config.loss,
        "config": config.to_dict(), "data": data_key(d.X, d.labels, d.triplets),
        "device": res.device, "n_triplets": res.n_triplets,
        "n_train_rows": len(d.X), "n_test_rows": len(fit.X_test),
        "n_features": len(cohort.features),
        "epochs": len(res.loss_curve), "final_loss": res.loss_curve[-1] if res.loss_curve else None,
        "timings": res.timings,
        "model_selection": model_selection_summary(res),
        "embeddings_finite": bool(np.isfinite(Z_train).all() and np.isfinite(Z_test).all()),
    }
    with staged_outputs(out_dir) as stage:
        sphr.save(stage / "model.pt")
        write_parquet(embedding_frame(cohort.train, Z_train), stage / "embeddings_train.parquet")
        write_parquet(embedding_frame(cohort.test, Z_test), stage / "embeddings_test.parquet")
        write_loss_curve(res, f"SPHR {cohort.sex}, {config.loss}", stage)
        write_json(report, stage / "train_report.json")
    log.info("%s %s: %d epochs in %.1f s on %s, final loss %.4g", cohort.sex, config.loss,
             report["epochs"], res.timings.get("train_s", 0.0), res.device,
             report["final_loss"] or 0)
    return report


def completed_fit(cohort_dir: str | Path, out_dir: str | Path, config: TrainConfig
                  ) -> dict[str, Any] | None:
    """The report of a fit already in ``out_dir`` for this cohort and config, else None.

    A fit's folder is written at once (``staged_outputs``), so a report there means the whole
    fit is; it counts only when its config and its data (:func:`data_key`: matrix, labels,
    triplets) are this fit's. A failed run re-run this way trains only the fits it lost, and
    the outputs are the ones an uninterrupted run writes: a fit is seeded and deterministic on
    one device and thread count."""
    import json

    from sphr.artifacts import load_cohort

    report_path = Path(out_dir) / "train_report.json"
    if not report_path.is_file():
        return None
    report = json.loads(report_path.read_text())
    # compared as JSON: the report holds the config as written (tuples read back as lists)
    if json.dumps(report.get("config"), sort_keys=True) != json.dumps(
            json.loads(json.dumps(config.to_dict())), sort_keys=True):
        return None
    cohort = load_cohort(cohort_dir)
    X = cohort.matrix("train")
    key = data_key(X, cohort.train["label"].to_numpy(np.int64),
                   read_triplets(cohort.directory / "triplets.npz", len(X)))
    return report if report.get("data") == key else None


def fold_fits(cohort_dir: str | Path, out_dir: str | Path) -> list[tuple[int, Path, Path]]:
    """The cross-fit's fits of one cohort folder: ``(fold, fold cohort, fold model folder)``
    for each ``folds/fold<k>`` (fitted on the other folds) into ``out_dir/fold<k>``."""
    from sphr.layout import fold_count, fold_dir

    cohort_dir, out_dir = Path(cohort_dir), Path(out_dir)
    return [(k, fold_dir(cohort_dir, k), out_dir / f"fold{k}")
            for k in range(fold_count(cohort_dir))]


def train_fold(cohort_dir: str | Path, out_dir: str | Path, fold: int,
               config: TrainConfig | None = None) -> dict[str, Any]:
    """Fold ``fold``'s SPHR model of the cross-fit (one of :func:`train_folds`' fits, the unit
    an engine schedules): the one in place when :func:`completed_fit` says it is this fit."""
    config = config or TrainConfig.profile(DEFAULT_PROFILE)
    fits = {k: (c, o) for k, c, o in fold_fits(cohort_dir, out_dir)}
    if fold not in fits:
        raise ValueError(f"{cohort_dir}: no fold {fold} (it holds folds {sorted(fits)})")
    cohort, out = fits[fold]
    done = completed_fit(cohort, out, config)
    if done is not None:
        log.info("fold %d: the model in %s is this fit's (same config and data), kept", fold, out)
        return done
    return run_train(cohort, out, config)


def train_folds(cohort_dir: str | Path, out_dir: str | Path, config: TrainConfig | None = None,
                *, pack: bool | None = None) -> list[dict[str, Any]]:
    """The cross-fit's SPHR models: :func:`run_train` on each fold cohort of ``cohort_dir``
    (``folds/fold<k>``, fitted on the other folds) into ``out_dir/fold<k>``, with the same
    settings as the model of the single split; a fold's held-out people never reach its fit
    because its cohort folder does not hold them in training. Folds already fitted
    (:func:`completed_fit`) are kept.

    ``pack`` trains the folds still to fit as one stack (:func:`~sphr.train.trainer.train_jobs`:
    one model per fold, each on its own fold's rows and triplets; a fold's triplet count is
    the profile's, so they stack). ``None`` packs on a GPU, where a stack of models costs
    little more than one, and not on the CPU, where it costs about their sum and a fold
    trained alone is the bit-identical fit an engine's worker makes (packed models agree with
    alone-trained ones up to float rounding)."""
    config = config or TrainConfig.profile(DEFAULT_PROFILE)
    todo = [k for k, c, o in fold_fits(cohort_dir, out_dir) if completed_fit(c, o, config) is None]
    if pack is None:
        from sphr.device import resolve_device

        pack = resolve_device(config.device).type == "cuda"
    if pack and len(todo) > 1 and config.checkpoint_every == 0:
        _train_packed(cohort_dir, out_dir, todo, config)
    return [train_fold(cohort_dir, out_dir, k, config)
            for k, _, _ in fold_fits(cohort_dir, out_dir)]


def _train_packed(cohort_dir: str | Path, out_dir: str | Path, folds: list[int],
                  config: TrainConfig) -> None:
    """Folds ``folds`` trained as one stack, each written as :func:`run_train` writes it."""
    from sphr.train.trainer import train_jobs

    places = {k: (c, o) for k, c, o in fold_fits(cohort_dir, out_dir)}
    fits = [cohort_fit(places[k][0]) for k in folds]
    results = train_jobs([(fit.data, config) for fit in fits])
    log.info("folds %s trained packed, %s models a stack", folds,
             max(r.timings.get("models_in_stack", 1) for r in results))
    for k, fit, res in zip(folds, fits, results, strict=True):
        sphr = SPHREmbedding.from_training(res, config, fit.cohort.features)
        write_fit(fit, sphr, places[k][1])
