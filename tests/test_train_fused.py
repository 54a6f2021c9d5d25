"""The compiled fast path (sphr.train.fused): its masks, and one step equal to the eager
autograd + torch.optim.Adam step on the same masks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from compiled_setup import (
    ANCHOR_FEATURES,
    ANCHOR_ROWS,
    ANCHOR_WEIGHT,
    BATCH,
    FEATURES,
    PURE_THREE,
    ROWS,
    compiled,
)

from sphr.losses import BatchObjective, build_loss
from sphr.losses.anchor import anchored_stress
from sphr.train import TrainConfig
from sphr.train.fused import FusedStep, _mix32, hashed_masks, supports
from sphr.train.stacked import init_model, stack_params, stacked_forward

KEPT = round(0.9 * 65536)


def test_hashed_masks_keep_the_configured_share_and_follow_the_key():
    keys = torch.tensor([11, 11, 12], dtype=torch.int32)
    masks = hashed_masks(keys, 4096, KEPT)
    assert [m.shape for m in masks] == [(3, 4096, 512), (3, 4096, 256)]
    for m in masks:
        assert torch.equal(m[0], m[1])  # same key (a shared seed): same masks
        assert not torch.equal(m[0], m[2])
        kept = (m[2] > 0).float().mean().item()
        assert abs(kept - 0.9) < 0.004  # 1-2M draws: SD < 3e-4
        assert torch.unique(m).tolist() == pytest.approx([0.0, 65536 / KEPT])
    # the two layers and neighbouring units are not copies of each other
    a, b = masks[0][2, :, :256] > 0, masks[1][2] > 0
    assert 0.75 < (a == b).float().mean().item() < 0.87  # independent: 0.9^2 + 0.1^2 = 0.82
    assert torch.equal(hashed_masks(keys, 4096, KEPT)[1], masks[1])


def test_mix32_has_no_short_range_structure():
    """Consecutive counters give 16-bit values that look uniform and uncorrelated."""
    u = (_mix32(torch.arange(1 << 18, dtype=torch.int32)) & 0xFFFF).double()
    assert abs(u.mean().item() / 65535 - 0.5) < 0.005
    lag1 = np.corrcoef(u[:-1].numpy(), u[1:].numpy())[0, 1]
    assert abs(lag1) < 0.01
    counts = torch.bincount((u // 4096).long(), minlength=16).double()
    expected = u.numel() / 16
    assert ((counts - expected) ** 2 / expected).sum().item() < 40  # chi2(15): p ~ 0.0005


def test_only_pure_losses_take_the_fused_path():
    assert supports([build_loss("nplb"), build_loss("triplet"), build_loss("distance_swap")])
    assert not supports([build_loss("nplb"), build_loss("mdr")])  # parameters, running stats
    assert not supports([build_loss("npair")])  # labels


#: the step's two shapes: the three pure losses' stack, and one model with R3's anchor
#: (sphr.losses.anchor) on the anchor test's data; each shares its compiled graph with other
#: tests (tests/compiled_setup.py)
STEPS = {"three pure losses": (PURE_THREE, ROWS, FEATURES, 0.0),
         "the anchor": ((("nplb", {}),), ANCHOR_ROWS, ANCHOR_FEATURES, ANCHOR_WEIGHT)}


@compiled
@pytest.mark.parametrize("case", list(STEPS))
def test_fused_step_equals_autograd_and_adam_on_the_same_masks(case):
    specs, n, features, anchor = STEPS[case]
    torch.manual_seed(0)
    X = torch.randn(n, features)
    losses = [build_loss(name, **kw) for name, kw in specs]
    templates = [init_model(features, j) for j in range(len(specs))]
    ours = stack_params(templates, torch.device("cpu"))
    ref = stack_params(templates, torch.device("cpu"))
    opt = torch.optim.Adam(ours, lr=1e-2, fused=True)
    ref_opt = torch.optim.Adam(ref, lr=1e-2)
    step = FusedStep(ours, opt, BatchObjective(losses, geometry=anchor), dropout=0.1, bf16=False)
    gen = torch.Generator().manual_seed(3)
    b = BATCH
    for _ in range(3):
        rows = torch.randint(0, n, (len(specs), 3 * b), generator=gen)
        keys = torch.randint(0, 2**31 - 1, (len(specs),), generator=gen, dtype=torch.int32)
        values = step(X, rows, keys)
        masks = hashed_masks(keys, rows.shape[1], KEPT)
        z = stacked_forward(ref, X[rows], masks)
        expect = torch.stack([loss(z[j, :b], z[j, b:2 * b], z[j, 2 * b:])
                              for j, loss in enumerate(losses)])
        expect = expect + anchor * anchored_stress(z, X[rows])
        ref_opt.zero_grad()
        expect.sum().backward()
        ref_opt.step()
        # steps after the first start from weights Adam moved by a rounding apart (below)
        assert torch.allclose(values, expect.detach(), rtol=1e-4, atol=1e-5)
    for p, q in zip(ours, ref, strict=True):
        # Adam moves every weight by about lr a step whatever its gradient's size, so where a
        # gradient is ~0 float rounding can tilt it: 3% of one step (a wrong gradient, bias
        # correction or learning rate is off by whole steps)
        assert torch.allclose(p, q, atol=0.03 * 1e-2)
    assert int(opt.state[ours[0]]["step"]) == 3  # Adam's own state, as Adam.step keeps it


@compiled
def test_compiled_training_takes_the_fused_path_learns_and_resumes(tmp_path):
    from sphr.train import train_sphr

    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, ROWS)
    X = (rng.normal(size=(ROWS, FEATURES)) + y[:, None]).astype(np.float32)
    a = rng.integers(0, ROWS, 4 * BATCH)
    p = np.array([rng.choice(np.flatnonzero(y == y[i])) for i in a])
    n = np.array([rng.choice(np.flatnonzero(y != y[i])) for i in a])
    T = np.stack([a, p, n], 1)
    cfg = TrainConfig(epochs=4, batch_size=BATCH, device="cpu", compile=True, checkpoint_every=2,
                      lr=3e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        whole = train_sphr(X, T, cfg, labels=y)
    # the fused step bypasses Adam.step, which the scheduler's order check looks for
    assert not [w for w in caught if "lr_scheduler.step()" in str(w.message)]
    assert whole.timings["fused_step"] and len(whole.timings["epoch_s"]) == 4
    assert whole.loss_curve[-1] < whole.loss_curve[0]
    again = train_sphr(X, T, cfg, labels=y)
    assert whole.loss_curve == again.loss_curve  # same seed, same masks, same result
    # two epochs, stop, resume to four: the same weights as the run without a stop
    import dataclasses

    train_sphr(X, T, dataclasses.replace(cfg, epochs=2), labels=y, checkpoint_dir=tmp_path)
    resumed = train_sphr(X, T, cfg, labels=y, checkpoint_dir=tmp_path, resume=True)
    for (k, v), w in zip(whole.model.state_dict().items(), resumed.model.state_dict().values(),
                         strict=True):
        assert torch.equal(v, w), k
