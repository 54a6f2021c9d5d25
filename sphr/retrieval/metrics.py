"""Retrieval metrics, vectorized in torch: similarity by matmul, ranking by sort / topk, in
query chunks.

Definitions (per query q with relevant set R_q in the gallery, ranks from 1):

* **mAP**: mean over queries of AP = (1/|R_q|) sum_{r in R_q} precision@rank(r), over the
  full ranking.
* **mAP@R** (Musgrave et al. 2020): AP truncated at R = |R_q| and divided by R.
* **CMC@k** (first match): share of queries whose first relevant item is within the top k.
  This is the standard CMC; the AdaTriplet authors' open-reid style CMC gives split
  credit when a query has several true matches, so their numbers are not this.
* **R@k** (Recall@k, leave-one-out, DAMS paper): each test image queries all other
  test images; 1 when one of its k nearest shares its class. Equals CMC@k leave-one-out.
* **AUC**: ROC AUC of similarity on one positive and one negative pair per class
  (same anchor), drawn with a seeded generator (DAMS paper, Sec. IV-B).
* **P@Z** (OCAM paper, Eq. 15): precision among the Z nearest, leave-one-out,
  averaged within each class and then over classes.
* Hamming: embeddings are sign-binarized into S-bit +-1 codes; Hamming distance =
  (S - code_q . code_g) / 2, so ranking is a matmul too. OCAM's codes are the
  signs of a trained S-output layer (Eq. 2); the training loop trains such
  heads (``mAP_H<S>``). The "projected codes" (``mAP_H<S>_proj``) are the signs
  of a seeded Gaussian projection of the D-d embedding (SimHash, which
  preserves angles); with S = D, the signs of the embedding itself.

Queries without any relevant gallery item are left out of mAP / mAP@R / CMC
and counted in ``n_queries_without_match``. Ties are broken by gallery order
(stable sort), which matters for Hamming distances.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from sphr.errors import ConfigError

METRICS: tuple[str, ...] = ("cosine", "euclidean", "hamming")
#: elements of a (chunk x gallery) score block; about 64 MB of float32
_BLOCK = 1 << 24


def _scores(q: torch.Tensor, g: torch.Tensor, metric: str,
            g_sq: torch.Tensor | None) -> torch.Tensor:
    """Higher is better: cosine similarity, minus squared distance, or bits
    agreeing minus disagreeing."""
    if metric == "euclidean":
        return 2.0 * (q @ g.T) - (q * q).sum(1, keepdim=True) - g_sq[None, :]  # type: ignore[index]
    return q @ g.T


def _prepare(x: torch.Tensor, metric: str) -> torch.Tensor:
    if metric not in METRICS:
        raise ConfigError(f"unknown retrieval metric {metric!r}: use one of {', '.join(METRICS)}")
    x = x.float()
    return F.normalize(x, dim=1) if metric == "cosine" else x


def _chunks(n_query: int, n_gallery: int, chunk_size: int | None) -> Iterator[slice]:
    size = chunk_size or max(1, _BLOCK // max(n_gallery, 1))
    for start in range(0, n_query, size):
        yield slice(start, min(start + size, n_query))


def knn(query: torch.Tensor, gallery: torch.Tensor, k: int, *, metric: str = "cosine",
        exclude_self: bool = False,
        chunk_size: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k gallery items per query: ``(scores, indices)``, each ``(Q, k)``, best first.

    Scores are higher-is-better (see :func:`_scores`); for ``hamming`` pass
    +-1 codes and the distance is ``(S - score) / 2``. ``exclude_self`` drops
    gallery item i for query i (leave-one-out when query is gallery).
    """
    q, g = _prepare(query, metric), _prepare(gallery, metric).to(query.device)
    k = min(k, len(g) - int(exclude_self))
    g_sq = (g * g).sum(1) if metric == "euclidean" else None
    out_s, out_i = [], []
    for sl in _chunks(len(q), len(g), chunk_size):
        s = _scores(q[sl], g, metric, g_sq)
        if exclude_self:
            rows = torch.arange(sl.start, sl.stop, device=s.device)
            s[rows - sl.start, rows] = -math.inf
        top = torch.topk(s, k, dim=1)
        out_s.append(top.values)
        out_i.append(top.indices)
    return torch.cat(out_s), torch.cat(out_i)


