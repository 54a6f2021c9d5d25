"""Remedy R3, the marker-geometry anchor (sphr.losses.anchor; docs/METHODS.md, "SPHR's stability
from fit to fit"): the stress's invariants, that model selection's validation loss carries it on
validation rows only, and that training with it, per batch or fused, keeps the embedding's
distances nearer the markers' (the fused step against autograd: test_train_fused)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from compiled_setup import ANCHOR_WEIGHT, BATCH, compiled
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train_selection import _data as selection_data

from sphr.errors import ConfigError
from sphr.losses import BatchObjective, build_loss
from sphr.losses.anchor import anchored_stress, geometry_stress
from sphr.train import TrainConfig, train_sphr
from sphr.train.selection import Validator, split_validation
from sphr.train.stacked import init_model, stack_params, stacked_forward


def _triplet_rows(seed: int, b: int, n: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, n, generator=g, dtype=torch.float64) for _ in range(3))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 30), st.integers(2, 12),
       st.floats(0.1, 100.0))
def test_stress_is_zero_for_an_isometry_one_for_a_collapse_and_scale_free(seed, b, n, scale):
    xa, xp, xn = _triplet_rows(seed, b, n)
    q, _ = torch.linalg.qr(torch.randn(n, n, generator=torch.Generator().manual_seed(seed),
                                       dtype=torch.float64))
    shift = torch.randn(n, dtype=torch.float64)
    # a rotation and a shift keep every distance
    iso = [x @ q + shift for x in (xa, xp, xn)]
    assert float(geometry_stress(*iso, xa, xp, xn)) < 1e-6
    point = [torch.zeros(b, 3, dtype=torch.float64)] * 3
    # 1 but for the 1e-6 that the row-wise distance adds to a difference (finite gradients)
    assert float(geometry_stress(*point, xa, xp, xn)) == pytest.approx(1.0, abs=1e-3)
    z = [x[:, :2] * 0.5 for x in (xa, xp, xn)]
    s = float(geometry_stress(*z, xa, xp, xn))
    scaled = float(geometry_stress(*(v * scale for v in z), *(x * scale for x in (xa, xp, xn))))
    assert scaled == pytest.approx(s, rel=1e-4)  # the 1e-6 added to differences aside
    assert s >= 0


def _stress_by_hand(z: np.ndarray, x: np.ndarray) -> float:
    """Normalized stress of one model's batch (anchors, positives, negatives along the rows),
    written out in numpy, triplet by triplet, without the library."""
    b = len(z) // 3
    num = den = 0.0
    for i in range(b):
        for u, v in ((i, b + i), (i, 2 * b + i), (b + i, 2 * b + i)):
            dz, dx = np.linalg.norm(z[u] - z[v]), np.linalg.norm(x[u] - x[v])
            num, den = num + (dz - dx) ** 2, den + dx ** 2
    return num / den


def test_stress_of_a_stack_is_each_model_alone():
    """Each model of a stack gets the stress of its own batch: the numpy formula by hand, and
    known values (an isometry 0, a collapse 1, distances times 1.5 0.25) where models differ."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 60, 7, generator=g, dtype=torch.float64)
    q, _ = torch.linalg.qr(torch.randn(7, 7, generator=g, dtype=torch.float64))
    z = torch.stack([x[0] @ q + 3.0, torch.zeros(60, 7, dtype=torch.float64), 1.5 * x[2]])
    per_model = anchored_stress(z, x)
    assert per_model.shape == (3,)
    # the 1e-6 the row-wise distance adds to a difference aside
    np.testing.assert_allclose(per_model.numpy(), [0.0, 1.0, 0.25], atol=1e-4)
    w = torch.randn(3, 60, 4, generator=g, dtype=torch.float64)
    np.testing.assert_allclose(anchored_stress(w, x).numpy(),
                               [_stress_by_hand(w[j].numpy(), x[j].numpy()) for j in range(3)],
                               rtol=1e-5)


