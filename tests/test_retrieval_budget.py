"""Retrieval at a reduced budget: budget-scaled schedules, AutoMargin warm-up, the collapse
monitor, OCAM's S-bit heads, best-epoch selection and the comparison's selection / margin /
collapse table (docs/notes/RETRIEVAL.md)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sphr.errors import ConfigError
from sphr.losses.registry import RETRIEVAL, build_loss
from sphr.retrieval.backbones import build_model
from sphr.retrieval.losses import AutoMargin, BatchStats, DAMSMargin, LinearMargin
from sphr.retrieval.losses.schedulers import scaled_step
from sphr.retrieval.monitor import (
    CollapseMonitor,
    effective_rank,
    embedding_health,
    mean_negative_cosine,
)
from sphr.retrieval.profiles import get_profile


def stats(deltas: list[float], negs: list[float] | None = None) -> BatchStats:
    return BatchStats(torch.tensor(deltas, dtype=torch.float64),
                      torch.tensor(negs or [0.0], dtype=torch.float64))


def run_epochs(sched, epochs: int, delta: float = 0.5) -> list[float]:
    """Margins in force in each epoch, with every triplet at ``delta``."""
    used = []
    for _ in range(epochs):
        used.append(sched.current()["margin"])
        sched.observe(stats([delta] * 20))
        sched.step_epoch()
    return used


# --- budget-scaled Linear / DAMS ------------------------------------------------------------------


@pytest.mark.parametrize("epochs", [2, 8, 20, 30])
def test_scaled_linear_reaches_the_papers_final_margin_within_the_run(epochs: int) -> None:
    lin = LinearMargin(mu0=0.0, step=0.01, paper_epochs=100)
    lin.set_budget(epochs, 7, scale=True)
    used = run_epochs(lin, epochs)
    assert used[0] == 0.0
    # mu0 + 0.01 * 100: the paper's range, reached in the last epoch
    assert used[-1] == pytest.approx(1.0)
    assert np.all(np.diff(used) > 0)
    assert lin.target == pytest.approx(1.0)


def test_unscaled_linear_keeps_the_papers_per_epoch_step() -> None:
    lin = LinearMargin(mu0=0.0, step=0.01)
    lin.set_budget(8, 7, scale=False)
    assert run_epochs(lin, 8)[-1] == pytest.approx(0.07)


@pytest.mark.parametrize("epochs", [5, 8, 20])
def test_scaled_dams_reaches_its_range_when_every_epoch_is_easy_and_holds_otherwise(
        epochs: int) -> None:
    dams = DAMSMargin(mu0=0.0, step=0.01, threshold=0.95)
    dams.set_budget(epochs, 7, scale=True)
    # every triplet easy at any margin: the margin rises every epoch
    used = run_epochs(dams, epochs, delta=5.0)
    assert used[-1] == pytest.approx(dams.target) and dams.target == pytest.approx(1.0)
    hard = DAMSMargin(mu0=0.0, step=0.01)
    hard.set_budget(epochs, 7, scale=True)
    assert run_epochs(hard, epochs, delta=-0.1) == [0.0] * epochs  # never easy: the margin stays


def test_dams_mu0_ablation_starts_above_zero_and_scales_from_there() -> None:
    loss = build_loss("triplet_dams:mu0=0.2", RETRIEVAL)
    loss.set_budget(8, 7, scale=True)
    assert loss.current_margin() == pytest.approx(0.2)
    assert (
        loss.scheduler.step == pytest.approx(scaled_step(0.2, 0.01, 100, 8)) == pytest.approx(1 / 7)
    )
    assert loss.scheduler.target == pytest.approx(1.2)
    with pytest.raises(ConfigError):
        scaled_step(0.0, 0.01, 0, 8)


def test_training_scales_the_schedule_from_the_profile() -> None:
    from sphr.retrieval.data import load_retrieval_data
    from sphr.retrieval.train import train_model

    data = load_retrieval_data("digits", limit=120)
    prof = get_profile("smoke", epochs=3, batch_size=40, batches_per_epoch=1,
                       image_size={"digits": 16}, scale_schedules=True)
    r = train_model(data, build_loss("triplet_linear", RETRIEVAL), prof, seed=0)
    assert [h["margin"] for h in r.history] == pytest.approx([0.0, 0.5, 1.0])
    assert {"neg_cos", "eff_rank", "collapsed"} <= set(r.history[0])


# --- AutoMargin warm-up ------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_automargin_warmup_holds_eps0_and_beta0_for_k_epochs(k: int) -> None:
    am = AutoMargin(k_delta=2, k_an=2, eps0=0.25, beta0=0.0, warmup_epochs=k)
    seen = []
    for _ in range(k + 2):
        seen.append(dict(am.current()))
        am.observe(stats([0.1, 0.3], [0.4]))
        am.step_epoch()
    assert seen[:k] == [{"margin": 0.25, "beta": 0.0}] * k
    assert seen[k]["margin"] == pytest.approx(0.2 / 2)  # updated from epoch k-1's statistics
    assert seen[k]["beta"] == pytest.approx(1 + (0.4 - 1) / 2)
    assert [h["warmup"] for h in am.history] == [1.0] * k + [0.0] * 2


def test_automargin_warmup_until_delta_ends_when_mean_delta_passes_eps0() -> None:
    am = AutoMargin(eps0=0.25, warmup_until_delta=True)
    for d in (0.02, 0.1, 0.2):  # a random network: mean delta far below eps0
        am.observe(stats([d]))
        am.step_epoch()
        assert am.current()["margin"] == 0.25
    am.observe(stats([0.4]))
    am.step_epoch()
    assert am.current()["margin"] == pytest.approx(0.2)
    capped = AutoMargin(eps0=0.25, warmup_until_delta=True, warmup_epochs=2)
    for _ in range(2):
        capped.observe(stats([0.02]))
        capped.step_epoch()
    assert capped.current()["margin"] == pytest.approx(0.01)  # the cap ends it even below eps0


def test_automargin_per_batch_waits_for_the_warmup() -> None:
    am = AutoMargin(per_batch=True, warmup_epochs=1)
    am.observe(stats([0.4, 0.8], [0.2]))
    assert am.current() == {"margin": 0.25, "beta": 0.0}
    am.step_epoch()
    am.observe(stats([0.2], [0.0]))
    assert am.current()["margin"] == pytest.approx(0.1)  # per batch from now on
    with pytest.raises(ConfigError):
        AutoMargin(warmup_epochs=-1)


def test_profile_loss_options_reach_automargin_but_not_the_spec_it_overrides() -> None:
    from sphr.retrieval.compare import loss_for

    prof = get_profile("quick")
    am = loss_for("adatriplet_automargin", prof).scheduler
    assert am.warmup_until_delta and am.warmup_epochs == 2
    no_warmup = loss_for("adatriplet_automargin:warmup_epochs=0,warmup_until_delta=false", prof)
    assert no_warmup.scheduler.warming_up is False
    assert not get_profile("paper").loss_options and get_profile("paper").scale_schedules is False


# --- collapse monitor ---------------------------------------------------------------------------


def spread_embedding(n_classes: int = 8, per_class: int = 6, dim: int = 32, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    centers = F.normalize(torch.randn(n_classes, dim, generator=gen), dim=1)
    y = torch.arange(n_classes).repeat_interleave(per_class)
    x = F.normalize(centers[y] + 0.1 * torch.randn(len(y), dim, generator=gen), dim=1)
    return x, y


def test_collapse_monitor_fires_on_a_collapsed_embedding_and_not_on_a_spread_one() -> None:
    x, y = spread_embedding()
    spread = embedding_health(x, y)
    assert not spread.collapsed and spread.mean_negative_cosine < 0.5 and spread.effective_rank > 5
    gen = torch.Generator().manual_seed(1)
    point = F.normalize(torch.ones(len(y), 32) + 0.02 * torch.randn(len(y), 32, generator=gen),
                        dim=1)
    h = embedding_health(point, y)
    assert h.collapsed and h.mean_negative_cosine > 0.95
    # rank collapse: spread along one line (negatives far apart, but one direction only)
    line = F.normalize(
        torch.stack([torch.ones(len(y)), torch.linspace(-3, 3, len(y))], 1) @ torch.eye(2, 32),
        dim=1,
    )
    r = embedding_health(line, y)
    assert r.effective_rank < 2 and r.collapsed
    assert r.mean_negative_cosine < 0.95


def test_mean_negative_cosine_matches_the_pairwise_mean() -> None:
    x, y = spread_embedding(4, 3, 8, seed=2)
    s = x @ x.T
    neg = y[:, None] != y[None, :]
    assert mean_negative_cosine(x, y) == pytest.approx(float(s[neg].mean()), abs=1e-6)
    assert effective_rank(torch.zeros(5, 3)) == 0.0


def test_collapse_monitor_averages_batches_and_counts_epochs(
        caplog: pytest.LogCaptureFixture) -> None:
    x, y = spread_embedding()
    mon = CollapseMonitor()
    mon.update(x, y)
    assert not mon.end_epoch().collapsed
    mon.update(F.normalize(torch.ones_like(x) + 1e-3 * x, dim=1), y)
    assert mon.end_epoch().collapsed and mon.epochs_collapsed == 1


def test_training_warns_when_the_embedding_collapses(caplog: pytest.LogCaptureFixture) -> None:
    from sphr.retrieval.data import load_retrieval_data
    from sphr.retrieval.train import train_model

    data = load_retrieval_data("digits", limit=120)
    # a huge learning rate on a margin-0 hinge drives the net to a point
    prof = get_profile("smoke", epochs=2, batch_size=40, batches_per_epoch=3,
                       image_size={"digits": 16})
    with caplog.at_level(logging.WARNING, logger="sphr.retrieval.train"):
        r = train_model(data, build_loss("triplet_dams", RETRIEVAL), prof, seed=0)
    fired = [h for h in r.history if h["collapsed"]]
    assert r.collapsed_epochs == len(fired)
    assert bool(fired) == any("collapse" in m for m in caplog.messages)


# --- OCAM S-bit heads ---------------------------------------------------------------------------


def test_code_heads_give_s_dimensional_codes_and_can_leave_the_backbone_alone() -> None:
    model = build_model("small_cnn", in_channels=1, dim=24, width=8, code_bits=(16, 64)).eval()
    emb, codes = model.forward_all(torch.randn(5, 1, 16, 16))
    assert emb.shape == (5, 24)
    assert {b: c.shape for b, c in codes.items()} == {16: (5, 16), 64: (5, 64)}
    from sphr.retrieval.metrics import binarize

    assert set(binarize(codes[16], 16).unique().tolist()) <= {-1.0, 1.0}
    # detached heads: their loss gives the backbone no gradient
    model.train()
    _, codes = model.forward_all(torch.randn(8, 1, 16, 16))
    codes[16].sum().backward()
    assert all(p.grad is None for p in model.backbone.parameters())
    joint = build_model("small_cnn", in_channels=1, dim=24, width=8, code_bits=(16,),
                        detach_codes=False)
    joint.forward_all(torch.randn(8, 1, 16, 16))[1][16].sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in joint.backbone.parameters())


def test_evaluation_reports_trained_codes_and_projected_codes_apart() -> None:
    from sphr.retrieval.metrics import retrieval_metrics

    x, y = spread_embedding(6, 5, 32)
    codes = {16: F.normalize(torch.randn(len(y), 16), dim=1)}
    ev = retrieval_metrics(x, y.numpy(), np.full(len(y), np.nan), hamming_bits=(16, 64),
                           codes=codes)
    assert {"mAP_H16", "mAP_H16_proj", "mAP_H64_proj"} <= set(ev.metrics)
    assert "mAP_H64" not in ev.metrics  # no trained 64-bit head: no mixing with the projection
    # random codes vs projected good embedding
    assert ev.metrics["mAP_H16_proj"] > ev.metrics["mAP_H16"]


# --- the comparison ------------------------------------------------------------------------------


def test_comparison_reports_last_and_best_epoch_margins_collapse_and_ocam_codes(tmp_path) -> None:
    from sphr.retrieval import run_comparison

    res = run_comparison("forensic", ["triplet_linear", "ocam"], seeds=[0], out_dir=tmp_path,
                         device="cpu",
                         profile="smoke", data_options={"n_subjects": 24, "size": 32},
                         profile_overrides={"image_size": {"forensic": 32}, "epochs": 3,
                                            "scale_schedules": True})
    wide = res.per_seed.pivot_table(index="loss", columns="metric", values="value")
    for metric in ("mAP", "mAP_best", "best_epoch", "collapse", "neg_cos", "eff_rank"):
        assert wide[metric].notna().all(), metric
    assert wide.loc["triplet_linear", "final_margin"] == pytest.approx(1.0)
    assert np.isfinite(wide.loc["ocam", "mAP_H16"]) and "mAP_H16" in wide.columns
    assert np.isnan(wide.loc["triplet_linear", "mAP_H16"])  # only OCAM's heads are trained in smoke
    assert res.config["val_images"] > 0 and res.config["train_images"] < 24 * 5
    md = (tmp_path / "comparison.md").read_text()
    assert "mAP best epoch" in md and "| triplet_linear |" in md and "0.00 0.50 1.00" in md
    assert "collapse" in md
    curves = res.margin_curves
    assert {"val_mAP", "neg_cos", "eff_rank", "collapsed"} <= set(curves.columns)


def test_validation_split_keeps_subjects_apart() -> None:
    from sphr.retrieval.compare import split_validation
    from sphr.retrieval.data import load_retrieval_data

    data = load_retrieval_data("forensic", n_subjects=30, size=16)
    reduced, val = split_validation(data, 0.2)
    assert val is not None and not set(val.labels) & set(reduced.train.labels)
    assert len(val) + len(reduced.train) == len(data.train)
    assert split_validation(data, 0.0) == (data, None)
    digits = load_retrieval_data("digits", limit=200)
    d2, v2 = split_validation(digits, 0.2)
    # class level: every class in both
    assert v2 is not None and set(v2.labels) == set(d2.train.labels)
    with pytest.raises(ConfigError):
        split_validation(data, 1.5)