def binarize(embeddings: torch.Tensor, bits: int, *, seed: int = 0) -> torch.Tensor:
    """+-1 codes of ``bits`` bits (float): sign of the embedding (bits == D)
    or of a seeded projection."""
    d = embeddings.shape[1]
    x = embeddings.float()
    if bits != d:
        gen = torch.Generator().manual_seed(seed)
        proj = torch.randn(d, bits, generator=gen).to(x.device)
        x = x @ proj
    return torch.where(x >= 0, 1.0, -1.0)


@dataclass
class RankingMetrics:
    """Per-query values (NaN where the query has no relevant item) and their means."""

    ap: np.ndarray
    ap_at_r: np.ndarray
    first_rank: np.ndarray  # rank of the first relevant item (inf when none)
    precision_at: dict[int, np.ndarray] = field(default_factory=dict)
    n_relevant: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def cmc(self, k: int) -> np.ndarray:
        out = (self.first_rank <= k).astype(float)
        out[self.n_relevant == 0] = np.nan
        return out


def ranking_metrics(query: torch.Tensor, query_labels: torch.Tensor | np.ndarray,
                    gallery: torch.Tensor, gallery_labels: torch.Tensor | np.ndarray, *,
                    metric: str = "cosine", exclude_self: bool = False,
                    precision_at: Sequence[int] = (),
                    chunk_size: int | None = None) -> RankingMetrics:
    """Rank the whole gallery for every query and compute AP, AP@R, first-match rank, P@Z."""
    q, g = _prepare(query, metric), _prepare(gallery, metric).to(query.device)
    dev = q.device
    ql = torch.as_tensor(np.asarray(query_labels), device=dev)
    gl = torch.as_tensor(np.asarray(gallery_labels), device=dev)
    g_sq = (g * g).sum(1) if metric == "euclidean" else None
    n_g = len(g)
    ranks = torch.arange(1, n_g + 1, device=dev, dtype=torch.float64)
    ap, ap_r, first, n_rel = [], [], [], []
    prec: dict[int, list[torch.Tensor]] = {z: [] for z in precision_at}
    for sl in _chunks(len(q), n_g, chunk_size):
        s = _scores(q[sl], g, metric, g_sq)
        rel_full = ql[sl, None] == gl[None, :]
        if exclude_self:
            rows = torch.arange(sl.start, sl.stop, device=dev)
            s[rows - sl.start, rows] = -math.inf
            rel_full[rows - sl.start, rows] = False
        order = torch.sort(s, dim=1, descending=True, stable=True).indices
        if exclude_self:
            order = order[:, :-1]  # self sits last (score -inf)
        rel = torch.gather(rel_full, 1, order).double()
        n = rel.sum(1)
        hits = torch.cumsum(rel, 1)
        prec_at_rank = hits / ranks[: rel.shape[1]]
        ap.append((prec_at_rank * rel).sum(1) / n.clamp(min=1))
        within_r = ranks[None, : rel.shape[1]] <= n[:, None]
        ap_r.append((prec_at_rank * rel * within_r).sum(1) / n.clamp(min=1))
        any_rel = n > 0
        first_idx = torch.argmax(rel, dim=1).double() + 1
        first.append(torch.where(any_rel, first_idx, torch.full_like(first_idx, math.inf)))
        n_rel.append(n)
        for z in precision_at:
            prec[z].append(rel[:, :z].sum(1) / z)
    n_rel_np = torch.cat(n_rel).cpu().numpy()
    none = n_rel_np == 0

    def cat(parts: list[torch.Tensor]) -> np.ndarray:
        out = torch.cat(parts).cpu().numpy().astype(float)
        out[none] = np.nan
        return out

    return RankingMetrics(ap=cat(ap), ap_at_r=cat(ap_r), first_rank=torch.cat(first).cpu().numpy(),
                          precision_at={z: cat(v) for z, v in prec.items()}, n_relevant=n_rel_np)


def class_averaged(values: np.ndarray, labels: np.ndarray) -> float:
    """Average within each class, then over classes (OCAM's P@Z, Eq. 15); NaNs skipped."""
    labels = np.asarray(labels)
    means = [np.nanmean(values[labels == k]) for k in np.unique(labels)
             if np.isfinite(values[labels == k]).any()]
    return float(np.mean(means)) if means else math.nan


def roc_auc(pos_scores: np.ndarray, neg_scores: np.ndarray) -> float:
    """P(score_pos > score_neg) + 0.5 P(tie): the ROC AUC (Mann-Whitney), exact."""
    from sphr.stats import auroc

    pos, neg = np.asarray(pos_scores, float).ravel(), np.asarray(neg_scores, float).ravel()
    return auroc(np.r_[np.ones(pos.size, bool), np.zeros(neg.size, bool)], np.r_[pos, neg])


