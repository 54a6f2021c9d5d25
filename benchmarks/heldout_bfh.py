"""How far from 95% the held-out healthy people's share in Normal falls by chance alone.

The calibrated bound is the split-conformal bound of the calibration BFH's standardized scores
(docs/METHODS.md, "Calibrated risk groups"); the held-out (test) BFH's share at or below it is
what the report shows against the 95% target. Both sets are out of sample for every fit, so
under exchangeability the share's spread comes from the two sets' sizes alone. This benchmark
pools the two sets of a run's risk stage per sex and score, re-draws the calibration / test
split ``--draws`` times with the run's sizes (seeded), recomputes the conformal bound from each
drawn calibration set and the share of the drawn test set at or below it, and reports where
the observed share falls in that distribution.

    python benchmarks/heldout_bfh.py runs/demo [--draws 2000] [--seed 0]

Last line: one JSON object: per sex and method, ``n_calibration``, ``n_test``, ``observed``,
the 5th / 50th percentile of the re-drawn shares and ``p_at_most_observed`` (the share of draws
at or below the observed share); ``floor``: per cell the chance alone of a share below 90%
(:func:`floor_miss_chance`) and the chance that every cell clears it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def redrawn_shares(cal: np.ndarray, test: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """Shares of re-drawn test sets at or below the conformal 95% bound of re-drawn
    calibration sets of the same sizes, from the pooled scores."""
    from sphr.risk.calibration import NORMAL_LEVEL, upper_bound

    pooled = np.concatenate([cal, test])
    rng = np.random.default_rng(seed)
    shares = np.empty(draws)
    for b in range(draws):
        order = rng.permutation(pooled.size)
        c, t = pooled[order[:cal.size]], pooled[order[cal.size:]]
        shares[b] = np.mean(t <= upper_bound(c, NORMAL_LEVEL).value)  # the risk stage's bound
    return shares


#: the floor a cell's held-out share in Normal is held to (issue "higher risk for your age")
FLOOR = 0.90


def floor_miss_chance(n_calibration: int, n_test: int, floor: float = FLOOR) -> dict:
    """The chance that a test set's share in Normal falls below ``floor`` under exchangeability:
    the conformal bound's coverage is Beta(k, n + 1 - k) (k = ceil((n + 1) 0.95), the risk
    stage's rank), and the test share is Binomial(n_test, coverage) / n_test, so the count in
    Normal is beta-binomial. ``exact``: the same with a bound of exactly 95% coverage (an
    infinite calibration set), what the test set's own size leaves."""
    from scipy import stats

    from sphr.risk.calibration import NORMAL_LEVEL

    k = int(np.ceil((n_calibration + 1) * NORMAL_LEVEL))
    below = int(np.ceil(floor * n_test)) - 1  # at most this many Normal: under the floor
    exact = float(stats.binom.cdf(below, n_test, NORMAL_LEVEL))
    if k > n_calibration:  # the risk stage falls back to a log-normal bound: no closed form
        return {"p_below_floor": float("nan"), "exact": exact}
    return {"p_below_floor": float(stats.betabinom.cdf(below, n_test, k, n_calibration + 1 - k)),
            "exact": exact}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run directory (its risk/risk_groups.parquet)")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rows = pd.read_parquet(args.run / "risk" / "risk_groups.parquet")
    rows = rows[(rows["mode"] == "calibrated") & (rows["label"] == 2)
                & rows["partition"].isin(("calibration", "test"))]
    out: dict = {}
    print("| sex | score | calibration / test BFH | observed in Normal | re-drawn 5th / 50th "
          "percentile | P(share <= observed) |\n| --- | --- | --- | --- | --- | --- |")
    for (sex, method), sub in rows.groupby(["sex", "method"], sort=True):
        cal = sub.loc[sub["partition"] == "calibration", "score"].to_numpy(float)
        test = sub.loc[sub["partition"] == "test", "group"].to_numpy(object)
        scores = sub.loc[sub["partition"] == "test", "score"].to_numpy(float)
        if cal.size < 3 or not test.size:
            continue
        observed = float(np.mean(test == "Normal"))
        shares = redrawn_shares(cal, scores, args.draws, args.seed)
        p5, p50 = np.percentile(shares, (5, 50))
        p = float(np.mean(shares <= observed + 1e-12))
        out.setdefault(sex, {})[method] = {
            "n_calibration": int(cal.size), "n_test": int(test.size),
            "observed": round(observed, 4), "p5": round(float(p5), 4),
            "p50": round(float(p50), 4), "p_at_most_observed": round(p, 4)}
        print(f"| {sex} | {method} | {cal.size} / {test.size} | {observed:.1%} | {p5:.1%} / "
              f"{p50:.1%} | {p:.3f} |")
    out["floor"] = floor_summary(out)
    print(json.dumps(out))


def floor_summary(cells: dict) -> dict:
    """Per cell the chance of a share below :data:`FLOOR` by chance alone, and the chance that
    every cell clears it (cells taken as independent; they share people, so it is a bound
    from below)."""
    chances = {f"{sex}/{m}": floor_miss_chance(c["n_calibration"], c["n_test"])
               for sex, by in cells.items() for m, c in by.items()}
    every = float(np.prod([1 - v["p_below_floor"] for v in chances.values()]))
    every_exact = float(np.prod([1 - v["exact"] for v in chances.values()]))
    print(f"\nChance alone of a cell below {FLOOR:.0%}: "
          + ", ".join(sorted({f"{k.split('/')[0]} {v['p_below_floor']:.3f} (exact bound "
                              f"{v['exact']:.3f})" for k, v in chances.items()}))
          + f"; every one of {len(chances)} cells at or above it: {every:.2f} "
          f"(with an exactly-95% bound: {every_exact:.2f}), cells taken as independent.")
    return {"cells": chances, "every_cell": round(every, 3),
            "every_cell_exact_bound": round(every_exact, 3)}


if __name__ == "__main__":
    main()
