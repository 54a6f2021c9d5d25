"""Loss comparison (Table 3 / A2): train SPHR once per loss, same data, seeds and epochs.

Every loss gets the same cohort, the same offline triplets, the same
``TrainConfig`` (profile, epochs, batch size, seed, device) except ``loss``; the
models are trained together with ``sphr.train.train_many``. Their test
embeddings go through the same protocol (default: XGBoost, as in the paper's
tables) on the same splits.

Embeddings are written to ``OUT/<sex>/losses/<loss>/embeddings_{train,test}.parquet``
with the exact config in ``train_config.json``; a rerun with an identical
config reuses them instead of retraining.
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
import pandas as pd

from sphr.baselines.pipeline import Cohort, embedding_frame, read_embeddings
from sphr.errors import ConfigError
from sphr.evaluate.paper import LOSSES
from sphr.evaluate.protocol import EvalConfig, EvalResult, evaluate_embeddings
from sphr.io import write_json, write_parquet
from sphr.profiles import DEFAULT_PROFILE

log = logging.getLogger(__name__)


def _trainer():
    try:
        import sphr.train as trainer
    except ImportError as exc:  # the training stage is a separate module
        raise ConfigError(f"the loss comparison needs sphr.train ({exc})") from exc
    return trainer


def _config_json(cfg: Any) -> dict[str, Any]:
    d = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else dict(vars(cfg))
    return json.loads(json.dumps(d, default=str))


def _test_embeddings(path: Path, cohort: Cohort) -> np.ndarray | None:
    """Stored test embeddings, when they are of this cohort's test participants in order."""
    meta, Z = read_embeddings(path)
    return Z if np.array_equal(meta["eid"].to_numpy(), cohort.test["eid"].to_numpy()) else None


def _trained_by_training_stage(directory: Path, config: dict[str, Any], data: str) -> bool:
    """The training stage's model in ``directory`` has this config and data: its embeddings
    are this loss's (the demo's NPLB is the SPHR model, so it is not trained twice)."""
    path = directory / "train_report.json"
    if not path.exists() or not (directory / "embeddings_test.parquet").exists():
        return False
    report = json.loads(path.read_text())
    # checkpoint frequency does not change the model
    same = {k: v for k, v in report.get("config", {}).items() if k != "checkpoint_every"} == {
        k: v for k, v in config.items() if k != "checkpoint_every"}
    return same and report.get("data") == data


def load_triplets(cohort: Cohort) -> np.ndarray:
    from sphr.cohorts.triplets import read_triplets

    return read_triplets(cohort.directory / "triplets.npz", len(cohort.train))


def loss_configs(losses: Sequence[str], *, profile: str = DEFAULT_PROFILE, seed: int = 0,
                 device: str = "auto", overrides: Mapping[str, Any] | None = None,
                 trainer: Any = None) -> dict[str, Any]:
    """One TrainConfig per loss, identical except ``loss``."""
    trainer = trainer or _trainer()
    unknown = [x for x in losses if x not in LOSSES]
    if unknown:
        raise ConfigError(f"unknown loss(es) {unknown}: choose from {', '.join(LOSSES)}")
    base = trainer.TrainConfig.profile(profile)
    fields = {f.name for f in dataclasses.fields(base)}
    extra = {"seed": seed, "device": device, **dict(overrides or {})}
    bad = [k for k in extra if k not in fields]
    if bad:
        raise ConfigError(f"TrainConfig has no field(s) {bad}")
    return {loss: dataclasses.replace(base, loss=loss, **extra) for loss in losses}


