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
at or below the observed share).
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
    print(json.dumps(out))


if __name__ == "__main__":
    main()
