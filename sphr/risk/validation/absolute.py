"""How good is a predicted 10-year risk? C, calibration slope, O/E, Brier and deciles.

docs/METHODS.md, "Absolute risk and the risk-equivalent age", Evaluation. Input: the rows of
:func:`sphr.risk.absolute.predict_all` (eid, sex, outcome, method, recalibrated, risk_10y) of
people no fit has seen (the test partition, or out-of-fold people), and the linked outcomes
(``ingest/outcomes.parquet``). Follow-up is cut at the horizon. The estimators are
:mod:`sphr.survival`'s: Harrell's C and the IPCW Brier over participant-bootstrap weights,
Kaplan-Meier with Greenwood's interval for the observed risk, lifelines' Cox fit for the slope.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.risk.absolute import outcome_arrays
from sphr.survival import (
    brier_weighted,
    c_index_weighted,
    cox_wald,
    kaplan_meier,
    percentile_interval,
    resample_counts,
)

#: years
HORIZON = 10.0
METRIC_COLUMNS: tuple[str, ...] = (
    "sex", "outcome", "method", "recalibrated", "n", "events", "c_index", "c_index_low",
    "c_index_high", "slope", "slope_low", "slope_high", "observed", "observed_low",
    "observed_high", "expected", "oe", "oe_low", "oe_high", "brier", "brier_low", "brier_high")
DECILE_COLUMNS: tuple[str, ...] = ("sex", "outcome", "method", "recalibrated", "bin", "n",
                                   "events", "predicted", "observed", "low", "high")


def with_outcome(risks: pd.DataFrame, outcomes: pd.DataFrame) -> pd.DataFrame:
    """``risks`` with ``time`` and ``event`` of their outcome (cut at :data:`HORIZON`); people
    without a non-prevalent outcome row, or without a 10-year risk, are dropped."""
    parts = []
    for outcome, g in risks.groupby("outcome", sort=False):
        t, e = outcome_arrays(g["eid"].to_numpy(np.int64), outcomes, str(outcome))
        parts.append(g.assign(time=np.minimum(t, HORIZON), event=e & (t <= HORIZON)))
    if not parts:
        return risks.assign(time=pd.Series(dtype=float), event=pd.Series(dtype=bool))
    out = pd.concat(parts, ignore_index=True)
    return out.loc[np.isfinite(out["time"]) & np.isfinite(out["risk_10y"])]


def _slope(t: np.ndarray, e: np.ndarray, risk: np.ndarray) -> tuple[float, float, float]:
    """The Cox coefficient of log(-log(1 - risk)) (the linear predictor up to a constant)."""
    p = np.clip(risk, 1e-12, 1 - 1e-12)
    hr, lo, hi, _ = cox_wald(t, e, {"lp": np.log(-np.log1p(-p))})["lp"]
    return float(np.log(hr)), float(np.log(lo)), float(np.log(hi))


def metrics_row(t: np.ndarray, e: np.ndarray, risk: np.ndarray, weights: np.ndarray
                ) -> dict[str, float]:
    """C, slope, O/E and Brier at :data:`HORIZON` of one group of people (module docstring);
    ``weights``: the observed sample first, then the bootstrap multiplicities."""
    c = c_index_weighted(t, e, risk, weights)
    brier = brier_weighted(t, e, risk, HORIZON, weights)
    obs, lo, hi = (float(v[0]) for v in kaplan_meier(t, e, np.array([HORIZON])))
    expected = float(np.mean(risk))
    slope = _slope(t, e, risk) if e.sum() >= 2 else (np.nan,) * 3
    c_lo, c_hi = percentile_interval(c[1:])
    b_lo, b_hi = percentile_interval(brier[1:])
    return {"n": len(t), "events": int(e.sum()),
            "c_index": float(c[0]), "c_index_low": c_lo, "c_index_high": c_hi,
            "slope": slope[0], "slope_low": slope[1], "slope_high": slope[2],
            "observed": obs, "observed_low": lo, "observed_high": hi, "expected": expected,
            "oe": obs / expected, "oe_low": lo / expected, "oe_high": hi / expected,
            "brier": float(brier[0]), "brier_low": b_lo, "brier_high": b_hi}


def deciles(t: np.ndarray, e: np.ndarray, risk: np.ndarray, min_bin: int = 50
            ) -> list[dict[str, float]]:
    """Predicted (mean) against observed (Kaplan-Meier, 95% interval) risk by tenth of predicted
    risk; fewer bins where ten would hold fewer than ``min_bin`` people."""
    k = int(min(10, max(2, len(t) // min_bin)))
    edges = np.quantile(risk, np.linspace(0, 1, k + 1))
    b = np.clip(np.searchsorted(edges, risk, side="right") - 1, 0, k - 1)
    out = []
    for i in range(k):
        m = b == i
        if not m.any():
            continue
        obs, lo, hi = (float(v[0]) for v in kaplan_meier(t[m], e[m], np.array([HORIZON])))
        out.append({"bin": i + 1, "n": int(m.sum()), "events": int(e[m].sum()),
                    "predicted": float(risk[m].mean()), "observed": obs, "low": lo, "high": hi})
    return out


def absolute_validation(risks: pd.DataFrame, outcomes: pd.DataFrame, *, n_bootstrap: int = 200,
                        seed: int = 0, min_events: int = 5
                        ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(metrics, deciles) per sex, outcome, method and baseline of ``risks`` (held-out people
    only: the caller chooses them). One seeded stream of resamples per sex and outcome, shared
    by every method scored on the same people. Groups with fewer than ``min_events`` events
    by the horizon are left out."""
    data = with_outcome(risks, outcomes)
    rows, bins = [], []
    keys = ["sex", "outcome", "method", "recalibrated"]
    for k, ((sex, outcome), sub) in enumerate(data.groupby(["sex", "outcome"], sort=False)):
        eids = np.sort(sub["eid"].unique())
        counts = resample_counts(np.random.default_rng([seed, k]), eids.size, n_bootstrap)
        for key, g in sub.groupby(keys[2:], sort=False):
            if g["event"].sum() < min_events:
                continue
            w = np.vstack([np.ones(len(g)), counts[:, np.searchsorted(eids, g["eid"])]])
            t, e = g["time"].to_numpy(float), g["event"].to_numpy(bool)
            risk = g["risk_10y"].to_numpy(float)
            head = dict(zip(keys, (sex, outcome, *key), strict=True))
            rows.append({**head, **metrics_row(t, e, risk, w)})
            bins += [{**head, **b} for b in deciles(t, e, risk)]
    return (pd.DataFrame.from_records(rows, columns=list(METRIC_COLUMNS)),
            pd.DataFrame.from_records(bins, columns=list(DECILE_COLUMNS)))
