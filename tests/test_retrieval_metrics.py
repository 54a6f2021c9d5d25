"""Retrieval metrics on hand-made rankings with known answers, and
against pytorch-metric-learning."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from sphr.retrieval.metrics import (
    binarize,
    class_averaged,
    knn,
    pair_auc,
    ranking_metrics,
    retrieval_metrics,
    roc_auc,
    sample_auc_pairs,
)


def on_circle(angles_deg: list[float]) -> torch.Tensor:
    """Unit vectors at these angles: cosine similarity to (1, 0) falls
    as the angle grows (< 180)."""
    a = torch.tensor(angles_deg, dtype=torch.float64) * math.pi / 180
    return torch.stack([torch.cos(a), torch.sin(a)], 1)


# One query at angle 0; gallery ranked by angle: 10 (rel), 20, 30 (rel), 40, 50 (rel), 60.
QUERY = on_circle([0.0])
GALLERY = on_circle([50.0, 20.0, 10.0, 60.0, 30.0, 40.0])  # shuffled on purpose
GALLERY_LABELS = np.array([1, 0, 1, 0, 1, 0])  # ranks of the relevant items: 1, 3, 5


def test_average_precision_of_a_known_ranking() -> None:
    r = ranking_metrics(QUERY, np.array([1]), GALLERY, GALLERY_LABELS)
    assert r.ap[0] == pytest.approx((1 / 1 + 2 / 3 + 3 / 5) / 3)
    # mAP@R: R = 3 relevant items, precision counted at relevant ranks <= 3 only, divided by R
    assert r.ap_at_r[0] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert r.first_rank[0] == 1
    assert r.n_relevant[0] == 3


def test_first_match_cmc_counts_only_the_first_relevant_item() -> None:
    # relevant items at ranks 3 and 4: CMC@1 = CMC@2 = 0, CMC@3 = 1 (first match), whatever follows
    labels = np.array([0, 0, 1, 1, 0, 0])
    gallery = on_circle([10.0, 20.0, 30.0, 40.0, 50.0, 60.0])
    r = ranking_metrics(QUERY, np.array([1]), gallery, labels)
    assert r.first_rank[0] == 3
    assert [float(r.cmc(k)[0]) for k in (1, 2, 3, 5)] == [0.0, 0.0, 1.0, 1.0]
    assert r.ap[0] == pytest.approx((1 / 3 + 2 / 4) / 2)
    assert r.ap_at_r[0] == pytest.approx(0.0)  # nothing relevant within the top R = 2


def test_several_queries_and_a_query_without_any_match() -> None:
    queries = on_circle([0.0, 0.0, 0.0])
    labels = np.array([1, 0, 7])  # label 7 is not in the gallery
    r = ranking_metrics(queries, labels, GALLERY, GALLERY_LABELS)
    assert r.ap[0] == pytest.approx((1 + 2 / 3 + 3 / 5) / 3)
    assert r.ap[1] == pytest.approx((1 / 2 + 2 / 4 + 3 / 6) / 3)
    assert math.isnan(r.ap[2]) and math.isnan(r.ap_at_r[2]) and math.isnan(r.cmc(1)[2])
    assert np.nanmean(r.cmc(1)) == pytest.approx(0.5)


def test_chunking_does_not_change_the_answer() -> None:
    gen = torch.Generator().manual_seed(0)
    q, g = torch.randn(37, 8, generator=gen), torch.randn(53, 8, generator=gen)
    ql, gl = np.arange(37) % 5, np.arange(53) % 5
    whole = ranking_metrics(q, ql, g, gl, precision_at=(3,))
    chunked = ranking_metrics(q, ql, g, gl, precision_at=(3,), chunk_size=4)
    np.testing.assert_allclose(whole.ap, chunked.ap)
    np.testing.assert_allclose(whole.precision_at[3], chunked.precision_at[3])
    s1, i1 = knn(q, g, 5)
    s2, i2 = knn(q, g, 5, chunk_size=3)
    assert torch.equal(i1, i2) and torch.allclose(s1, s2)


def test_knn_orders_by_the_chosen_metric_and_can_leave_self_out() -> None:
    pts = torch.tensor([[0.0], [1.0], [3.0], [7.0]])
    _, idx = knn(pts, pts, 2, metric="euclidean", exclude_self=True)
    assert idx.tolist() == [[1, 2], [0, 2], [1, 0], [2, 1]]
    _, idx = knn(pts, pts, 1, metric="euclidean")
    assert idx[:, 0].tolist() == [0, 1, 2, 3]  # with self allowed, each point finds itself


def test_recall_at_k_leave_one_out() -> None:
    # points on a line; labels chosen so the nearest other point is right for 0 and 3 only
    pts = torch.tensor([[0.0], [1.0], [3.0], [3.5], [10.0]], dtype=torch.float64)
    labels = np.array([0, 1, 0, 0, 1])
    r = ranking_metrics(pts, labels, pts, labels, metric="euclidean", exclude_self=True)
    # nearest others: 0->1 (x), 1->0 (x), 2->3 (ok), 3->2 (ok), 4->3 (x)
    assert r.cmc(1).tolist() == [0.0, 0.0, 1.0, 1.0, 0.0]
    # by distance, 0: 1 2 3 4; 1: 0 2 3 4; 4: 3 2 1 0 -> first matches at ranks 2, 4 and 3
    assert r.cmc(2).tolist() == [1.0, 0.0, 1.0, 1.0, 0.0]
    assert r.first_rank.tolist() == [2, 4, 1, 1, 3]
    assert r.cmc(4).tolist() == [1.0] * 5


def test_roc_auc_by_hand_and_against_sklearn() -> None:
    from sklearn.metrics import roc_auc_score

    pos, neg = np.array([0.9, 0.4]), np.array([0.5, 0.1])
    assert roc_auc(pos, neg) == pytest.approx(3 / 4)  # 0.4 < 0.5 is the one wrong order
    assert roc_auc(np.array([0.5]), np.array([0.5])) == pytest.approx(0.5)  # a tie counts one half
    rng = np.random.default_rng(0)
    p, n = rng.normal(1, 1, 40).round(1), rng.normal(0, 1, 30).round(1)  # rounding makes ties
    expected = roc_auc_score(np.r_[np.ones(40), np.zeros(30)], np.r_[p, n])
    assert roc_auc(p, n) == pytest.approx(expected)
    assert math.isnan(roc_auc(np.array([]), n))


def test_auc_pairs_one_positive_and_one_negative_per_class_seeded() -> None:
    labels = np.array([0, 0, 0, 1, 1, 2, 3, 3])  # class 2 has one image: no positive pair
    a, p, n = sample_auc_pairs(labels, seed=3)
    assert len(a) == 3
    assert sorted(labels[a].tolist()) == [0, 1, 3]
    assert (labels[a] == labels[p]).all() and (a != p).all() and (labels[a] != labels[n]).all()
    again = sample_auc_pairs(labels, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip((a, p, n), again, strict=True))


def test_pair_auc_is_one_for_separated_classes_and_half_for_a_constant_embedding() -> None:
    labels = np.repeat(np.arange(4), 3)
    x = torch.eye(4)[labels] + 0.01 * torch.randn(12, 4, generator=torch.Generator().manual_seed(0))
    assert pair_auc(x, labels, seed=0) == 1.0
    assert pair_auc(torch.ones(12, 4), labels, seed=0) == 0.5


def test_precision_at_z_is_averaged_within_classes_then_over_classes() -> None:
    pts = torch.tensor([[0.0], [0.1], [0.2], [5.0], [5.1], [9.0]], dtype=torch.float64)
    labels = np.array([0, 0, 0, 1, 1, 1])
    r = ranking_metrics(pts, labels, pts, labels, metric="euclidean", exclude_self=True,
                        precision_at=(2,))
    # class 0: each of its points has the other two as nearest -> 1, 1, 1
    # class 1: 3 -> (4, 2nd nearest is 0.2 or 9.0? |5-0.2|=4.8 > 4.0 -> 9.0) = 1; 4 -> (3, 5: 9.0 at
    # 3.9) = 1; 5 -> (4, 3) = 1
    assert r.precision_at[2].tolist() == [1.0] * 6
    r3 = ranking_metrics(pts, labels, pts, labels, metric="euclidean", exclude_self=True,
                         precision_at=(3,))
    # z = 3 with only 2 relevant others per point: at most 2/3
    assert r3.precision_at[3].tolist() == pytest.approx([2 / 3] * 6)
    values = np.array([1.0, 1.0, 0.0, 0.5, np.nan])
    assert class_averaged(values, np.array([0, 0, 0, 1, 1])) == pytest.approx((2 / 3 + 0.5) / 2)


def test_sign_binarization_and_hamming_ranking() -> None:
    x = torch.tensor([[0.3, -0.2, 0.0, -5.0]])
    # bits == D: the signs themselves (0 -> +1)
    assert binarize(x, 4).tolist() == [[1.0, -1.0, 1.0, -1.0]]
    codes = binarize(torch.randn(50, 128, generator=torch.Generator().manual_seed(1)), 16, seed=0)
    assert codes.shape == (50, 16) and set(codes.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(
        codes, binarize(torch.randn(50, 128, generator=torch.Generator().manual_seed(1)), 16)
    )
    # 16-bit codes at Hamming distance 1, 3, 5, 7 from the query
    q = torch.ones(1, 16)
    gallery = torch.ones(4, 16)
    for row, flips in enumerate([5, 1, 7, 3]):
        gallery[row, :flips] = -1
    scores, idx = knn(q, gallery, 4, metric="hamming")
    assert idx[0].tolist() == [1, 3, 0, 2]
    assert ((16 - scores[0]) / 2).tolist() == [1.0, 3.0, 5.0, 7.0]
    r = ranking_metrics(q, np.array([0]), gallery, np.array([0, 1, 0, 1]), metric="hamming")
    assert r.ap[0] == pytest.approx((1 / 3 + 2 / 4) / 2)  # rows 0, 2 at ranks 3, 4


def test_hamming_on_64_bit_codes_keeps_near_neighbours() -> None:
    gen = torch.Generator().manual_seed(2)
    centres = torch.randn(5, 128, generator=gen)
    labels = np.repeat(np.arange(5), 6)
    x = centres[labels] + 0.1 * torch.randn(30, 128, generator=gen)
    for bits in (16, 64):
        codes = binarize(torch.nn.functional.normalize(x, dim=1), bits, seed=0)
        r = ranking_metrics(codes, labels, codes, labels, metric="hamming", exclude_self=True)
        assert np.nanmean(r.ap) > 0.95


def pml_calculator(k: object) -> object:
    pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
    from pytorch_metric_learning.utils.inference import CustomKNN

    return AccuracyCalculator(include=("mean_average_precision", "mean_average_precision_at_r",
                                       "precision_at_1"), k=k,
                                       knn_func=CustomKNN(CosineSimilarity()))


def test_against_pytorch_metric_learning_with_a_separate_gallery() -> None:
    gen = torch.Generator().manual_seed(4)
    q, g = torch.randn(40, 16, generator=gen), torch.randn(60, 16, generator=gen)
    ql = np.arange(40) % 6
    gl = np.arange(60) % 6
    ours = ranking_metrics(q, ql, g, gl)
    full = pml_calculator(None).get_accuracy(q, torch.as_tensor(ql), g, torch.as_tensor(gl))
    at_r = pml_calculator("max_bin_count").get_accuracy(q, torch.as_tensor(ql), g,
                                                        torch.as_tensor(gl))
    assert np.mean(ours.ap) == pytest.approx(full["mean_average_precision"], abs=1e-5)
    assert np.mean(ours.ap_at_r) == pytest.approx(at_r["mean_average_precision_at_r"], abs=1e-5)
    assert np.mean(ours.cmc(1)) == pytest.approx(full["precision_at_1"], abs=1e-6)


def test_against_pytorch_metric_learning_leave_one_out() -> None:
    gen = torch.Generator().manual_seed(5)
    labels = np.repeat(np.arange(5), 7)
    x = torch.eye(5).repeat_interleave(7, 0) + 0.8 * torch.randn(35, 5, generator=gen)
    ours = ranking_metrics(x, labels, x, labels, exclude_self=True)
    pml = pml_calculator("max_bin_count").get_accuracy(x, torch.as_tensor(labels))
    assert np.mean(ours.ap_at_r) == pytest.approx(pml["mean_average_precision_at_r"], abs=1e-5)
    assert np.mean(ours.cmc(1)) == pytest.approx(pml["precision_at_1"], abs=1e-6)  # = Recall@1
    full = pml_calculator(None).get_accuracy(x, torch.as_tensor(labels))
    assert np.mean(ours.ap) == pytest.approx(full["mean_average_precision"], abs=1e-5)


def test_retrieval_metrics_use_baselines_as_gallery_and_follow_ups_as_queries() -> None:
    # 3 subjects; baseline and two follow-ups each; subject 2's year-2 image looks like subject 0
    base = torch.eye(3)
    emb = torch.cat([base, base + 0.05, base + 0.1])
    labels = np.tile(np.arange(3), 3)
    years = np.repeat([0.0, 1.0, 2.0], 3)
    # subject 2 at year 2: nearest baseline is subject 0's, then its own
    emb[8] = torch.tensor([1.0, 0.0, 0.3])
    ev = retrieval_metrics(emb, labels, years, cmc_ks=(1, 2), recall_ks=(1,), p_at_z=(2,),
                           hamming_bits=(3,), n_examples=2, example_k=2)
    m = ev.metrics
    assert m["n_queries"] == 6 and m["n_queries_without_match"] == 0
    # 5 of 6 follow-ups find their own baseline first; the bad one finds it second (AP 1/2)
    assert m["CMC@1"] == pytest.approx(5 / 6)
    assert m["CMC@2"] == pytest.approx(1.0)
    assert m["mAP"] == pytest.approx((5 + 0.5) / 6)
    per_year = ev.per_year.set_index(["year", "metric"])["value"]
    assert per_year[(1.0, "CMC@1")] == 1.0 and per_year[(2.0, "CMC@1")] == pytest.approx(2 / 3)
    for key in ("R@1", "AUC", "P@2", "mAP_H3", "P@2_H3"):
        assert key in m
    # example strips: queries are follow-ups, results are baseline images
    assert set(years[ev.examples["queries"]]) <= {1.0, 2.0}
    assert (years[ev.examples["results"]] == 0).all()


def test_retrieval_metrics_without_visits_are_leave_one_out() -> None:
    labels = np.repeat(np.arange(3), 4)
    noise = 0.01 * torch.randn(12, 3, generator=torch.Generator().manual_seed(0))
    emb = torch.eye(3)[labels] + noise
    ev = retrieval_metrics(emb, labels, np.full(12, np.nan), hamming_bits=(16,), p_at_z=(3,))
    m = ev.metrics
    assert m["n_queries"] == 12
    assert m["mAP"] == pytest.approx(1.0) and m["CMC@1"] == 1.0 and m["R@1"] == 1.0
    assert m["P@3"] == pytest.approx(1.0)
    assert ev.per_year.empty
    for q, res in zip(ev.examples["queries"], ev.examples["results"], strict=True):
        assert q not in res  # leave-one-out: a query is never its own result
