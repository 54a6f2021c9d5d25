"""The Higher Risk bound where the calibration BFH are too few for a conformal one: the
pre-registered choice of its parametric fallback, and what each candidate does to real runs.

The rule (docs/METHODS.md, "The Higher Risk bound with fewer than 99 calibration BFH", written
before this file): calibration samples from six distributions, each on a robust z scale (its
true median and IQR / 1.349, as the age standardizer puts a large reference), n in
{20, 30, 50, 61, 98}, level 0.99, 4,000 samples per cell (seed 0); a bound's exceedance is the
distribution's exact share above it, a cell's figure their mean. A candidate passes when every
cell lies in [0.5%, 2.0%]; among passing ones the smallest worst-cell |log(exceedance / 1%)|
is chosen; none: ``lognormal`` stays.

Beside the rule, not part of it: ``--run RUN`` (a pipeline run: its risk stage's calibration
and held-out BFH) and ``--crossfit DIR`` (a ``benchmarks/real_nhanes.py`` output: each fold's
calibration BFH and the cross-fitted held-out people) give, per candidate, the held-out BFH
above the 99% bound pooled over scores and sexes (Wilson interval) and the held-out people in
Higher Risk per sex and score.

    python benchmarks/tail_bound.py [--reps 4000] [--run runs/demo] [--crossfit DIR]

Last line: one JSON object with ``candidates`` (per candidate its cells, ``worst``, ``passes``),
``chosen``, and ``run`` / ``crossfit`` where given.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

# a cross-fit's scores file is named in one place (its folder is added for a test loading
# this file by path; appended, as real_nhanes.py does, so it shadows no installed module)
sys.path.append(str(Path(__file__).resolve().parent))
from nhanes_crossfit.fits import scores_file

from sphr.io import write_text
from sphr.risk.calibration import LOWER_LEVEL, TAIL_BOUNDS, tail_bound

#: the pre-registered distributions (scipy frozen), before the robust z scale
DISTRIBUTIONS = {
    "normal": stats.norm(),
    "t5": stats.t(5),
    "chi5": stats.chi(5),
    "chi20": stats.chi(20),
    "lognormal0.5": stats.lognorm(0.5),
    "lognormal1.0": stats.lognorm(1.0),
}
SIZES = (20, 30, 50, 61, 98)
#: a cell passes when its mean exceedance lies here
BAND = (0.005, 0.02)
#: the fallback kept when no candidate passes
INCUMBENT = "lognormal"


def cell_exceedance(dist, n: int, tail: str, reps: int, seed: int) -> float:
    """Mean share of ``dist`` above the ``tail`` bound of ``reps`` calibration samples of size
    ``n`` drawn on the robust z scale."""
    median = float(dist.median())
    scale = float(dist.ppf(0.75) - dist.ppf(0.25)) / 1.349
    rng = np.random.default_rng(seed)
    samples = (dist.rvs(size=(reps, n), random_state=rng) - median) / scale
    bounds = np.array([tail_bound(s, LOWER_LEVEL, tail) for s in samples])
    above = np.where(np.isfinite(bounds), dist.sf(median + scale * bounds), 0.0)
    return float(above.mean())


def simulate(reps: int, seed: int = 0) -> dict:
    """Every candidate's cells, worst cell and verdict."""
    out = {}
    seeds = np.random.SeedSequence(seed).spawn(len(DISTRIBUTIONS) * len(SIZES))
    for tail in TAIL_BOUNDS:
        cells, i = {}, 0
        for name, dist in DISTRIBUTIONS.items():
            for n in SIZES:
                # the same calibration samples for every candidate: one seed per cell
                cell_seed = int(seeds[i].generate_state(1)[0])
                cells[f"{name}/n={n}"] = round(cell_exceedance(dist, n, tail, reps, cell_seed), 5)
                i += 1
        worst_key = max(cells, key=lambda k: abs(math.log(max(cells[k], 1e-9) / 0.01)))
        out[tail] = {"cells": cells, "worst": {worst_key: cells[worst_key]},
                     "worst_abs_log_ratio": round(abs(math.log(max(cells[worst_key], 1e-9)
                                                               / 0.01)), 4),
                     "passes": all(BAND[0] <= v <= BAND[1] for v in cells.values())}
    return out


def choose(candidates: dict) -> str:
    """The pre-registered rule: the passing candidate with the smallest worst cell, else the
    incumbent."""
    passing = [t for t in TAIL_BOUNDS if candidates[t]["passes"]]
    if not passing:
        return INCUMBENT
    return min(passing, key=lambda t: candidates[t]["worst_abs_log_ratio"])


