"""benchmarks/train_quality.py trains our trainer the way the listing trains: every epoch on
every triplet, no labels needed (the paper profile's model selection would need them)."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
from benchmark_loader import load_benchmark


def test_quality_config_trains_every_epoch_without_labels():
    path = list(sys.path)
    try:
        module = load_benchmark("train_quality")  # it puts benchmarks/ on sys.path for `train`
    finally:
        sys.path[:] = path
        sys.modules.pop("train", None)
    from sphr.errors import ConfigError
    from sphr.train import TrainConfig, train_sphr

    cfg = module.quality_config(epochs=3, batch_size=64, device="cpu", seed=0, fast={})
    # the paper profile with only the listing's way of training changed
    paper = TrainConfig.profile("paper")
    changed = {k for k, v in dataclasses.asdict(cfg).items()
               if dataclasses.asdict(paper)[k] != v}
    assert changed <= {"epochs", "batch_size", "device", "seed", "checkpoint_every",
                       "validation_size", "patience"}, changed
    rng = np.random.default_rng(0)
    X = rng.standard_normal((120, 8)).astype(np.float32)
    T = rng.integers(0, 120, size=(300, 3))
    res = train_sphr(X, T, cfg)  # no labels: the listing has none either
    # every triplet trains (none held out for validation), every epoch runs, nothing selects
    assert res.n_triplets == len(T) and res.validation == {}
    assert len(res.loss_curve) == 3 and np.isfinite(res.loss_curve).all()
    # the paper profile's own model selection holds triplets out and needs the labels
    with pytest.raises(ConfigError, match="labels"):
        train_sphr(X, T, dataclasses.replace(paper, epochs=3, batch_size=64, device="cpu"))
