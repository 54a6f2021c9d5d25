"""benchmarks/train_quality.py trains our trainer the way the listing trains: every epoch on
every triplet, no labels needed (the paper profile's model selection would need them)."""

from __future__ import annotations

import sys

import numpy as np
from benchmark_loader import load_benchmark


def test_quality_config_trains_every_epoch_without_labels():
    path = list(sys.path)
    try:
        module = load_benchmark("train_quality")  # it puts benchmarks/ on sys.path for `train`
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
