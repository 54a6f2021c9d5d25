"""The one health distance (sphr.health_distance) against the three definitions it replaced,
bit for bit, and that no other module of the library or the benchmarks computes its own."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from sphr.health_distance import REFERENCES, health_distance, health_reference
from sphr.risk.intervals import LOWER_Q, NORMAL_Q
from sphr.train.tracking import health_distance as tracking_distance

SPHR = Path(__file__).resolve().parents[1] / "sphr"
BENCHMARKS = SPHR.parent / "benchmarks"
GROUPS = np.array(["36-45", "46-55", "56-65"])


@pytest.fixture
def cohort():
    """BFH profiles X (even and odd group sizes: the median's two forms differ there), a
    linear embedding G, and people to measure with their age groups."""
    rng = np.random.default_rng(7)
    X = rng.lognormal(size=(61, 5))
    g_train = GROUPS[rng.integers(0, 3, 61)]
    W, b = rng.normal(size=(5, 3)), rng.normal(size=3)

    def embed(P: np.ndarray) -> np.ndarray:
        return np.asarray(P, np.float64) @ W + b

    people = rng.lognormal(size=(40, 5))
    return X, g_train, embed, people, GROUPS[rng.integers(0, 3, 40)]


# The three old formulas, copied once as the reference (from sphr/risk/distance.py,
# sphr/train/tracking.py and benchmarks/sphr_age.py before they were unified); nothing
# else may compute a health distance, so they live only here.
def old_risk(X, g_train, embed, Z, groups):
    qs = (50.0, *NORMAL_Q, *LOWER_Q)
    refs = {}
    for g in np.unique(g_train):
        profiles = dict(zip(qs, np.percentile(X[g_train == g], qs, axis=0), strict=True))
        refs[g] = embed(profiles[50.0][None, :])[0]
    r = np.stack([np.asarray(refs[g]) for g in groups])
    return np.sqrt(((np.asarray(Z, np.float64) - np.asarray(r, np.float64)) ** 2).sum(axis=1))


def old_tracking(z, reference):
    if len(reference) == 0:
        return np.full(len(z), np.nan)
    return np.linalg.norm(z - np.median(reference, axis=0), axis=1)


def old_sphr_age(Z_train, bfh, g_train, Z, groups):
    d = np.empty(len(Z))
    for g in np.unique(groups):
        centre = np.median(Z_train[bfh & (g_train == g)], 0)
        d[groups == g] = np.linalg.norm(Z[groups == g] - centre, axis=1)
    return d


def test_risk_stage_reference_is_the_embedded_median_profile_per_age_group(cohort):
    X, g_train, embed, people, groups = cohort
    refs = {g: health_reference(X[g_train == g], reference="embedded_median_profile",
                                embed=embed) for g in np.unique(g_train)}
    new = health_distance(embed(people), refs, groups)
    assert np.array_equal(new, old_risk(X, g_train, embed, embed(people), groups))


def test_training_reference_is_the_median_of_the_embedded_bfh_for_the_sex(cohort):
    X, _, embed, people, _ = cohort
    z = embed(people).astype(np.float32)  # the trainer's embeddings are float32
    ref = embed(X).astype(np.float32)
    new = tracking_distance(z, ref)
    assert new.dtype == old_tracking(z, ref).dtype
    assert np.array_equal(new, old_tracking(z, ref))
    assert np.isnan(tracking_distance(z, ref[:0])).all()


def test_benchmark_reference_is_the_median_of_the_embedded_bfh_per_age_group(cohort):
    X, g_train, embed, people, groups = cohort
    Z_train, bfh = embed(X), np.arange(len(X)) % 4 != 0
    refs = {g: health_reference(Z_train[bfh & (g_train == g)], reference="median_of_embedded")
            for g in np.unique(groups)}
    new = health_distance(embed(people), refs, groups)
    assert np.array_equal(new, old_sphr_age(Z_train, bfh, g_train, embed(people), groups))


def test_references_are_named_and_complete():
    with pytest.raises(ValueError):
        health_reference(np.ones((3, 2)), reference="mean")
    with pytest.raises(ValueError):
        health_reference(np.ones((3, 2)), reference="embedded_median_profile")
    with pytest.raises(ValueError):  # references per group without the rows' groups
        health_distance(np.ones((3, 2)), {"a": np.zeros(2)})
    assert REFERENCES == ("embedded_median_profile", "median_of_embedded")
    assert np.isnan(health_reference(np.empty((0, 2)), reference="median_of_embedded")).all()


def _row_distances(tree: ast.AST) -> list[int]:
    """Lines computing a row-wise Euclidean distance to a point: ``linalg.norm(a - b,
    axis=1)`` or ``((a - b) ** 2).sum(axis=1)`` / ``square(a - b).sum(axis=1)`` (numpy's
    spelling; the losses' torch distances between pairs of rows are another quantity)."""
    def is_diff(node: ast.AST) -> bool:
        return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)

    def by_row(call: ast.Call) -> bool:
        return any(k.arg == "axis" and isinstance(k.value, (ast.Constant, ast.UnaryOp))
                   and ast.unparse(k.value) in ("1", "-1") for k in call.keywords)

    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f = node.func
        if f.attr == "norm" and node.args and is_diff(node.args[0]) and by_row(node):
            lines.append(node.lineno)
        elif f.attr == "sum" and by_row(node):
            inner = f.value
            squared = (isinstance(inner, ast.BinOp) and isinstance(inner.op, ast.Pow)
                       and is_diff(inner.left))
            squared |= (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute)
                        and inner.func.attr == "square" and bool(inner.args)
                        and is_diff(inner.args[0]))
            if squared:
                lines.append(node.lineno)
    return lines


def test_no_other_module_computes_a_health_distance_of_its_own():
    offenders = {str(p.relative_to(SPHR.parent)): lines
                 for root in (SPHR, BENCHMARKS) for p in sorted(root.rglob("*.py"))
                 if p != SPHR / "health_distance.py"
                 and (lines := _row_distances(ast.parse(p.read_text())))}
    assert offenders == {}
    # the check sees each old spelling
    for old in ("np.linalg.norm(z - np.median(r, axis=0), axis=1)",
                "np.sqrt(((Z - r) ** 2).sum(axis=1))", "np.sqrt(np.square(z - r).sum(axis=-1))"):
        assert _row_distances(ast.parse(old)), old
