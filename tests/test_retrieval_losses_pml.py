"""The retrieval losses as pytorch-metric-learning losses: the same numbers as before the rewrite.

``_reference_*`` below is the pre-PML implementation's arithmetic (the
``torch.nn.Module`` losses that normalized, built a Gram matrix and reduced by
hand), kept here to pin the rewrite: every loss, every option, values and
gradients bit-identical on CPU, float32 and float64. Then: the ``distance``
object is really used, miners and PML interoperate, and the retrieval NPLB is
the tabular NPLB's formula.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import distances, losses, miners, reducers

from sphr.losses import NPLB
from sphr.losses.registry import RETRIEVAL, build_loss
from sphr.retrieval.losses import (
    LOSSES,
    AdaTripletLoss,
    ContrastiveLoss,
    EuclideanDistance,
    NPLBLoss,
    OCAMLoss,
    OCAMMiner,
    TripletLoss,
    TripletMiner,
    all_pair_indices,
    all_triplet_indices,
    ocam_violation,
    pairwise_euclidean,
    pairwise_similarity,
    select_triplets,
    triplet_negative_pairs,
)

# --- the pre-PML arithmetic ------------------------------------------------------------------


def _reduce(losses: torch.Tensor, reduction: str, anchor: torch.Tensor) -> torch.Tensor:
    if losses.numel() == 0:
        return anchor.sum() * 0.0
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    pos = losses > 0
    if not bool(pos.any()):
        return losses.sum() * 0.0
    return losses[pos].sum() / pos.sum()


def _delta(x: torch.Tensor, a, p, n, geometry: str, swap: bool = False) -> torch.Tensor:
    if geometry == "cosine":
        s = pairwise_similarity(x)
        an = torch.maximum(s[a, n], s[p, n]) if swap else s[a, n]
        return s[a, p] - an
    d = pairwise_euclidean(x)
    an = torch.minimum(d[a, n], d[p, n]) if swap else d[a, n]
    return an - d[a, p]


def _reference_triplet(e, y, margin, geometry, swap, selection, reduction):
    x = F.normalize(e, dim=1)
    a, p, n = all_triplet_indices(y)
    delta_all = _delta(x, a, p, n, geometry, swap)
    delta = delta_all[select_triplets(delta_all.detach(), margin, selection)]
    return _reduce(F.relu(margin - delta), reduction, x)


def _reference_adatriplet(e, y, eps, beta, lam, selection, reduction):
    x = F.normalize(e, dim=1)
    s = pairwise_similarity(x)
    a, p, n = all_triplet_indices(y)
    delta_all = s[a, p] - s[a, n]
    i, j = triplet_negative_pairs(y)
    phi_neg = s[i, j]
    delta = delta_all[select_triplets(delta_all.detach(), eps, selection)]
    triplet_term = _reduce(F.relu(eps - delta), reduction, x)
    hard = phi_neg.detach() >= beta
    pair_term = (phi_neg[hard] - beta).mean() if bool(hard.any()) else x.sum() * 0.0
    return triplet_term + lam * pair_term


def _reference_ocam(e, y, selection, reduction):
    x = F.normalize(e, dim=1)
    s = pairwise_similarity(x)
    a, p, n = all_triplet_indices(y)
    raw = ocam_violation(s[a, p], s[a, n], s[p, n])
    if selection != "all":
        raw = raw[select_triplets(-raw.detach(), 0.0, selection)]
    return _reduce(F.relu(raw), reduction, x)


def _reference_nplb(e, y, margin, power, selection, reduction):
    x = F.normalize(e, dim=1)
    d = pairwise_euclidean(x)
    a, p, n = all_triplet_indices(y)
    if selection != "all":
        keep = select_triplets((d[a, n] - d[a, p]).detach(), margin, selection)
        a, p, n = a[keep], p[keep], n[keep]
    d_ap, d_an, d_pn = d[a, p], d[a, n], d[p, n]
    losses = F.relu(d_ap - d_an + margin) + (d_pn - d_an) ** power
    return _reduce(losses, reduction, x)


def _reference_contrastive(e, y, pos_margin, neg_margin, reduction):
    x = F.normalize(e, dim=1)
    d = pairwise_euclidean(x)
    pi, pj, ni, nj = all_pair_indices(y)
    return (_reduce(F.relu(d[pi, pj] - pos_margin), reduction, x)
            + _reduce(F.relu(neg_margin - d[ni, nj]), reduction, x))


# --- cases ----------------------------------------------------------------------------------

SELECTIONS = ("all", "semihard", "hard", "violating", "easy")
REDUCTIONS = ("mean", "nonzero", "sum")

CASES: list[tuple[str, object, object]] = []
for _sel in SELECTIONS:
    for _red in REDUCTIONS:
        for _geo, _swap in (("cosine", False), ("cosine", True), ("euclidean", False),
                            ("euclidean", True)):
            CASES.append((
                f"triplet-{_geo}-swap{_swap}-{_sel}-{_red}",
                lambda g=_geo, s=_swap, se=_sel, r=_red: TripletLoss(
                    0.2, geometry=g, swap=s, selection=se, reduction=r),
                lambda e, y, g=_geo, s=_swap, se=_sel, r=_red: _reference_triplet(
                    e, y, 0.2, g, s, se, r)))
        CASES.append((
            f"adatriplet-{_sel}-{_red}",
            lambda se=_sel, r=_red: AdaTripletLoss(0.25, 0.05, 0.7, selection=se, reduction=r),
            lambda e, y, se=_sel, r=_red: _reference_adatriplet(e, y, 0.25, 0.05, 0.7, se, r)))
        CASES.append((f"ocam-{_sel}-{_red}",
                      lambda se=_sel, r=_red: OCAMLoss(selection=se, reduction=r),
                      lambda e, y, se=_sel, r=_red: _reference_ocam(e, y, se, r)))
        for _pow in (2, 4):
            CASES.append((
                f"nplb-p{_pow}-{_sel}-{_red}",
                lambda pw=_pow, se=_sel, r=_red: NPLBLoss(0.3, pw, selection=se, reduction=r),
                lambda e, y, pw=_pow, se=_sel, r=_red: _reference_nplb(e, y, 0.3, pw, se, r)))
for _red in REDUCTIONS:
    CASES.append((f"contrastive-{_red}", lambda r=_red: ContrastiveLoss(0.1, 0.9, reduction=r),
                  lambda e, y, r=_red: _reference_contrastive(e, y, 0.1, 0.9, r)))


def _batches(dtype: torch.dtype):
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        k, m = 3 + seed % 2, 3
        e = torch.randn(k * m, 8, generator=g, dtype=dtype) * (0.5 + seed)
        if seed == 3:
            e[1] = e[0]  # two coinciding embeddings: the clamp keeps gradients finite
        y = torch.arange(k).repeat_interleave(m)[torch.randperm(k * m, generator=g)]
        yield e, y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(("name", "make", "reference"), CASES, ids=[c[0] for c in CASES])
def test_pml_losses_are_bit_identical_to_the_previous_implementation(name, make, reference,
                                                                      dtype) -> None:
    loss = make()
    for e, y in _batches(dtype):
        e1, e2 = e.clone().requires_grad_(), e.clone().requires_grad_()
        ours, theirs = loss(e1, y), reference(e2, y)
        ours.backward()
        theirs.backward()
        assert torch.equal(ours.detach(), theirs.detach()), (float(ours), float(theirs))
        assert torch.equal(e1.grad, e2.grad)


@pytest.mark.parametrize("name", list(LOSSES))
def test_registry_losses_with_schedulers_match_the_previous_arithmetic(name: str) -> None:
    """Over three epochs the scheduled margin moves; each batch equals the
    reference at the margin in force."""
    loss = build_loss(name, RETRIEVAL)
    loss.set_budget(3, 2, scale=True)
    for epoch in range(3):
        for e, y in list(_batches(torch.float64))[:2]:
            e = e * (1 + epoch)
            value = loss(e, y)
            o = LOSSES[name].defaults
            m = loss.last_batch.get("margin")
            if isinstance(loss, AdaTripletLoss):
                expected = _reference_adatriplet(e, y, m, loss.last_batch["beta"], o["lam"],
                                                 o["selection"], o["reduction"])
            elif isinstance(loss, TripletLoss):
                geometry = "cosine" if loss.distance.is_inverted else "euclidean"
                expected = _reference_triplet(e, y, m, geometry, loss.swap, o["selection"],
                                              o["reduction"])
            elif isinstance(loss, NPLBLoss):
                expected = _reference_nplb(e, y, m, o["p"], o["selection"], o["reduction"])
            elif isinstance(loss, OCAMLoss):
                expected = _reference_ocam(e, y, o["selection"], o["reduction"])
            else:
                expected = _reference_contrastive(e, y, o["pos_margin"], o["neg_margin"],
                                                  o["reduction"])
            assert torch.equal(value, expected), (name, epoch)
        loss.on_epoch_end()


def test_every_loss_is_a_pml_loss_with_distance_and_reducer_objects() -> None:
    for name in LOSSES:
        loss = build_loss(name, RETRIEVAL)
        assert isinstance(loss, losses.BaseMetricLossFunction)
        assert isinstance(loss.distance, distances.BaseDistance)
        assert isinstance(loss.reducer, reducers.BaseReducer)


def _pair_of_distances():
    return distances.CosineSimilarity(), distances.LpDistance(normalize_embeddings=True)


@pytest.mark.parametrize("make", [
    lambda d: TripletLoss(0.2, distance=d, reducer=reducers.MeanReducer()),
    lambda d: TripletLoss(0.2, distance=d, swap=True, selection="violating"),
    lambda d: AdaTripletLoss(0.25, 0.0, distance=d, selection="all"),
    lambda d: OCAMLoss(distance=d),
    lambda d: NPLBLoss(0.3, distance=d),
    lambda d: ContrastiveLoss(distance=d),
], ids=["triplet", "triplet-swap-mined", "adatriplet", "ocam", "nplb", "contrastive"])
def test_the_distance_object_is_used(make) -> None:
    e, y = next(_batches(torch.float64))
    cos, lp = _pair_of_distances()
    a, b = float(make(cos)(e, y)), float(make(lp)(e, y))
    assert abs(a - b) > 1e-3, (a, b)


def test_the_reducer_object_is_used() -> None:
    e, y = next(_batches(torch.float64))
    mean = float(NPLBLoss(reducer=reducers.MeanReducer())(e, y))
    total = float(NPLBLoss(reducer=reducers.SumReducer())(e, y))
    assert total == pytest.approx(mean * len(all_triplet_indices(y)[0]))


def test_euclidean_distance_is_pml_lp_distance_with_a_clamp() -> None:
    e, _ = next(_batches(torch.float64))
    ours = EuclideanDistance()(e)
    theirs = distances.LpDistance(normalize_embeddings=True)(e)
    assert torch.allclose(ours, theirs, atol=1e-6)
    raw = EuclideanDistance(normalize_embeddings=False)
    assert torch.allclose(raw(e), torch.cdist(e, e), atol=1e-6)
    assert torch.allclose(raw(e, e[:3]), torch.cdist(e, e[:3]), atol=1e-6)


def test_losses_and_miners_interoperate_with_pml() -> None:
    e, y = next(_batches(torch.float32))
    # a PML miner's triplets into our loss, our miner's triplets into PML's loss
    pml_miner = miners.TripletMarginMiner(0.2, type_of_triplets="semihard",
                                          distance=distances.CosineSimilarity())
    ours = TripletLoss(0.2, reducer=reducers.MeanReducer())
    idx = pml_miner(e, y)
    assert torch.allclose(
        ours(e, y, idx),
        losses.TripletMarginLoss(
            0.2, distance=distances.CosineSimilarity(), reducer=reducers.MeanReducer()
        )(e, y, idx),
    )
    mined = TripletMiner("semihard", 0.2)(e, y)
    assert {tuple(t) for t in torch.stack(mined, 1).tolist()} == {
        tuple(t) for t in torch.stack(idx, 1).tolist()
    }
    # a loss built with selection= mines with a TripletMiner at the margin in force
    loss = TripletLoss(0.2, selection="semihard", reducer=reducers.MeanReducer())
    assert isinstance(loss.miner, TripletMiner) and torch.equal(loss(e, y), ours(e, y, mined))
    assert isinstance(OCAMLoss(selection="hard").miner, OCAMMiner) and OCAMLoss().miner is None


def test_retrieval_nplb_is_the_tabular_nplb_formula() -> None:
    """On raw Euclidean distances and the same triplets the two stacks give the same NPLB (the
    tabular distance adds 1e-6 to differences, hence the tolerance); only their default margins
    differ."""
    g = torch.Generator().manual_seed(5)
    a, p, n = (torch.randn(16, 8, generator=g, dtype=torch.float64) for _ in range(3))
    idx = torch.arange(16)
    retrieval = NPLBLoss(1.0, distance=EuclideanDistance(normalize_embeddings=False))
    value = retrieval(torch.cat([a, p, n]), torch.cat([idx, idx, idx + 16]),
                      (idx, idx + 16, idx + 32))
    assert float(value) == pytest.approx(float(NPLB(margin=1.0)(a, p, n)), rel=1e-5)
    assert NPLBLoss().margin == 0.3 and NPLB().margin == 1.0