def train_loss_embeddings(cohort: Cohort, losses: Sequence[str], out_dir: str | Path, *,
                          profile: str = DEFAULT_PROFILE, seed: int = 0, device: str = "auto",
                          overrides: Mapping[str, Any] | None = None, reuse: bool = True,
                          trainer: Any = None, trained: Mapping[str, Path] | None = None
                          ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Train (or reuse) one SPHR model per loss; return test embeddings by loss and info.

    ``trained``: folders of models the training stage wrote (``RUN/train/<sex>/<loss>``);
    a loss whose model there has the same config and data is read, not retrained.
    """
    trainer = trainer or _trainer()
    out_dir = Path(out_dir)
    cfgs = loss_configs(losses, profile=profile, seed=seed, device=device, overrides=overrides,
                        trainer=trainer)
    X = cohort.matrix("train")
    triplets = load_triplets(cohort)
    labels = cohort.train["label"].to_numpy(np.int64)
    Z_test: dict[str, np.ndarray] = {}
    todo = []
    # the cache key holds the training data too: a rebuilt cohort with the same settings
    # (new export, new split) must not reuse embeddings of a model trained on other rows
    data_key = trainer.data_key(X, labels, triplets)
    from_training: list[str] = []
    for loss, cfg in cfgs.items():
        src = (trained or {}).get(loss)
        if reuse and src is not None and _trained_by_training_stage(Path(src), _config_json(cfg),
                                                                    data_key):
            Z = _test_embeddings(Path(src) / "embeddings_test.parquet", cohort)
            if Z is not None:
                Z_test[loss] = Z
                from_training.append(loss)
                continue
        d = out_dir / loss
        cfg_path = d / "train_config.json"
        if reuse and cfg_path.exists() and (d / "embeddings_test.parquet").exists():
            if json.loads(cfg_path.read_text()) == {**_config_json(cfg), "data": data_key}:
                Z = _test_embeddings(d / "embeddings_test.parquet", cohort)
                if Z is not None:
                    Z_test[loss] = Z
                    continue
        todo.append(loss)
    info: dict[str, Any] = {"profile": profile,
                            "reused": sorted(set(cfgs) - set(todo) - set(from_training)),
                            "from_training_stage": from_training, "trained": todo,
                            "config": _config_json(next(iter(cfgs.values())))}
    info["config"].pop("loss", None)
    if todo:
        X_test = cohort.matrix("test")
        t0 = time.perf_counter()
        results = trainer.train_many(X, triplets, [cfgs[x] for x in todo], labels=labels,
                                     augmented=cohort.train["augmented"].to_numpy(bool))
        info["train_s"] = round(time.perf_counter() - t0, 2)
        for loss, res in zip(todo, results, strict=True):
            Zt = np.asarray(trainer.embed(res.model, X_test, device=device), dtype=np.float32)
            Ztr = np.asarray(trainer.embed(res.model, X, device=device), dtype=np.float32)
            d = out_dir / loss
            write_parquet(embedding_frame(cohort.train, Ztr), d / "embeddings_train.parquet")
            write_parquet(embedding_frame(cohort.test, Zt), d / "embeddings_test.parquet")
            write_json({**_config_json(cfgs[loss]), "data": data_key}, d / "train_config.json")
            Z_test[loss] = Zt
    return {x: Z_test[x] for x in losses}, info


def compare_losses(cohort: Cohort, losses: Sequence[str], out_dir: str | Path, *,
                   eval_config: EvalConfig, profile: str = DEFAULT_PROFILE, seed: int = 0,
                   device: str = "auto", overrides: Mapping[str, Any] | None = None,
                   reuse: bool = True, trainer: Any = None,
                   trained: Mapping[str, Path] | None = None
                   ) -> tuple[pd.DataFrame, EvalResult, dict[str, Any]]:
    """Scores (column ``loss``) of each loss's embedding under the protocol."""
    Z, info = train_loss_embeddings(cohort, losses, out_dir, profile=profile, seed=seed,
                                    device=device, overrides=overrides, reuse=reuse,
                                    trainer=trainer, trained=trained)
    labels = cohort.test["label"].to_numpy(np.int64)
    result = evaluate_embeddings(Z, labels, eval_config)
    scores = result.scores.rename(columns={"representation": "loss"})
    return scores, result, info
