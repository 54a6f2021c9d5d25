"""Decision curve analysis of a predicted risk with censored follow-up (Vickers & Elkin 2006;
the survival form of Vickers et al. 2008): the net benefit of treating the people whose
predicted risk reaches a threshold p_t, against treating everyone and treating no one.

With censoring the true and false positives come from the Kaplan-Meier risk by the horizon
among the people treated: TP / n = P(risk >= p_t) * (1 - S_treated(h)), FP / n =
P(risk >= p_t) * S_treated(h), and net benefit = TP / n - FP / n * p_t / (1 - p_t). Treating
everyone uses the whole group's S(h); treating no one is 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.survival import km_cumulative

#: the thresholds a reader would act on: 1% to 30% predicted 10-year risk
THRESHOLDS: tuple[float, ...] = tuple(np.round(np.arange(0.01, 0.301, 0.01), 2))


def net_benefit(time: np.ndarray, event: np.ndarray, risk: np.ndarray, horizon: float,
                thresholds: tuple[float, ...] = THRESHOLDS) -> pd.DataFrame:
    """threshold, treated (share at or above it), model, treat_all: the net benefit of each
    strategy by ``horizon`` (0 where the model treats nobody: it is then treat-none)."""
    t, e, r = np.asarray(time, float), np.asarray(event, bool), np.asarray(risk, float)
    ok = np.isfinite(t) & np.isfinite(r)
    t, e, r = t[ok], e[ok], r[ok]
    everyone = km_cumulative(t, e, horizon)
    rows = []
    for pt in thresholds:
        odds = pt / (1 - pt)
        treat = r >= pt
        share = float(treat.mean()) if r.size else float("nan")
        if treat.any():
            risk_treated = km_cumulative(t[treat], e[treat], horizon)
            model = share * risk_treated - share * (1 - risk_treated) * odds
        else:
            model = 0.0
        rows.append({"threshold": pt, "treated": share, "model": model,
                     "treat_all": everyone - (1 - everyone) * odds})
    return pd.DataFrame(rows)