def test_the_anchor_is_a_number_at_least_zero_and_names_its_candidate():
    from sphr.risk.refits import candidate_of

    # 1 and 1.0 are one setting: stored as the float, so both name the same candidate
    assert type(TrainConfig(anchor=1).anchor) is float
    assert TrainConfig(anchor=1) == TrainConfig(anchor=1.0)
    assert candidate_of(TrainConfig(anchor=1).to_dict()) == "anchor=1.0"
    assert candidate_of(TrainConfig(anchor=2.5).to_dict()) == "anchor=2.5"
    assert candidate_of(TrainConfig().to_dict()) == "default"
    assert TrainConfig(anchor=0).anchor == 0.0  # zero (off) is allowed: "at least zero"
    for bad in (-0.5, -1e-9, float("inf"), float("nan"), "1", True):
        with pytest.raises(ConfigError, match="anchor"):
            TrainConfig(anchor=bad)


def test_the_validation_loss_carries_the_anchor_on_validation_rows_only():
    X, labels, augmented, triplets = selection_data(300, 0)
    split = split_validation(labels, augmented, triplets, 0.2, seed=0)
    Xt = torch.from_numpy(X)
    params = stack_params([init_model(X.shape[1], 0)], torch.device("cpu"))
    loss = build_loss("nplb")
    anchored = Validator(Xt, labels, augmented, split, patience=2)
    base = anchored.compute(params, BatchObjective([loss]), stacked_forward)[0]
    with_anchor = anchored.compute(params, BatchObjective([loss], 2.0), stacked_forward)[0]
    z = stacked_forward(params, anchored.xv.unsqueeze(0), None)[0]
    for i, t in enumerate(anchored._batches):
        stress = geometry_stress(z[t[:, 0]], z[t[:, 1]], z[t[:, 2]], anchored.xv[t[:, 0]],
                                 anchored.xv[t[:, 1]], anchored.xv[t[:, 2]])
        assert torch.allclose(with_anchor[0, i], base[0, i] + 2.0 * stress, atol=1e-5)
    # a fitting row's markers changed: the validation loss, anchor and all, does not move
    moved = Xt.clone()
    moved[torch.as_tensor(split.fit_rows)] += 5.0
    again = Validator(moved, labels, augmented, split, patience=2)
    assert torch.equal(again.compute(params, BatchObjective([loss], 2.0), stacked_forward)[0],
                       with_anchor)


def _final_stress(result, X: np.ndarray, triplets: np.ndarray) -> float:
    from sphr.train.model_io import embed

    z = torch.from_numpy(embed(result.model, X, device="cpu"))
    x = torch.from_numpy(X)
    t = torch.from_numpy(triplets)
    return float(geometry_stress(z[t[:, 0]], z[t[:, 1]], z[t[:, 2]], x[t[:, 0]], x[t[:, 1]],
                                 x[t[:, 2]]))


@pytest.mark.parametrize("compile", [False, pytest.param(True, marks=compiled)])
def test_training_with_the_anchor_keeps_the_markers_geometry_and_repeats_bit_for_bit(compile):
    X, labels, augmented, triplets = selection_data(300, 0)
    # 3,968 = 31 x 128 triplets (the validation split keeps their number): whole batches, so
    # the compiled step compiles for one batch shape per weight, not two (from a cold cache
    # the short last batch's graphs took half this test's time)
    triplets = triplets[:3968]
    cfg = TrainConfig(epochs=4, batch_size=BATCH, validation_size=0.2, device="cpu",
                      checkpoint_every=0, compile=compile, lr=3e-3)
    # the plain training, the yardstick, trains eagerly: compiled it would be one more graph
    # of its own (tests/compiled_setup.py); the anchored one is the step test_train_fused.py
    # checks against autograd
    plain = train_sphr(X, triplets, dataclasses.replace(cfg, compile=False), labels=labels,
                       augmented=augmented)
    anchored_cfg = dataclasses.replace(cfg, anchor=ANCHOR_WEIGHT)
    anchored = train_sphr(X, triplets, anchored_cfg, labels=labels, augmented=augmented)
    # seeds 0-4 give a ratio of 0.35-0.52 (per-batch step, measured when the training's
    # streams became SeedSequence ones, docs/REPRODUCIBILITY.md); an anchor that does nothing
    # gives 1
    assert _final_stress(anchored, X, triplets) < 0.7 * _final_stress(plain, X, triplets)
    again = train_sphr(X, triplets, anchored_cfg, labels=labels, augmented=augmented)
    assert anchored.loss_curve == again.loss_curve
    assert anchored.config.anchor == ANCHOR_WEIGHT and plain.config.anchor == 0.0
