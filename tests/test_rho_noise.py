"""benchmarks/nhanes_crossfit/rho_noise.py: what chance alone does to the held-out healthy
people's Spearman of a standardized score with age (a permutation null, Holm over cells)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from nhanes_crossfit.rho_noise import BFH, beyond_chance, permutation_null

SEXES = ("female", "male")


def _bfh(n: int, seed: int) -> pd.DataFrame:
    """Per sex, n healthy people: ``aged`` rises with age, ``free_a`` / ``free_b`` do not;
    ``free_b`` lacks a fifth of its values."""
    rng = np.random.default_rng(seed)
    parts = []
    for sex in SEXES:
        age = rng.uniform(40, 70, n)
        free_b = rng.normal(size=n)
        free_b[: n // 5] = np.nan
        parts.append(pd.DataFrame({"sex": sex, "label": BFH, "age": age,
                                   "aged": 0.05 * age + rng.normal(size=n),
                                   "free_a": rng.normal(size=n), "free_b": free_b}))
    return pd.concat(parts, ignore_index=True)


def test_a_score_that_rises_with_age_is_beyond_chance_and_free_ones_are_not():
    null = permutation_null(_bfh(300, 0), ("aged", "free_a", "free_b"), SEXES, 0.10,
                            n_perm=400, seed=1)
    flagged = beyond_chance(null)
    assert {f.split(":")[0] for f in flagged} == {"female aged", "male aged"}
    assert null["cells"][("female", "aged")]["rho"] > 0.3
    assert null["cells"][("female", "free_b")]["n"] == 240  # the missing values left out
    # about 1 / sqrt(n - 1) where the score holds no age
    assert abs(null["cells"][("male", "free_a")]["null_sd"] - 1 / math.sqrt(299)) < 0.01


def test_the_pass_rate_is_the_chance_that_every_cell_falls_within_the_bound():
    frame = _bfh(200, 2)
    free = ("free_a",)
    assert permutation_null(frame, free, SEXES, 1.0, n_perm=200)["pass_rate"] == 1.0
    assert permutation_null(frame, free, SEXES, 0.0, n_perm=200)["pass_rate"] == 0.0
    # two independent cells: P(|rho| <= 0.1) ** 2 with rho ~ N(0, 1 / (n - 1))
    expected = math.erf(0.1 * math.sqrt(199) / math.sqrt(2)) ** 2
    got = permutation_null(frame, free, SEXES, 0.10, n_perm=2000, seed=3)["pass_rate"]
    assert abs(got - expected) < 0.04, (got, expected)


def test_the_same_seed_draws_the_same_null_and_another_seed_another():
    frame = _bfh(100, 4)
    one = permutation_null(frame, ("aged", "free_a"), SEXES, 0.1, n_perm=300, seed=5)
    assert one == permutation_null(frame, ("aged", "free_a"), SEXES, 0.1, n_perm=300, seed=5)
    other = permutation_null(frame, ("aged", "free_a"), SEXES, 0.1, n_perm=300, seed=6)
    assert [c["p"] for c in one["cells"].values()] != [c["p"] for c in other["cells"].values()]
