"""Retrieval losses against their formulas, gradients and
pytorch-metric-learning; schedulers; registry."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from sphr.errors import ConfigError
from sphr.losses.registry import RETRIEVAL, build_loss, parse_loss_spec
from sphr.retrieval.losses import (
    LOSSES,
    AdaTripletLoss,
    AutoMargin,
    BatchStats,
    ContrastiveLoss,
    DAMSMargin,
    LinearMargin,
    NPLBLoss,
    OCAMLoss,
    TripletLoss,
    TripletMiner,
    adatriplet_per_triplet,
    all_triplet_indices,
    ocam_per_triplet,
    triplet_negative_pairs,
)


def batch(n_classes: int = 3, per_class: int = 3, dim: int = 6,
          seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = F.normalize(torch.randn(n_classes * per_class, dim, generator=gen, dtype=torch.float64),
                    dim=1)
    y = torch.arange(n_classes).repeat_interleave(per_class)
    return x, y


def triplets_by_loop(y: torch.Tensor) -> list[tuple[int, int, int]]:
    n = len(y)
    return [(a, p, q) for a, p, q in itertools.product(range(n), repeat=3)
            if a != p and y[a] == y[p] and y[a] != y[q]]


def test_all_triplets_match_a_plain_loop() -> None:
    _, y = batch(3, 3)
    a, p, n = all_triplet_indices(y)
    assert sorted(zip(a.tolist(), p.tolist(), n.tolist(), strict=True)) == triplets_by_loop(y)


def test_negative_pairs_are_deduplicated_anchor_negative_pairs() -> None:
    y = torch.tensor([0, 0, 1, 1, 2])  # sample 4 has no positive: it is only ever a negative
    i, j = triplet_negative_pairs(y)
    got = set(zip(i.tolist(), j.tolist(), strict=True))
    expected = {tuple(sorted((a, q))) for a, _, q in triplets_by_loop(y)}
    assert got == expected
    assert all(a < b for a, b in got)


def test_cosine_triplet_semihard_nonzero_matches_formula() -> None:
    x, y = batch(seed=1)
    eps = 0.25
    loss = TripletLoss(eps, geometry="cosine", selection="semihard", reduction="nonzero")
    terms = []
    for a, p, q in triplets_by_loop(y):
        delta = float(x[a] @ x[p] - x[a] @ x[q])
        if 0 < delta <= eps:  # the authors' semihard filter
            terms.append(max(0.0, eps - delta))
    positive = [t for t in terms if t > 0]
    assert float(loss(x, y)) == pytest.approx(sum(positive) / len(positive), rel=1e-9)


def test_euclidean_triplet_with_swap_matches_formula() -> None:
    x, y = batch(seed=2)
    mu = 0.3
    loss = TripletLoss(mu, geometry="euclidean", swap=True, selection="all", reduction="mean")
    d = torch.cdist(x, x)
    terms = [max(0.0, float(d[a, p] - min(d[a, q], d[p, q]) + mu))
             for a, p, q in triplets_by_loop(y)]
    assert float(loss(x, y)) == pytest.approx(sum(terms) / len(terms), rel=1e-7)


def test_triplet_matches_pytorch_metric_learning() -> None:
    pml = pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning import distances, losses, reducers

    x, y = batch(4, 4, 8, seed=3)
    x = x.float()
    for swap in (False, True):
        ours = TripletLoss(0.3, geometry="euclidean", swap=swap, selection="all", reduction="mean")
        theirs = losses.TripletMarginLoss(margin=0.3, swap=swap, reducer=reducers.MeanReducer(),
                                          distance=distances.LpDistance(normalize_embeddings=True))
        e1, e2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        v1, v2 = ours(e1, y), theirs(e2, y)
        v1.backward()
        v2.backward()
        assert float(v1.detach()) == pytest.approx(float(v2.detach()), rel=1e-5)
        assert torch.allclose(e1.grad, e2.grad, atol=1e-5)
    cos = TripletLoss(0.25, geometry="cosine", selection="all", reduction="nonzero")
    theirs = losses.TripletMarginLoss(margin=0.25, distance=distances.CosineSimilarity())
    assert float(cos(x, y)) == pytest.approx(float(theirs(x, y)), rel=1e-5)
    assert pml.__version__.startswith("2.")


@pytest.mark.parametrize("kind", ["semihard", "hard", "violating", "easy"])
def test_miner_selects_what_pml_triplet_margin_miner_selects(kind: str) -> None:
    from pytorch_metric_learning import distances, miners

    pml_type = {"violating": "all"}.get(kind, kind)  # PML's "all" is our "violating"
    x, y = batch(4, 4, 8, seed=4)
    x = x.float()
    for geometry in ("cosine", "euclidean"):
        ours = TripletMiner(kind, 0.2, geometry=geometry)(x, y)
        distance = (distances.CosineSimilarity() if geometry == "cosine"
                    else distances.LpDistance(normalize_embeddings=True))
        theirs = miners.TripletMarginMiner(margin=0.2, type_of_triplets=pml_type,
                                           distance=distance)(x, y)
        assert set(zip(*[t.tolist() for t in ours], strict=True)) == set(
            zip(*[t.tolist() for t in theirs], strict=True)
        )


def test_miner_output_feeds_a_loss_as_indices_tuple() -> None:
    x, y = batch(seed=5)
    miner = TripletMiner("hard", 0.25)
    loss = TripletLoss(0.25, geometry="cosine", selection="all", reduction="mean")
    a, p, n = miner(x, y)
    expected = F.relu(0.25 - ((x[a] * x[p]).sum(1) - (x[a] * x[n]).sum(1))).mean()
    assert float(loss(x, y, (a, p, n))) == pytest.approx(float(expected))


def test_adatriplet_batch_value_follows_the_authors_reduction() -> None:
    x, y = batch(3, 4, 5, seed=6)
    eps, beta, lam = 0.1, 0.05, 1.0
    loss = AdaTripletLoss(eps, beta, lam, selection="all", reduction="nonzero")
    trip = [max(0.0, float(x[a] @ x[q] - x[a] @ x[p] + eps)) for a, p, q in triplets_by_loop(y)]
    trip = [t for t in trip if t > 0]
    pairs = {tuple(sorted((a, q))) for a, _, q in triplets_by_loop(y)}
    phis = [float(x[i] @ x[j]) for i, j in pairs]
    hard = [phi - beta for phi in phis if phi >= beta]
    expected = sum(trip) / len(trip) + lam * sum(hard) / len(hard)
    assert float(loss(x, y)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(("phi_ap", "phi_an", "expected"), [
    (0.30, 0.40, (-1.0, 2.0)),   # T+ and P+: not easy, hard negative pair -> (-1, 1 + lambda)
    (0.90, 0.40, (0.0, 1.0)),    # easy triplet but phi_an > beta         -> (0, lambda)
    (0.30, 0.15, (-1.0, 1.0)),   # not easy, phi_an <= beta               -> (-1, 1)
    (0.90, 0.10, (0.0, 0.0)),    # easy and phi_an <= beta                -> (0, 0)
])
def test_adatriplet_gradient_regions_of_proposition_2(phi_ap: float, phi_an: float,
                                                      expected: tuple[float, float]) -> None:
    eps, beta, lam = 0.25, 0.2, 1.0
    ap = torch.tensor(phi_ap, dtype=torch.float64, requires_grad=True)
    an = torch.tensor(phi_an, dtype=torch.float64, requires_grad=True)
    adatriplet_per_triplet(ap, an, eps, beta, lam).backward()
    assert (float(ap.grad), float(an.grad)) == pytest.approx(expected)


def test_adatriplet_lambda_scales_the_pair_gradient() -> None:
    ap = torch.tensor(0.9, requires_grad=True)
    an = torch.tensor(0.4, requires_grad=True)
    adatriplet_per_triplet(ap, an, 0.25, 0.2, lam=0.5).backward()
    assert float(an.grad) == pytest.approx(0.5)


def test_ocam_matches_both_forms_of_the_paper() -> None:
    x, y = batch(seed=7)
    loss = OCAMLoss()
    terms = []
    for a, p, q in triplets_by_loop(y):
        f = {
            k: (1 - float(x[i] @ x[j])) / 2
            for k, (i, j) in {"ap": (a, p), "an": (a, q), "pn": (p, q)}.items()
        }
        eq4 = max(0.0, f["ap"] - (f["an"] + f["pn"]) / 2 + (1 - f["pn"]) / 2)
        eq5 = max(0.0, f["ap"] - (f["an"] + 2 * f["pn"] - 1) / 2)
        assert eq4 == pytest.approx(eq5)
        terms.append(eq4)
    assert float(loss(x, y)) == pytest.approx(sum(terms) / len(terms), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=9, max_size=9))
def test_ocam_lies_in_zero_to_one_and_a_half(values: list[float]) -> None:
    v = torch.tensor(values, dtype=torch.float64).view(3, 3) + 1e-3
    a, p, n = F.normalize(v, dim=1)
    value = float(ocam_per_triplet(a @ p, a @ n, p @ n))
    assert 0.0 <= value <= 1.5 + 1e-12


def test_ocam_bounds_are_reached() -> None:
    e = torch.eye(2, dtype=torch.float64)
    # p far from a (f_ap = 1), n on top of a and p... cannot all hold; the worst case with p = -a, n
    # = -a:
    value = float(ocam_per_triplet(e[0] @ -e[0], e[0] @ -e[0], -e[0] @ -e[0]))
    assert value == pytest.approx(1.0)
    assert float(ocam_per_triplet(torch.tensor(1.0), torch.tensor(-1.0), torch.tensor(-1.0))) == 0.0


def test_nplb_matches_formula_and_its_regularizer_uses_the_positive_negative_distance() -> None:
    x, y = batch(seed=8)
    margin = 0.3
    nplb = NPLBLoss(margin)
    d = torch.cdist(x, x)
    trip = [(a, p, q) for a, p, q in triplets_by_loop(y)]
    expected = sum(max(0.0, float(d[a, p] - d[a, q] + margin)) + float(d[p, q] - d[a, q]) ** 2
                   for a, p, q in trip) / len(trip)
    assert float(nplb(x, y)) == pytest.approx(expected, rel=1e-7)
    # A known third-party mistake computes d(p, n) as d(a, n): the regularizer would vanish and
    # NPLB would equal the plain triplet loss. Ours does not.
    plain = TripletLoss(margin, geometry="euclidean", selection="all", reduction="mean")
    regularizer = float(nplb(x, y)) - float(plain(x, y))
    assert regularizer > 1e-3
    assert regularizer == pytest.approx(
        sum(float(d[p, q] - d[a, q]) ** 2 for a, p, q in trip) / len(trip)
    )


@pytest.mark.parametrize("p", [1, 3, 0, 2.5])
def test_nplb_rejects_odd_or_invalid_powers(p: float) -> None:
    with pytest.raises(ConfigError, match="even"):
        NPLBLoss(p=p)  # type: ignore[arg-type]


def test_contrastive_matches_pytorch_metric_learning() -> None:
    pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning import losses

    x, y = batch(4, 3, 8, seed=9)
    x = x.float()
    assert float(ContrastiveLoss()(x, y)) == pytest.approx(float(losses.ContrastiveLoss()(x, y)),
                                                           rel=1e-5)


def stats(deltas: list[float], negs: list[float]) -> BatchStats:
    return BatchStats(torch.tensor(deltas), torch.tensor(negs))


def test_automargin_updates_once_per_epoch_from_the_previous_epoch() -> None:
    am = AutoMargin(k_delta=2, k_an=4)
    assert am.current() == {"margin": 0.25, "beta": 0.0}  # eps0, beta0
    am.observe(stats([0.2, 0.6], [0.1]))
    am.observe(stats([1.0], [0.3, 0.5]))
    assert am.current() == {"margin": 0.25, "beta": 0.0}  # nothing changes inside the epoch
    am.step_epoch()
    assert am.margin == pytest.approx((0.2 + 0.6 + 1.0) / 3 / 2)
    assert am.beta == pytest.approx(1 + ((0.1 + 0.3 + 0.5) / 3 - 1) / 4)
    assert am.history[0]["margin"] == 0.25  # the record holds the margin used during epoch 0


def test_automargin_clips_eps_at_zero_but_not_beta() -> None:
    am = AutoMargin(k_delta=2, k_an=0.5)
    am.observe(stats([-0.4, -0.2], [0.1, 0.1]))
    am.step_epoch()
    assert am.margin == 0.0
    assert am.beta == pytest.approx(1 + (0.1 - 1) / 0.5)  # -0.8, below zero, kept


def test_automargin_per_batch_uses_the_current_batch() -> None:
    am = AutoMargin(per_batch=True)
    am.observe(stats([0.4, 0.8], [0.2]))
    assert am.margin == pytest.approx(0.3)
    assert am.beta == pytest.approx(0.6)
    am.step_epoch()
    assert am.margin == pytest.approx(0.3)  # no second update at the epoch end


def test_dams_raises_the_margin_only_after_an_easy_epoch() -> None:
    dams = DAMSMargin(mu0=0.0, step=0.01, threshold=0.95)
    dams.observe(stats([0.5] * 95 + [-0.1] * 5, [0.0]))  # exactly 95% easy: not more than t
    dams.step_epoch()
    assert dams.margin == 0.0
    dams.observe(stats([0.5] * 96 + [-0.1] * 4, [0.0]))
    dams.step_epoch()
    assert dams.margin == pytest.approx(0.01)
    # easy now means delta > 0.01
    dams.observe(stats([0.005] * 100, [0.0]))
    dams.step_epoch()
    assert dams.margin == pytest.approx(0.01)
    assert [h["easy_share"] for h in dams.history] == pytest.approx([0.95, 0.96, 0.0])


def test_linear_adds_its_step_every_epoch() -> None:
    lin = LinearMargin(mu0=0.0, step=0.01)
    for _ in range(100):
        lin.step_epoch()
    assert lin.margin == pytest.approx(1.0)  # the paper's final margin after 100 epochs


def test_dams_loss_counts_easy_share_over_all_in_batch_triplets_with_swap() -> None:
    x, y = batch(seed=10)
    loss = build_loss("triplet_dams", RETRIEVAL)
    loss(x, y)
    sched = loss.scheduler
    d = torch.cdist(x, x)
    trip = triplets_by_loop(y)
    easy = sum(float(min(d[a, q], d[p, q]) - d[a, p]) > 0.0 for a, p, q in trip)
    assert sched._n == len(trip)
    assert sched.easy_share == pytest.approx(easy / len(trip))


def test_registry_specs_and_options() -> None:
    assert parse_loss_spec("triplet_dams:threshold=0.9,swap=false", RETRIEVAL) == (
        "triplet_dams", {"threshold": 0.9, "swap": False})
    loss = build_loss("triplet_dams:threshold=0.9,swap=false", RETRIEVAL)
    assert loss.scheduler.threshold == 0.9 and loss.swap is False
    with pytest.raises(ConfigError, match="unknown loss"):
        build_loss("triplet_magic", RETRIEVAL)
    with pytest.raises(ConfigError, match="no option"):
        build_loss("ocam:margin=0.2", RETRIEVAL)
    with pytest.raises(ConfigError, match="true or false"):
        build_loss("triplet:swap=3", RETRIEVAL)


@pytest.mark.parametrize("name", list(LOSSES))
def test_every_loss_gives_a_finite_loss_and_gradient(name: str) -> None:
    x, y = batch(4, 4, 16, seed=11)
    x = x.float().requires_grad_()
    value = build_loss(name, RETRIEVAL)(x, y)
    value.backward()
    assert math.isfinite(float(value.detach())) and float(value.detach()) >= 0
    assert torch.isfinite(x.grad).all()


def test_identical_embeddings_give_no_nan_gradient() -> None:
    x = torch.ones(4, 3, requires_grad=True)
    y = torch.tensor([0, 0, 1, 1])
    for name in ("triplet_constant", "nplb", "contrastive"):
        build_loss(name, RETRIEVAL)(x, y).backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None


def test_miner_all_returns_every_triplet_and_semihard_hard_partition_the_violators() -> None:
    x, y = batch(4, 3, 8, seed=12)
    every = TripletMiner("all", 0.2)(x, y)
    assert sorted(zip(*[t.tolist() for t in every], strict=True)) == triplets_by_loop(y)
    for geometry in ("cosine", "euclidean"):
        semi = set(
            zip(
                *[t.tolist() for t in TripletMiner("semihard", 0.2, geometry=geometry)(x, y)],
                strict=True,
            )
        )
        hard = set(
            zip(
                *[t.tolist() for t in TripletMiner("hard", 0.2, geometry=geometry)(x, y)],
                strict=True,
            )
        )
        viol = set(
            zip(
                *[t.tolist() for t in TripletMiner("violating", 0.2, geometry=geometry)(x, y)],
                strict=True,
            )
        )
        assert not semi & hard and semi | hard == viol
        d = torch.cdist(x, x)
        for a, p, q in hard:
            delta = (float(x[a] @ x[p] - x[a] @ x[q]) if geometry == "cosine"
                     else float(d[a, q] - d[a, p]))
            assert delta <= 0
        for a, p, q in semi:
            delta = (float(x[a] @ x[p] - x[a] @ x[q]) if geometry == "cosine"
                     else float(d[a, q] - d[a, p]))
            assert 0 < delta <= 0.2


def single_triplet_grads(loss_fn, cos_ap: float, cos_an: float,
                         cos_pn: float) -> tuple[float, float, float]:
    """d loss / d (cos_ap, cos_an, cos_pn) for a per-triplet function of the three cosines."""
    c = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (cos_ap, cos_an, cos_pn)]
    loss_fn(*c).backward()
    return tuple(0.0 if t.grad is None else float(t.grad) for t in c)  # type: ignore[return-value]


def test_ocam_gradients_in_its_active_and_inactive_regions() -> None:
    # active: f_ap - (f_an + f_pn)/2 + (1 - f_pn)/2 with f = (1 - cos)/2 ->
    # d/dcos_ap = -1/2, d/dcos_an = +1/4, d/dcos_pn = +1/2
    assert single_triplet_grads(ocam_per_triplet, 0.2, 0.5, 0.5) == pytest.approx((-0.5, 0.25, 0.5))
    # inactive (easy): positive close, negative opposite -> no gradient
    assert single_triplet_grads(ocam_per_triplet, 1.0, -1.0, -1.0) == pytest.approx((0.0, 0.0, 0.0))
    # a negative close to the positive raises the margin (1 - f_pn)/2: the loss grows with cos_pn
    assert float(ocam_per_triplet(torch.tensor(0.8), torch.tensor(0.0), torch.tensor(0.9))) > \
        float(ocam_per_triplet(torch.tensor(0.8), torch.tensor(0.0), torch.tensor(-0.9)))


def test_triplet_gradients_cosine_and_euclidean() -> None:
    # cosine Triplet*: (-1, +1) on (phi_ap, phi_an) when active, zero when easy (Prop. 2, last line)
    def cos_trip(ap: torch.Tensor, an: torch.Tensor, _pn: torch.Tensor) -> torch.Tensor:
        return F.relu(an - ap + 0.25)

    assert single_triplet_grads(cos_trip, 0.5, 0.4, 0.0)[:2] == pytest.approx((-1.0, 1.0))
    assert single_triplet_grads(cos_trip, 0.9, 0.1, 0.0)[:2] == pytest.approx((0.0, 0.0))
    # Euclidean loss on unit vectors: d = sqrt(2 - 2 cos); with swap the gradient goes to the nearer
    # negative
    x = F.normalize(torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=torch.float64), dim=1)
    x.requires_grad_()
    y = torch.tensor([0, 0, 1])
    for swap in (False, True):
        loss = TripletLoss(0.3, geometry="euclidean", swap=swap, selection="all", reduction="sum")
        value = loss(x, y)
        d = torch.cdist(x.detach(), x.detach())
        # triplets (0,1,2) and (1,0,2); d_pn is the smaller negative distance for anchor 0 (p=1 is
        # near n=2)
        expected = sum(max(0.0, float(d[a, p] - (min(d[a, 2], d[p, 2]) if swap else d[a, 2]) + 0.3))
                       for a, p in ((0, 1), (1, 0)))
        assert float(value) == pytest.approx(expected)
    assert torch.autograd.gradcheck(
        lambda e: TripletLoss(0.3, geometry="euclidean", swap=True, selection="all",
                              reduction="mean")(e, y),
        (x.detach().clone().requires_grad_(),))


@pytest.mark.parametrize("name", ["triplet", "adatriplet", "ocam", "nplb", "contrastive",
                                  "triplet_constant"])
def test_analytic_gradients_match_finite_differences(name: str) -> None:
    x, y = batch(3, 3, 5, seed=13)
    loss = build_loss(name, RETRIEVAL)
    # fixed margins, no scheduler state change between the evaluations gradcheck makes
    loss.scheduler = None
    assert torch.autograd.gradcheck(lambda e: loss(e, y), (x.clone().requires_grad_(),), atol=1e-6)


def test_adatriplet_with_automargin_reads_statistics_from_all_triplets_and_updates_per_epoch(
) -> None:
    loss = build_loss("adatriplet_automargin", RETRIEVAL)
    batches = [batch(3, 4, 6, seed=s) for s in (14, 15)]
    deltas, negs = [], []
    for x, y in batches:
        loss(x, y)
        # epoch 0: eps0, beta0
        assert loss.last_batch["margin"] == 0.25 and loss.last_batch["beta"] == 0.0
        # all, not only semihard
        deltas += [float(x[a] @ x[p] - x[a] @ x[q]) for a, p, q in triplets_by_loop(y)]
        i, j = triplet_negative_pairs(y)
        negs += (x[i] * x[j]).sum(1).tolist()
    assert loss.last_batch["used"] < loss.last_batch["triplets"]  # semihard mining kept only some
    margins = loss.on_epoch_end()
    assert margins["margin"] == pytest.approx(max(0.0, sum(deltas) / len(deltas) / 2))
    assert margins["beta"] == pytest.approx(1 + (sum(negs) / len(negs) - 1) / 2)
    x, y = batches[0]
    loss(x, y)
    assert loss.last_batch["margin"] == pytest.approx(margins["margin"])


def test_dams_and_linear_losses_move_their_margin_at_epoch_ends() -> None:
    x, y = batch(3, 3, 4, seed=16)
    spread = F.normalize(torch.eye(4, dtype=torch.float64)[y] * 5 + 0.01 * x,
                         dim=1)  # every triplet easy
    dams, lin = build_loss("triplet_dams", RETRIEVAL), build_loss("triplet_linear", RETRIEVAL)
    assert dams.current_margin() == 0.0 and lin.current_margin() == 0.0
    for _ in range(3):
        dams(spread, y)
        lin(x, y)
        dams.on_epoch_end()
        lin.on_epoch_end()
    assert dams.current_margin() == pytest.approx(0.03)
    assert lin.current_margin() == pytest.approx(0.03)
    dams(x, y)  # a random batch: far from 95% easy
    dams.on_epoch_end()
    assert dams.current_margin() == pytest.approx(0.03)
    assert dams.scheduler.history[-1]["easy_share"] < 0.95
