"""benchmarks/train_quality.py trains our trainer the way the listing trains: every epoch on
every triplet, no labels needed (the paper profile's model selection would need them)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def test_quality_config_trains_every_epoch_without_labels():
    spec = importlib.util.spec_from_file_location(
        "train_quality", ROOT / "benchmarks" / "train_quality.py")
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)  # it puts benchmarks/ on sys.path for its `train` import
    finally:
        sys.path[:] = path
        sys.modules.pop("train", None)
    from sphr.train import train_sphr

    cfg = module.quality_config(epochs=2, batch_size=64, device="cpu", seed=0, fast={})
    assert cfg.validation_size == 0 and cfg.patience is None and cfg.epochs == 2
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 8)).astype(np.float32)
    T = rng.integers(0, 120, size=(300, 3))
    res = train_sphr(X, T, cfg)  # no labels: the listing has none either
    assert len(res.loss_curve) == 2 and np.isfinite(res.loss_curve).all()
