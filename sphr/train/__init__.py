"""SPHR training: the trainer, SPHR as a representation (:class:`SPHREmbedding`), the model
file, and the ``sphr train`` stage.

Imports torch, numpy and pandas only (pyarrow to write parquet), so a GPU box
without polars, xgboost or Dagster can run it.
"""

from __future__ import annotations

from sphr import lazy_exports
from sphr.train.config import COMPARISON_LOSSES, PROFILES, TrainConfig

#: imported on first use (PEP 562), so ``sphr --help`` and ``import sphr.train.commands``
#: do not pay for torch
_LAZY: dict[str, tuple[str, ...]] = {
    "sphr.train.embedding": ("SPHREmbedding",),
    "sphr.train.model_io": ("embed", "load_model", "save_model"),
    "sphr.train.run": ("run_train", "data_key"),
    "sphr.train.comparison": ("train_loss_comparison",),
    "sphr.train.trainer": ("TrainData", "TrainResult", "make_loss", "train_jobs", "train_many",
                           "train_sphr"),
}
__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = ["COMPARISON_LOSSES", "PROFILES", "SPHREmbedding", "TrainConfig", "TrainData",
           "TrainResult", "data_key", "embed", "load_model", "make_loss", "run_train",
           "save_model", "train_jobs", "train_loss_comparison", "train_many", "train_sphr"]
