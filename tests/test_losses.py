"""SPHR losses against their formulas (docs/METHODS.md#losses)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sphr.errors import ConfigError
from sphr.losses import LOSSES, MDR, NPLB, build_loss


def _batch(seed: int, b: int = 48, d: int = 32, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(b, d, generator=g, dtype=torch.float64) * scale for _ in range(3))


def _d(x, y):
    return torch.linalg.vector_norm(x - y, dim=1)


def _close(a, b, tol=1e-4):
    assert float(torch.as_tensor(a).detach()) == pytest.approx(float(b), rel=tol, abs=tol)


def test_names_match_the_evaluation_tables():
    from sphr.evaluate.paper import LOSSES as TABLE

    assert tuple(LOSSES) == tuple(TABLE)
    with pytest.raises(ConfigError, match="unknown loss"):
        build_loss("contrastive")
    with pytest.raises(ConfigError, match="no parameter"):
        build_loss("triplet", p=2)


def test_triplet_and_distance_swap_formulas():
    a, p, n = _batch(0)
    m = 1.0
    _close(build_loss("triplet", margin=m)(a, p, n), torch.relu(_d(a, p) - _d(a, n) + m).mean())
    swap = torch.relu(_d(a, p) - torch.minimum(_d(a, n), _d(p, n)) + m).mean()
    _close(build_loss("distance_swap", margin=m)(a, p, n), swap)
    # the same as torch's TripletMarginLoss (the paper's listing) with margin 1
    _close(build_loss("triplet")(a, p, n), torch.nn.TripletMarginLoss(margin=1.0)(a, p, n))
    _close(build_loss("distance_swap")(a, p, n),
           torch.nn.TripletMarginLoss(margin=1.0, swap=True)(a, p, n))


@pytest.mark.parametrize("power", [2, 4])
def test_nplb_formula(power):
    a, p, n = _batch(1, scale=0.5)
    want = (torch.relu(_d(a, p) - _d(a, n) + 1.0) + (_d(p, n) - _d(a, n)) ** power).mean()
    _close(build_loss("nplb", p=power)(a, p, n), want)


def test_nplb_regularizer_uses_the_positive_to_negative_distance():
    a, p, n = _batch(2)
    nplb, trip = build_loss("nplb"), build_loss("triplet")
    reg = float(nplb(a, p, n) - trip(a, p, n))
    assert reg > 1e-3  # d(p,n) != d(a,n): an implementation using d(a,n) twice gives 0 here
    _close(reg, ((_d(p, n) - _d(a, n)) ** 2).mean())
    # p a rotation of a about n: d(p,n) == d(a,n), the regularizer vanishes
    q, _ = torch.linalg.qr(torch.randn(32, 32, generator=torch.Generator().manual_seed(3),
                                       dtype=torch.float64))
    p_eq = n + (a - n) @ q
    assert torch.allclose(_d(p_eq, n), _d(a, n))
    assert abs(float(nplb(a, p_eq, n) - trip(a, p_eq, n))) < 1e-8


@pytest.mark.parametrize("power", [1, 3, 2.5, 0, -2])
def test_nplb_rejects_odd_or_invalid_powers(power):
    with pytest.raises(ConfigError, match="even"):
        NPLB(p=power)


def test_mdr_formula_and_running_statistics():
    a, p, n = (t.float() for t in _batch(4, b=20, d=8))
    loss = MDR(margin=1.0, weight=0.6, level_reg=0.01)
    e = torch.cat([a, p, n])
    iu = torch.triu_indices(60, 60, 1)
    d = torch.cdist(e, e)[iu[0], iu[1]]
    z = (d - d.mean()) / d.std(correction=0)
    levels = torch.tensor([-3.0, 0.0, 3.0])
    reg = (z[:, None] - levels).abs().min(1).values.mean()
    trip = torch.relu(_d(a, p) - _d(a, n) + 1.0).mean()
    _close(loss(a, p, n), trip + 0.6 * reg + 0.01 * 18.0)
    assert float(loss.running_mean) == pytest.approx(float(d.mean()), rel=1e-5)
    # second batch: momentum 0.9 on the running mean
    a2, p2, n2 = (t.float() * 2 for t in _batch(5, b=20, d=8))
    e2 = torch.cat([a2, p2, n2])
    d2 = torch.cdist(e2, e2)[iu[0], iu[1]]
    out = loss(a2, p2, n2)
    assert float(loss.running_mean) == pytest.approx(0.9 * float(d.mean()) + 0.1 * float(d2.mean()),
                                                     rel=1e-5)
    out.backward()
    assert loss.levels.grad is not None and torch.isfinite(loss.levels.grad).all()


def test_lifted_struct_on_the_batch_triplets():
    a, p, n = (t.float() for t in _batch(6))
    want = (torch.relu(_d(a, p) - _d(a, n) + 1.0) ** 2).mean() / 2
    _close(build_loss("lifted_struct")(a, p, n), want, tol=1e-3)


def test_infonce_is_cosine_nt_xent_on_the_batch_triplets():
    a, p, n = (t.float() for t in _batch(7))
    tau = 0.07
    s_ap = torch.nn.functional.cosine_similarity(a, p) / tau
    s_an = torch.nn.functional.cosine_similarity(a, n) / tau
    want = -(s_ap - torch.logsumexp(torch.stack([s_ap, s_an]), 0)).mean()
    _close(build_loss("infonce")(a, p, n), want, tol=1e-3)
    # scale-free: cosine similarity, not pytorch-metric-learning's distance on raw norms
    _close(build_loss("infonce")(3 * a, 3 * p, 3 * n), want, tol=1e-3)


def test_npair_unnormalized_dot_product_with_l2_penalty():
    a, p, n = (t.float() * 0.3 for t in _batch(8, b=16))
    logits = a @ p.T
    ce = torch.nn.functional.cross_entropy(logits, torch.arange(16))
    reg = (torch.cat([a, p, n]) ** 2).sum(1).mean()
    _close(build_loss("npair")(a, p, n), ce + 0.002 * reg, tol=1e-3)


def test_pml_losses_take_class_labels():
    """Each PML loss takes class labels and backpropagates. What the labels change, as
    measured: the batch's triplets reach pytorch-metric-learning as its ``indices_tuple``
    (pml_batch), which fixes the pairs of lifted structure and InfoNCE, so their value is
    the same with or without labels; N-Pair reads the labels it is given (the training
    objective gives it none, ``uses_labels = False``: per-triplet pseudo-labels)."""
    a, p, n = (t.float() for t in _batch(9, b=30))
    la = torch.arange(30) % 3
    labels = (la, la, (la + 1) % 3)
    for name in ("npair", "lifted_struct", "infonce"):
        v = build_loss(name)(a.requires_grad_(), p, n, labels)
        assert torch.isfinite(v)
        v.backward()
        assert a.grad is not None
        a.grad = None
        same = bool(torch.isclose(build_loss(name)(a, p, n).detach(), v.detach()))
        assert same == (name != "npair"), name


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.floats(-5, 5), scale=st.floats(0.1, 3.0))
def test_euclidean_losses_are_invariant_to_rigid_motions(seed, shift, scale):
    a, p, n = _batch(seed, b=16, d=8, scale=scale)
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=torch.Generator().manual_seed(seed + 1),
                                       dtype=torch.float64))
    moved = [x @ q + shift for x in (a, p, n)]
    for name in ("triplet", "distance_swap", "nplb"):
        loss = build_loss(name)
        # 1e-5: pairwise_distance adds 1e-6 to each coordinate difference (as the listing does)
        assert math.isclose(float(loss(a, p, n)), float(loss(*moved)), rel_tol=1e-5, abs_tol=1e-5)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.05, 3.0))
def test_loss_orderings(seed, scale):
    a, p, n = _batch(seed, b=16, d=8, scale=scale)
    trip = float(build_loss("triplet")(a, p, n))
    assert float(build_loss("nplb")(a, p, n)) >= trip - 1e-9  # the regularizer is >= 0
    assert float(build_loss("distance_swap")(a, p, n)) >= trip - 1e-9  # min(d-, rho) <= d-
    # positive == anchor: the regularizer is exactly zero
    assert math.isclose(float(build_loss("nplb")(a, a, n)), float(build_loss("triplet")(a, a, n)),
                        rel_tol=1e-9, abs_tol=1e-9)


def test_every_loss_gives_finite_gradients():
    g = torch.Generator().manual_seed(10)
    z = torch.randn(96, 32, generator=g, requires_grad=True)
    lab = torch.arange(96) % 3
    for name in LOSSES:
        loss = build_loss(name)
        v = loss(z[:32], z[32:64], z[64:], (lab[:32], lab[:32], (lab[64:] + 1) % 3))
        (gz,) = torch.autograd.grad(v, z)
        assert torch.isfinite(v) and torch.isfinite(gz).all(), name
        assert np.abs(gz.numpy()).sum() > 0, name
