"""Threshold intervals and the Normal / Lower Risk / Higher Risk mapping (Appendix B).

Two ways to get the intervals of one sex and age group g with training BFH set
B_g and reference r_g = G(P50(B_g)) (docs/METHODS.md, "Risk groups"):

* ``calibrated`` (default): one-sided split-conformal bounds from the
  *calibration* BFH, whom no fit has seen: Normal up to the 95% bound, Lower
  Risk up to the 99% bound, Higher Risk beyond (:mod:`sphr.risk.calibration`).
* ``paper`` (Eq. A.4, as written): N = [d(G(P2.5), r), d(G(P97.5), r)] and
  LR = [d(G(P1), r), d(G(P99), r)], P_q the element-wise percentile vector of B_g.

The former ``bfh-distance`` mode (percentiles of the training BFH's own
distances) is gone: those distances are in-sample (SPHR was trained to pull
exactly these rows together), so its intervals were too narrow for anyone else;
``calibrated`` is the same idea computed on people no fit has seen.

Two repairs make every interval usable (both recorded in the thresholds):

1. Degenerate interval: under a non-linear G (or a skewed feature) the low
   percentile vector can land farther from r than the high one, so lower > upper.
   The interval becomes [min, max] of the two distances.
2. Containment N ⊆ LR: the paper states it, but with unsigned distances it fails
   on the lower side (for G = identity every |P1_j - P50_j| >= |P2.5_j - P50_j|,
   so d(P1, r) >= d(P2.5, r)). LR becomes the hull [min(N_lo, LR_lo), max(N_hi, LR_hi)].

In mode ``paper`` the mapping is two-sided exactly as Eq. A.5: a distance below N's lower bound
is *not* Normal (it is Lower Risk if inside LR, else Higher Risk). Reports count
these "closer than the Normal interval" participants separately.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMAL = "Normal"
LOWER_RISK = "Lower Risk"
HIGHER_RISK = "Higher Risk"
GROUPS: tuple[str, ...] = (NORMAL, LOWER_RISK, HIGHER_RISK)
MODES: tuple[str, ...] = ("calibrated", "paper")

#: percentiles of the Normal (inner 95%) and Lower Risk (inner 98%) intervals
NORMAL_Q: tuple[float, float] = (2.5, 97.5)
LOWER_Q: tuple[float, float] = (1.0, 99.0)


@dataclass(frozen=True)
class Intervals:
    """The two closed intervals of one stratum, after the repairs above."""

    normal_low: float
    normal_high: float
    lower_low: float
    lower_high: float
    #: which repairs were applied: "normal_swapped", "lower_swapped", "lower_widened"
    repairs: tuple[str, ...] = ()

    def as_dict(self) -> dict:
        return {"normal_low": self.normal_low, "normal_high": self.normal_high,
                "lower_low": self.lower_low, "lower_high": self.lower_high,
                "repairs": list(self.repairs)}


def make_intervals(normal: tuple[float, float], lower: tuple[float, float]) -> Intervals:
    """Order each pair (repair 1), then widen LR to contain N (repair 2)."""
    repairs = []
    n_lo, n_hi = float(normal[0]), float(normal[1])
    l_lo, l_hi = float(lower[0]), float(lower[1])
    if n_lo > n_hi:
        n_lo, n_hi = n_hi, n_lo
        repairs.append("normal_swapped")
    if l_lo > l_hi:
        l_lo, l_hi = l_hi, l_lo
        repairs.append("lower_swapped")
    if n_lo < l_lo or n_hi > l_hi:
        l_lo, l_hi = min(n_lo, l_lo), max(n_hi, l_hi)
        repairs.append("lower_widened")
    return Intervals(n_lo, n_hi, l_lo, l_hi, tuple(repairs))


def assign_groups(distance: np.ndarray, iv: Intervals) -> np.ndarray:
    """Eq. A.5 on closed intervals; every distance gets exactly one group.

    A NaN distance (which no valid input produces) would fall through to
    Higher Risk, so it is rejected instead of silently classified.
    """
    s = np.asarray(distance, dtype=np.float64)
    if np.isnan(s).any():
        raise ValueError("a health distance is NaN")
    in_n = (s >= iv.normal_low) & (s <= iv.normal_high)
    in_lr = (s >= iv.lower_low) & (s <= iv.lower_high)
    return np.where(in_n, NORMAL, np.where(in_lr, LOWER_RISK, HIGHER_RISK)).astype(object)


def paper_intervals(percentile_distance) -> Intervals:
    """``percentile_distance(q)`` = d(G(P_q(B)), r); Eq. A.4 with both repairs."""
    return make_intervals(tuple(percentile_distance(q) for q in NORMAL_Q),
                          tuple(percentile_distance(q) for q in LOWER_Q))
