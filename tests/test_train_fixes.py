"""Two training details a review found: the bf16 dropout scale and N-Pair's pairs per batch."""

from __future__ import annotations

import numpy as np
import pytest
import torch


def test_dropout_mask_scale_is_exact_under_bf16():
    from sphr.train.config import TrainConfig
    from sphr.train.stack_data import Prepared as _Prepared
    from sphr.train.trainer import _Stack

    X = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    t = np.array([[0, 1, 2]] * 10, dtype=np.int64)
    group = _Stack([_Prepared(X, t, None, None, None)],
                   [TrainConfig(precision="bf16", device="cpu", dropout=0.1)])
    masks = group.inputs.masks(64)
    kept = round(0.9 * 65536)
    for m in masks:
        assert m.dtype == torch.float32
        values = sorted(set(torch.unique(m).tolist()))
        assert values[0] == 0.0 and values[-1] == pytest.approx(65536 / kept, rel=1e-7)
        assert len(values) == 2
        assert values[-1] == pytest.approx(1 / 0.9, rel=1e-4)  # not bf16's 1.109375


def test_npair_sees_one_pair_per_triplet():
    from sphr.losses import build_loss

    loss = build_loss("npair")
    assert not loss.uses_labels  # per-triplet pseudo-labels, whatever the classes
    torch.manual_seed(0)
    a, p, n = (torch.randn(32, 8) for _ in range(3))
    # with pseudo-labels the loss is the mean over 32 anchors of a softmax over 32 positives
    sim = a @ p.T
    expected = torch.nn.functional.cross_entropy(sim, torch.arange(32))
    reg = 0.002 * torch.cat([a, p, n]).pow(2).sum(dim=1).mean()
    assert float(loss(a, p, n)) == pytest.approx(float(expected + reg), rel=1e-4)
