"""SPHR training: the trainer, the model file, and the ``sphr train`` stage.

Imports torch, numpy and pandas only (pyarrow to write parquet), so a GPU box
without polars, xgboost or Dagster can run it.
"""

from __future__ import annotations

from sphr.train.config import PROFILES, TrainConfig
from sphr.train.model_io import embed, load_model, save_model
from sphr.train.run import run_train
from sphr.train.trainer import TrainResult, make_loss, train_many, train_sphr

__all__ = ["PROFILES", "TrainConfig", "TrainResult", "embed", "load_model", "make_loss",
           "run_train", "save_model", "train_many", "train_sphr"]