def above_bounds(cal: np.ndarray, held_out: np.ndarray, bfh: np.ndarray) -> dict:
    """Per candidate: held-out BFH above the 99% bound of ``cal`` and held-out people above it
    (the ``upper_bound`` the risk stage uses: conformal where n allows)."""
    from sphr.risk.calibration import upper_bound

    out = {}
    for tail in TAIL_BOUNDS:
        bound = upper_bound(cal, LOWER_LEVEL, tail).value
        out[tail] = {"bound": round(bound, 4), "bfh_above": int((held_out[bfh] > bound).sum()),
                     "bfh": int(bfh.sum()), "higher_risk": int((held_out > bound).sum()),
                     "people": int(held_out.size)}
    return out


def run_cells(run: Path) -> list[dict]:
    """A pipeline run's cells: its risk stage's calibration BFH z and held-out (test) z."""
    rows = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    rows = rows[rows["mode"] == "calibrated"]
    cells = []
    for (sex, method), sub in rows.groupby(["sex", "method"], sort=True):
        cal = sub[(sub["partition"] == "calibration") & (sub["label"] == 2)]["score"]
        test = sub[sub["partition"] == "test"].dropna(subset=["score"])
        cells.append({"sex": sex, "method": method, **above_bounds(
            cal.to_numpy(float), test["score"].to_numpy(float), (test["label"] == 2).to_numpy())})
    return cells


def crossfit_cells(root: Path, space: str = "marker") -> list[dict]:
    """A cross-fit's cells, one per fold, sex and score: the fold's calibration BFH z (its risk
    stage) and its held-out people's z (``sphr score``)."""
    scores = pd.read_parquet(scores_file(root, 0, space))  # refit 0: the folds below
    cells = []
    for fold in sorted(root.glob("fold[0-9]*")):
        held = set(pd.read_csv(fold / "heldout.csv", usecols=["eid"])["eid"])
        rows = pd.read_parquet(fold / f"risk_{space}" / "risk_groups.parquet")
        rows = rows[(rows["mode"] == "calibrated") & (rows["partition"] == "calibration")
                    & (rows["label"] == 2)]
        mine = scores[scores["eid"].isin(held)]
        for (sex, method), sub in rows.groupby(["sex", "method"], sort=True):
            people = mine[mine["sex"] == sex].dropna(subset=[method])
            cells.append({"fold": fold.name, "sex": sex, "method": method, **above_bounds(
                sub["score"].to_numpy(float), people[method].to_numpy(float),
                (people["label"] == 2).to_numpy())})
    return cells


def pooled(cells: list[dict]) -> dict:
    """Per candidate: held-out BFH above the bound pooled over cells, with a Wilson interval,
    and held-out people in Higher Risk per sex and score (summed over folds)."""
    from sphr.risk.validation.groups import wilson

    out = {}
    for tail in TAIL_BOUNDS:
        k = sum(c[tail]["bfh_above"] for c in cells)
        n = sum(c[tail]["bfh"] for c in cells)
        lo, hi = wilson(k, n)
        higher: dict[str, int] = {}
        for c in cells:
            key = f"{c['sex']}/{c['method']}"
            higher[key] = higher.get(key, 0) + c[tail]["higher_risk"]
        out[tail] = {"bfh_above": k, "bfh": n, "share": round(k / n, 4),
                     "interval": [round(float(lo), 4), round(float(hi), 4)],
                     "higher_risk": higher}
    return out


def print_tables(candidates: dict, chosen: str, measured: dict) -> None:
    print("| candidate | worst cell | worst exceedance | passes |\n| --- | --- | --- | --- |")
    for tail, c in candidates.items():
        (key, value), = c["worst"].items()
        print(f"| `{tail}` | {key} | {100 * value:.2f}% | {'yes' if c['passes'] else 'no'} |")
    print(f"\nchosen by the rule: `{chosen}`")
    for label, result in measured.items():
        print(f"\n{label}: held-out BFH above the 99% bound (pooled; 1% meant)")
        for tail, r in result.items():
            lo, hi = r["interval"]
            print(f"- `{tail}`: {r['bfh_above']} of {r['bfh']} ({100 * r['share']:.2f}%, "
                  f"{100 * lo:.2f}-{100 * hi:.2f}%); held-out people in Higher Risk, "
                  + ", ".join(f"{k} {v}" for k, v in r["higher_risk"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run", type=Path, help="a pipeline run directory (runs/demo)")
    parser.add_argument("--crossfit", type=Path, help="a benchmarks/real_nhanes.py output")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    candidates = simulate(args.reps, args.seed)
    chosen = choose(candidates)
    measured = {}
    if args.run:
        measured["run"] = pooled(run_cells(args.run))
    if args.crossfit:
        measured["crossfit"] = pooled(crossfit_cells(args.crossfit))
    print_tables(candidates, chosen, measured)
    result = {"candidates": candidates, "chosen": chosen, **measured,
              "rule": {"band": list(BAND), "sizes": list(SIZES), "reps": args.reps,
                       "seed": args.seed, "level": LOWER_LEVEL}}
    if args.out:
        write_text(json.dumps(result, indent=1) + "\n", args.out)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
