"""benchmarks/heldout_bfh.py: the chance alone that a cell's held-out share in Normal falls below
the 90% floor, from the conformal bound's Beta coverage and the test set's binomial draw."""

from __future__ import annotations

import numpy as np
from benchmark_loader import load_benchmark

heldout_bfh = load_benchmark("heldout_bfh")


def test_the_floor_chance_is_what_the_risk_stages_bound_does_to_exchangeable_people():
    from sphr.risk.calibration import NORMAL_LEVEL, upper_bound

    rng = np.random.default_rng(0)
    n_cal, n_test, reps = 61, 131, 4000
    below = 0
    for _ in range(reps):
        bound = upper_bound(rng.normal(size=n_cal), NORMAL_LEVEL).value
        below += np.mean(rng.normal(size=n_test) <= bound) < heldout_bfh.FLOOR
    chance = heldout_bfh.floor_miss_chance(n_cal, n_test)
    assert abs(below / reps - chance["p_below_floor"]) < 0.015, (below / reps, chance)
    # an exactly-95% bound leaves only the test set's own draw, and a larger calibration set
    # moves the chance towards it
    assert chance["exact"] < chance["p_below_floor"]
    assert (heldout_bfh.floor_miss_chance(1000, n_test)["p_below_floor"]
            < chance["p_below_floor"])