def sample_auc_pairs(labels: np.ndarray,
                     seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One (anchor, positive, negative) per class with >= 2 members, seeded
    (DAMS paper's AUC pairs)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    a, p, n = [], [], []
    for k in np.unique(labels):
        members = np.flatnonzero(labels == k)
        others = np.flatnonzero(labels != k)
        if len(members) < 2 or len(others) == 0:
            continue
        anchor, positive = rng.choice(members, size=2, replace=False)
        a.append(anchor)
        p.append(positive)
        n.append(rng.choice(others))
    return (np.asarray(a, dtype=np.int64), np.asarray(p, dtype=np.int64),
            np.asarray(n, dtype=np.int64))


def pair_auc(embeddings: torch.Tensor, labels: np.ndarray, *, seed: int = 0) -> float:
    """AUC-ROC of cosine similarity on the seeded positive / negative pairs."""
    a, p, n = sample_auc_pairs(labels, seed)
    if len(a) == 0:
        return math.nan
    x = F.normalize(embeddings.float(), dim=1)
    ia, ip, ineg = (torch.as_tensor(v, device=x.device) for v in (a, p, n))
    pos = (x[ia] * x[ip]).sum(1).cpu().numpy()
    neg = (x[ia] * x[ineg]).sum(1).cpu().numpy()
    return roc_auc(pos, neg)


@dataclass
class Evaluation:
    metrics: dict[str, float]
    #: per follow-up year (gallery protocol only): year, metric, value, n_queries
    per_year: pd.DataFrame
    #: top-k gallery indices of the first queries (for query / result strips)
    examples: dict[str, np.ndarray] = field(default_factory=dict)


def protocol_indices(years: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """(query rows, gallery rows, leave-one-out): follow-ups against baselines when the split has
    visits, else every image against all others."""
    years = np.asarray(years, dtype=float)
    visits = bool(np.isfinite(years).any()) and bool((years == 0).any()) and bool((years > 0).any())
    if visits:
        return np.flatnonzero(years > 0), np.flatnonzero(years == 0), False
    idx = np.arange(len(years))
    return idx, idx, True


def map_score(embeddings: torch.Tensor, labels: np.ndarray, years: np.ndarray) -> float:
    """mAP under the evaluation protocol of :func:`retrieval_metrics` (for best-epoch selection)."""
    labels = np.asarray(labels)
    x = F.normalize(embeddings.float(), dim=1)
    q_idx, g_idx, loo = protocol_indices(years)
    qi, gi = torch.as_tensor(q_idx, device=x.device), torch.as_tensor(g_idx, device=x.device)
    r = ranking_metrics(x[qi], labels[q_idx], x[gi], labels[g_idx], metric="cosine",
                        exclude_self=loo)
    return float(np.nanmean(r.ap)) if np.isfinite(r.ap).any() else math.nan


def _summary(r: RankingMetrics, cmc_ks: Sequence[int]) -> dict[str, float]:
    out = {"mAP": float(np.nanmean(r.ap)), "mAP@R": float(np.nanmean(r.ap_at_r))}
    for k in cmc_ks:
        out[f"CMC@{k}"] = float(np.nanmean(r.cmc(k)))
    return out


def _example_queries(q_idx: np.ndarray, labels: np.ndarray, years: np.ndarray, n: int,
                     seed: int) -> np.ndarray:
    """A few queries for the strips: distinct subjects / classes, spread over follow-up years."""
    order = np.random.default_rng(seed).permutation(q_idx)
    year_cycle = sorted(np.unique(years[q_idx][np.isfinite(years[q_idx])]))
    chosen: list[int] = []
    seen: set[int] = set()
    for i in range(n):
        want = year_cycle[i % len(year_cycle)] if year_cycle else None
        pick = next(
            (q for q in order if labels[q] not in seen and (want is None or years[q] == want)),
            next((q for q in order if labels[q] not in seen), None),
        )
        if pick is None:
            break
        chosen.append(int(pick))
        seen.add(int(labels[pick]))
    return np.asarray(chosen, dtype=np.int64)


def retrieval_metrics(embeddings: torch.Tensor, labels: np.ndarray, years: np.ndarray, *,
                      seed: int = 0, cmc_ks: Sequence[int] = (1, 5, 10),
                      recall_ks: Sequence[int] = (1, 2, 4, 8), p_at_z: Sequence[int] = (10,),
                      hamming_bits: Sequence[int] = (16, 64), n_examples: int = 4,
                      example_k: int = 5,
                      codes: dict[int, torch.Tensor] | None = None) -> Evaluation:
    """All metrics of one trained model on its test split.

    With visits (years with 0 and > 0): gallery = baseline images, queries =
    follow-ups, for mAP, mAP@R and CMC (also per year). Without: those are
    leave-one-out over the test split. R@k, AUC and P@Z are always
    leave-one-out over all test images (the DAMS and OCAM protocols).

    Hamming: ``codes`` maps S to the S-d output of a trained code head (its
    sign is the code; OCAM Eq. 2) -> ``mAP_H<S>``, ``P@Z_H<S>``. Every S in
    ``hamming_bits`` also gets the seeded projection of the D-d embedding
    (SimHash) -> ``mAP_H<S>_proj``, ``P@Z_H<S>_proj``. Without a trained head
    for S there is no ``mAP_H<S>`` (the two kinds of code are not mixed),
    unless S = D: then the embedding's own signs are the S-bit code.
    """
    labels = np.asarray(labels)
    years = np.asarray(years, dtype=float)
    x = F.normalize(embeddings.float(), dim=1)
    q_idx, g_idx, loo = protocol_indices(years)
    visits = not loo

    def protocol(emb: torch.Tensor, metric: str, extra_p: Sequence[int] = ()) -> RankingMetrics:
        qi = torch.as_tensor(q_idx, device=emb.device)
        gi = torch.as_tensor(g_idx, device=emb.device)
        return ranking_metrics(emb[qi], labels[q_idx], emb[gi], labels[g_idx], metric=metric,
                               exclude_self=loo, precision_at=extra_p)

    main = protocol(x, "cosine")
    metrics = _summary(main, cmc_ks)
    metrics["n_queries"] = float(len(q_idx))
    metrics["n_queries_without_match"] = float((main.n_relevant == 0).sum())
    all_loo = ranking_metrics(x, labels, x, labels, metric="cosine", exclude_self=True,
                              precision_at=p_at_z)
    for k in recall_ks:
        metrics[f"R@{k}"] = float(np.nanmean(all_loo.cmc(k)))
    metrics["AUC"] = pair_auc(x, labels, seed=seed)
    for z in p_at_z:
        metrics[f"P@{z}"] = class_averaged(all_loo.precision_at[z], labels)
    def hamming(c: torch.Tensor, suffix: str) -> None:
        h = protocol(c, "hamming")
        metrics[f"mAP_H{c.shape[1]}{suffix}"] = float(np.nanmean(h.ap))
        h_loo = ranking_metrics(c, labels, c, labels, metric="hamming", exclude_self=True,
                                precision_at=p_at_z)
        for z in p_at_z:
            metrics[f"P@{z}_H{c.shape[1]}{suffix}"] = class_averaged(h_loo.precision_at[z], labels)

    trained = codes or {}
    for bits in hamming_bits:
        hamming(binarize(x, bits, seed=seed), "_proj")
        if bits in trained:
            hamming(binarize(trained[bits].to(x.device), trained[bits].shape[1]), "")
        elif bits == x.shape[1]:  # S = D: the embedding's own signs are the code (OCAM Eq. 2)
            hamming(binarize(x, bits), "")
    rows = []
    if visits:
        q_years = years[q_idx]
        for y in np.unique(q_years):
            sel = q_years == y
            part = RankingMetrics(main.ap[sel], main.ap_at_r[sel], main.first_rank[sel],
                                  n_relevant=main.n_relevant[sel])
            for name, value in _summary(part, cmc_ks).items():
                rows.append({"year": float(y), "metric": name, "value": value,
                             "n_queries": int(sel.sum())})
    per_year = pd.DataFrame(rows, columns=["year", "metric", "value", "n_queries"])
    ex_q = _example_queries(q_idx, labels, years, n_examples, seed)
    qi, gi = torch.as_tensor(ex_q, device=x.device), torch.as_tensor(g_idx, device=x.device)
    if loo:
        s = x[qi] @ x.T
        s[torch.arange(len(qi), device=x.device), qi] = -math.inf  # not the query itself
        top_idx = torch.topk(s, min(example_k, len(labels) - 1), dim=1).indices.cpu().numpy()
    else:
        _, top = knn(x[qi], x[gi], example_k)
        top_idx = g_idx[top.cpu().numpy()]
    return Evaluation(metrics, per_year, {"queries": ex_q, "results": top_idx})
