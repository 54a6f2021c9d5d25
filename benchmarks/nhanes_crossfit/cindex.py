"""Harrell's C for death per sex and score, with participant-bootstrap intervals shared by
every score of a sex, and the paired differences of the pre-registered comparisons."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from .common import SEXES, interval
from .fits import scores_file


def c_indices(frame: pd.DataFrame, scores: list[str], n_bootstrap: int, seed: int
              ) -> tuple[dict, dict, dict]:
    """Per sex and score: [C, low, high], n scored, and the bootstrap draws (for paired
    differences); one stream of resamples per sex, shared by every score."""
    from sphr.survival import c_index_weighted, resample_counts

    out, n_scored, draws = {}, {}, {}
    for k, sex in enumerate(SEXES):
        sub = frame.loc[frame["sex"] == sex]
        t, e = sub["time_years"].to_numpy(float), sub["died"].to_numpy(bool)
        counts = resample_counts(np.random.default_rng([seed, k]), len(sub), n_bootstrap)
        w = np.vstack([np.ones(len(sub)), counts])
        out[sex], n_scored[sex], draws[sex] = {}, {}, {}
        for name in scores:
            s = sub[name].to_numpy(float)
            ok = np.isfinite(s)
            if ok.sum() < 10:
                continue
            c = c_index_weighted(t[ok], e[ok], s[ok], w[:, ok])
            out[sex][name] = interval(c)
            n_scored[sex][name] = int(ok.sum())
            draws[sex][name] = c
    return out, n_scored, draws


def paired(draws_a: dict, draws_b: dict, a: str, b: str) -> list[float] | None:
    """Average over the sexes of C(a) - C(b), with the 95% interval of the same difference
    over the shared bootstrap resamples (both scored on the same people)."""
    if not all(a in draws_a[s] and b in draws_b[s] for s in SEXES):
        return None
    return interval(np.mean([draws_a[s][a] - draws_b[s][b] for s in SEXES], axis=0))


def comparisons(draws: dict[str, dict]) -> dict:
    """The pre-registered comparisons (docs/METHODS.md): the marker space against the quantile
    space for the four marker-space methods (and their average), and every SPHR variant
    against today's SPHR."""
    from sphr.risk.config import MARKER_SPACE_METHODS

    out: dict = {}
    if {"marker", "quantile"} <= set(draws):
        m, q = draws["marker"], draws["quantile"]
        out["marker_minus_quantile"] = {x: paired(m, q, x, x) for x in MARKER_SPACE_METHODS}
        avg = {s: {"avg": np.mean([m[s][x] for x in MARKER_SPACE_METHODS], axis=0)} for s in SEXES}
        avg_q = {s: {"avg": np.mean([q[s][x] for x in MARKER_SPACE_METHODS], axis=0)}
                 for s in SEXES}
        out["marker_minus_quantile"]["average of the four"] = paired(avg, avg_q, "avg", "avg")
    first = next(iter(draws.values()))
    variants = sorted({x for s in SEXES for x in first[s]
                       if x.startswith("sphr_") and x != "sphr"})
    if variants:
        out["minus_sphr"] = {v: paired(first, first, v, "sphr") for v in variants}
    return out


def plain_c(frame: pd.DataFrame, name: str) -> float:
    """Harrell's C of one score on the rows where it is finite (no resample)."""
    from sphr.survival import c_index_weighted

    s = frame[name].to_numpy(float)
    ok = np.isfinite(s)
    t, e = frame["time_years"].to_numpy(float)[ok], frame["died"].to_numpy(bool)[ok]
    return float(c_index_weighted(t, e, s[ok], np.ones((1, int(ok.sum()))))[0])


def against(args: argparse.Namespace, tables: dict[str, pd.DataFrame], draws: dict) -> dict:
    """This run's SPHR scores minus the same scores of the run in ``args.against`` (the same
    people and resamples: the folds and bootstrap are seeded alike)."""
    space = next(iter(tables))
    other = pd.read_parquet(scores_file(args.against, 0, space))  # its refit 0, as this run's
    if not np.array_equal(other["eid"].to_numpy(), tables[space]["eid"].to_numpy()):
        raise SystemExit(f"{args.against}: other people than this run's")
    names = [c for c in other.columns if c == "sphr" or c.startswith("sphr_")]
    _, _, theirs = c_indices(other, names, args.bootstrap, args.seed)
    return {f"{n} (this run - {args.against.name})": paired(draws[space], theirs, n, n)
            for n in names}
