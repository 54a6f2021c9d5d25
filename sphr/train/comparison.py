"""The loss comparison (Table 3 / A2): one SPHR model per loss, trained together as one stack.

Every loss gets the same cohort, the same offline triplets and the same ``TrainConfig``
(profile, epochs, batch size, seed, device) except ``loss``; the models are trained in one
:func:`sphr.train.train_many` call. Each loss's embeddings are written to
``OUT/<loss>/embeddings_{train,test}.parquet`` with the exact config and data key in
``train_config.json``, and ``OUT/comparison_report.json`` says what this call trained, reused
or copied (``OUT`` defaults to ``RUN/train/<sex>/comparison``, :func:`sphr.layout.comparison_dir`).
The evaluation stage only reads these folders.

A rerun with an identical config and data reuses a loss's folder. NPLB is copied from the
training stage's ``RUN/train/<sex>/nplb`` when that model has the same config and data: the
demo's NPLB is the SPHR model, so it is not trained twice.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sphr.errors import ConfigError
from sphr.io import staged_outputs, write_bytes, write_json, write_parquet
from sphr.layout import COMPARISON_REPORT, comparison_dir, train_dir
from sphr.profiles import DEFAULT_PROFILE
from sphr.train.config import COMPARISON_LOSSES

log = logging.getLogger(__name__)

#: what a loss's folder holds; the evaluation stage reads the test embeddings and the config
FILES: tuple[str, ...] = ("embeddings_train.parquet", "embeddings_test.parquet")
#: beside them: the kept epoch (``model_selection``, as the training stage's report has it)
#: and the curves, as ``sphr train`` writes them for one model
TRAIN_REPORT = "train_report.json"
CURVE_FILES: tuple[str, ...] = ("loss_curve.parquet", "loss_curve.png")


def _model_selection(out_dir: Path, losses: Sequence[str], copied: Sequence[str]
                     ) -> dict[str, Any]:
    """Each loss's kept epoch (trained now, reused or copied), and the loss that held the
    stack (copied models trained alone): every model keeps its own best epoch, but all
    train until the last one stops."""
    chosen = {}
    for loss in losses:
        path = out_dir / loss / TRAIN_REPORT
        ms = json.loads(path.read_text()).get("model_selection") if path.exists() else None
        if ms:
            chosen[loss] = {k: ms[k] for k in ("best_epoch", "epochs_run", "best_val_loss")}
    stacked = [x for x in losses if x not in copied]
    if len(chosen) < len(losses) or not stacked:
        return {}
    return {"model_selection": chosen,
            "stack_held_by": max(stacked, key=lambda x: chosen[x]["best_epoch"])}


def _trainer() -> Any:
    """What the comparison calls of the training stage (a test passes a stand-in): taken from
    the modules, not the package, which lists this module among its lazy exports."""
    from types import SimpleNamespace

    from sphr.train.config import TrainConfig
    from sphr.train.model_io import embed
    from sphr.train.run import data_key
    from sphr.train.trainer import train_many

    return SimpleNamespace(TrainConfig=TrainConfig, data_key=data_key, train_many=train_many,
                           embed=embed)


def config_json(cfg: Any) -> dict[str, Any]:
    """A TrainConfig as the JSON-safe dict written to ``train_config.json``."""
    d = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(vars(cfg))
    return json.loads(json.dumps(d, default=str))


def loss_configs(losses: Sequence[str], *, profile: str = DEFAULT_PROFILE, seed: int = 0,
                 device: str = "auto", overrides: Mapping[str, Any] | None = None,
                 trainer: Any = None, config: Any = None) -> dict[str, Any]:
    """One TrainConfig per loss, identical except ``loss``: ``config`` (a whole TrainConfig,
    as the Dagster asset has it) with each loss, else ``profile``'s with ``seed``, ``device``
    and ``overrides`` (the command line's)."""
    trainer = trainer or _trainer()
    unknown = [x for x in losses if x not in COMPARISON_LOSSES]
    if unknown:
        raise ConfigError(f"unknown loss(es) {unknown}: "
                          f"choose from {', '.join(COMPARISON_LOSSES)}")
    # the paper's losses as the paper trained them: without the marker-geometry anchor the
    # shipped SPHR carries (docs/METHODS.md, "Higher risk for your age"), unless asked for
    if config is not None:
        return {loss: dataclasses.replace(config, loss=loss, anchor=0.0) for loss in losses}
    base = trainer.TrainConfig.profile(profile)
    fields = {f.name for f in dataclasses.fields(base)}
    extra = {"seed": seed, "device": device, **({"anchor": 0.0} if "anchor" in fields else {}),
             **dict(overrides or {})}
    bad = [k for k in extra if k not in fields]
    if bad:
        raise ConfigError(f"TrainConfig has no field(s) {bad}")
    return {loss: dataclasses.replace(base, loss=loss, **extra) for loss in losses}


def training_stage_models(cohort_dir: str | Path) -> dict[str, Path]:
    """The training stage's model folders a comparison may copy: ``RUN/train/<sex>/nplb``
    beside ``RUN/cohorts/<sex>`` (none for a cohort folder outside a run directory)."""
    cohort_dir = Path(cohort_dir)
    if cohort_dir.parent.name != "cohorts":
        return {}
    return {"nplb": train_dir(cohort_dir.parent.parent, cohort_dir.name, "nplb")}


def default_out(cohort_dir: str | Path) -> Path:
    """``RUN/train/<sex>/comparison`` for ``RUN/cohorts/<sex>``."""
    cohort_dir = Path(cohort_dir)
    if cohort_dir.parent.name != "cohorts":
        raise ConfigError(f"{cohort_dir} is not RUN/cohorts/<sex>: pass --out")
    return comparison_dir(cohort_dir.parent.parent, cohort_dir.name)


def _same_eids(path: Path, eids: np.ndarray) -> bool:
    import pandas as pd

    return np.array_equal(pd.read_parquet(path, columns=["eid"])["eid"].to_numpy(), eids)


def _trained_by_training_stage(directory: Path, config: dict[str, Any], data: str) -> bool:
    """The training stage's model in ``directory`` has this config and data: its embeddings
    are this loss's."""
    path = directory / "train_report.json"
    if not path.exists() or not all((directory / f).exists() for f in FILES):
        return False
    report = json.loads(path.read_text())
    # checkpoint frequency does not change the model
    same = {k: v for k, v in report.get("config", {}).items() if k != "checkpoint_every"} == {
        k: v for k, v in config.items() if k != "checkpoint_every"}
    return same and report.get("data") == data


def _cached(directory: Path, config: dict[str, Any], data: str) -> bool:
    """``directory`` holds this loss's embeddings for this config and data."""
    path = directory / "train_config.json"
    if not path.exists() or not all((directory / f).exists() for f in FILES):
        return False
    return json.loads(path.read_text()) == {**config, "data": data}


def _write_trained(directory: Path, cohort: Any, res: Any, embedded: Sequence[np.ndarray],
                   config: dict[str, Any]) -> None:
    """One trained loss's folder: its embeddings (``embedded``: test, train), its config and
    data key, its curves and its kept epoch."""
    from sphr.artifacts import embedding_frame
    from sphr.train.run import model_selection_summary, write_loss_curve

    Z_test, Z_train = embedded
    loss = config["loss"]
    with staged_outputs(directory) as stage:
        write_parquet(embedding_frame(cohort.train, Z_train), stage / "embeddings_train.parquet")
        write_parquet(embedding_frame(cohort.test, Z_test), stage / "embeddings_test.parquet")
        write_json(config, stage / "train_config.json")
        write_loss_curve(res, f"SPHR {cohort.sex}, {loss} (loss comparison)", stage)
        write_json({"loss": loss, "model_selection": model_selection_summary(res)},
                   stage / TRAIN_REPORT)


def train_loss_comparison(cohort_dir: str | Path, out_dir: str | Path | None = None,
                          losses: Sequence[str] = COMPARISON_LOSSES, *,
                          profile: str = DEFAULT_PROFILE, seed: int = 0, device: str = "auto",
                          overrides: Mapping[str, Any] | None = None, reuse: bool = True,
                          trainer: Any = None, trained: Mapping[str, Path] | None = None,
                          config: Any = None) -> dict[str, Any]:
    """Train (or reuse) one SPHR model per loss on a cohort folder; write ``out_dir/<loss>/``.

    ``out_dir``: default ``RUN/train/<sex>/comparison``. ``trained``: the training stage's
    model folders by loss (default :func:`training_stage_models`); a loss whose model there
    has the same config and data is copied, not retrained. ``config``: the TrainConfig every
    loss trains with (its ``loss`` aside; ``profile`` then only names it in the report), else
    ``profile``'s with ``seed``, ``device`` and ``overrides``. ``trainer``: the module with
    ``TrainConfig``, ``train_many``, ``embed`` and ``data_key`` (default :mod:`sphr.train`;
    tests pass a stand-in). Returns the report written to ``comparison_report.json``.
    """
    from sphr.artifacts import load_cohort
    from sphr.cohorts.triplets import read_triplets

    trainer = trainer or _trainer()
    out_dir = Path(out_dir) if out_dir is not None else default_out(cohort_dir)
    trained = training_stage_models(cohort_dir) if trained is None else trained
    cfgs = loss_configs(losses, profile=profile, seed=seed, device=device, overrides=overrides,
                        trainer=trainer, config=config)
    device = config.device if config is not None else device  # where the embeddings run
    cohort = load_cohort(cohort_dir)
    X = cohort.matrix("train")
    triplets = read_triplets(cohort.directory / "triplets.npz", len(X))
    labels = cohort.train["label"].to_numpy(np.int64)
    # the cache key holds the training data too: a rebuilt cohort with the same settings
    # (new export, new split) must not reuse embeddings of a model trained on other rows
    data = trainer.data_key(X, labels, triplets)
    test_eids = cohort.test["eid"].to_numpy()
    todo: list[str] = []
    reused: list[str] = []
    copied: list[str] = []
    for loss, cfg in cfgs.items():
        wanted = config_json(cfg)
        src = trained.get(loss)
        if (reuse and src is not None and _trained_by_training_stage(Path(src), wanted, data)
                and _same_eids(Path(src) / "embeddings_test.parquet", test_eids)):
            with staged_outputs(out_dir / loss) as stage:
                for name in (*FILES, TRAIN_REPORT, *CURVE_FILES):
                    if (Path(src) / name).exists():
                        write_bytes((Path(src) / name).read_bytes(), stage / name)
                write_json({**wanted, "data": data}, stage / "train_config.json")
            copied.append(loss)
        elif (reuse and _cached(out_dir / loss, wanted, data)
              and _same_eids(out_dir / loss / "embeddings_test.parquet", test_eids)):
            reused.append(loss)
        else:
            todo.append(loss)
    report: dict[str, Any] = {
        "cohort": str(cohort.directory), "sex": cohort.sex, "profile": profile,
        "losses": list(losses), "config": config_json(next(iter(cfgs.values()))), "data": data,
        "reused": reused, "from_training_stage": copied, "trained": todo}
    report["config"].pop("loss", None)
    if todo:
        X_test = cohort.matrix("test")
        t0 = time.perf_counter()
        results = trainer.train_many(X, triplets, [cfgs[x] for x in todo], labels=labels,
                                     augmented=cohort.train["augmented"].to_numpy(bool))
        report["train_s"] = round(time.perf_counter() - t0, 2)
        for loss, res in zip(todo, results, strict=True):
            embedded = [np.asarray(trainer.embed(res.model, x, device=device), dtype=np.float32)
                        for x in (X_test, X)]
            _write_trained(out_dir / loss, cohort, res, embedded, {**config_json(cfgs[loss]),
                                                                   "data": data})
    report.update(_model_selection(out_dir, losses, copied))
    write_json(report, out_dir / COMPARISON_REPORT)
    log.info("%s loss comparison: trained %s, reused %s, copied %s", cohort.sex,
             todo or "none", reused or "none", copied or "none")
    return report
