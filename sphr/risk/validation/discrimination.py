"""Does a higher health score come before disease? Discrimination with bootstrap intervals.

Population (**Decision**, as the paper's validation): participants apparently
healthy at baseline (classes 1 and 2) whose role is ``test`` (no fit has seen
them), with a repeat visit. For each sex, method and outcome (``any`` new
diagnosis, ``cancer``, ``diabetes``, ``other_serious``; docs/METHODS.md):

* **AUROC** of the continuous age-standardized score for a new diagnosis
  reported at the first repeat visit (instance 1);
* **Harrell's C-index** (:func:`sphr.survival.c_index`, lifelines; the bootstrap by
  :func:`sphr.survival.c_index_weighted`) for the time to the first visit reporting
  the diagnosis across instances 1-3, censored at the last visit with a known
  answer (visits are years apart, so event times are interval-censored; the
  C-index treats them as exact, which is what the issue's protocol asks);
* the **risk ratio** Higher Risk vs Normal (mode ``calibrated``) at instance 1,
  Katz log interval, Haldane-Anscombe +0.5 when a cell is zero;
* a **paired bootstrap** of every method's AUROC minus raw Euclidean's (the
  same resampled people for both), its two-sided bootstrap p, Holm-adjusted
  over all comparisons.

Intervals: participants resampled with replacement, ``n_bootstrap`` times,
seeded; percentile 95% intervals. A resample with one class only is dropped
(counted in ``boot_used``). With fewer than ``min_events`` events (or
non-events) a metric is not estimated (NaN): a bootstrap of one or two events
gives intervals that look precise and mean nothing.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from sphr.risk.config import RiskConfig
from sphr.risk.followup import CONDITIONS, new_any_diagnosis
from sphr.risk.intervals import HIGHER_RISK, NORMAL
from sphr.risk.validation.groups import holm
from sphr.stats import auroc, auroc_rows
from sphr.survival import c_index, c_index_weighted, resample_counts

OUTCOMES: tuple[str, ...] = ("any", *CONDITIONS)
REFERENCE_METHOD = "raw_euclidean"
COLUMNS: tuple[str, ...] = (
    "sex", "method", "outcome", "n", "events", "auroc", "auroc_low", "auroc_high",
    "n_survival", "events_survival", "c_index", "c_index_low", "c_index_high",
    "auroc_minus_raw", "diff_low", "diff_high", "p_diff", "p_diff_holm",
    "rr_higher_vs_normal", "rr_low", "rr_high", "n_higher", "n_normal", "boot_used")



def risk_ratio(k_h: int, n_h: int, k_n: int, n_n: int) -> tuple[float, float, float]:
    """Risk ratio Higher Risk vs Normal with the Katz log 95% interval."""
    if n_h == 0 or n_n == 0:
        return (np.nan, np.nan, np.nan)
    a, b, c, d = k_h, n_h - k_h, k_n, n_n - k_n
    if min(a, b, c, d) == 0:
        a, b, c, d = a + 0.5, b + 0.5, c + 0.5, d + 0.5
    rr = (a / (a + b)) / (c / (c + d))
    se = np.sqrt(1 / a - 1 / (a + b) + 1 / c - 1 / (c + d))
    return float(rr), float(rr * np.exp(-1.96 * se)), float(rr * np.exp(1.96 * se))


def outcome_frames(followup: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(first-visit outcomes: eid, new_<outcome> boolean; survival: eid, time_<o>, event_<o>)."""
    fu = followup.copy()
    fu["new_any"] = new_any_diagnosis(fu)
    first = fu.loc[fu["instance"] == 1].drop_duplicates("eid")
    visit1 = first[["eid", *(f"new_{o}" for o in OUTCOMES)]].reset_index(drop=True)
    surv = pd.DataFrame({"eid": np.sort(fu["eid"].unique())})
    for o in OUTCOMES:
        known = fu.loc[fu[f"new_{o}"].notna(), ["eid", "years_since_baseline", f"new_{o}"]]
        hit = known.loc[known[f"new_{o}"].astype(bool)].groupby("eid")["years_since_baseline"].min()
        last = known.groupby("eid")["years_since_baseline"].max()
        t = pd.Series(np.nan, index=surv["eid"])
        t.loc[last.index] = last
        t.loc[hit.index] = hit
        surv[f"time_{o}"] = t.to_numpy()
        surv[f"event_{o}"] = surv["eid"].isin(hit.index).to_numpy()
    return visit1, surv


def discrimination(rows: pd.DataFrame, followup: pd.DataFrame, *,
                   n_bootstrap: int = RiskConfig.n_bootstrap, seed: int = RiskConfig.seed,
                   mode: str = "calibrated", min_events: int = 5) -> pd.DataFrame:
    """One row per sex, method and outcome (columns :data:`COLUMNS`).

    ``rows``: risk_groups rows of the validation population (eid, sex, method, mode, score,
    group); the score of a method is the same in every mode, groups come from ``mode``.
    """
    visit1, surv = outcome_frames(followup)
    rows = rows.loc[rows["mode"] == mode]
    records = []
    for sex in sorted(rows["sex"].unique()):
        # one stream per sex: a sex's figures do not depend on whether the other was run
        rng = np.random.default_rng([seed, zlib.crc32(str(sex).encode())])
        sub = rows.loc[rows["sex"] == sex]
        wide = sub.pivot_table(index="eid", columns="method", values="score", aggfunc="first")
        methods = list(wide.columns)
        groups = sub.dropna(subset=["group"]).pivot_table(
            index="eid", columns="method", values="group", aggfunc="first"
        ).reindex(index=wide.index, columns=methods)
        for o in OUTCOMES:
            y1 = visit1.set_index("eid")[f"new_{o}"].reindex(wide.index)
            keep = y1.notna().to_numpy() & wide.notna().all(axis=1).to_numpy()
            S, y = wide.to_numpy(float)[keep], y1.to_numpy()[keep].astype(bool)
            G = groups.to_numpy(object)[keep]
            n = int(keep.sum())
            idx = rng.integers(0, n, size=(n_bootstrap, n)) if n else np.zeros((0, 0), int)
            boot = {m: auroc_rows(S[:, j][idx], y[idx]) if n else np.full(n_bootstrap, np.nan)
                    for j, m in enumerate(methods)}
            sv = surv.set_index("eid").reindex(wide.index)
            t_all, e_all = sv[f"time_{o}"].to_numpy(float), sv[f"event_{o}"].eq(True).to_numpy(bool)
            ks = ~np.isnan(t_all) & wide.notna().all(axis=1).to_numpy()
            T, E, SS = t_all[ks], e_all[ks], wide.to_numpy(float)[ks]
            ns = int(ks.sum())
            if min(int(y.sum()), n - int(y.sum())) < min_events:
                n_auc = 0  # AUROC not estimable
            else:
                n_auc = n
            if min(int(E.sum()), ns - int(E.sum())) < min_events:
                ns_c = 0
            else:
                ns_c = ns
            counts = resample_counts(rng, ns, n_bootstrap) if ns else None
            for j, m in enumerate(methods):
                point = auroc(y, S[:, j]) if n_auc else np.nan
                b = boot[m]
                used = int(np.isfinite(b).sum()) if n_auc else 0
                lo, hi = (np.nanpercentile(b, (2.5, 97.5)) if used else (np.nan, np.nan))
                ci = c_index(T, E, SS[:, j]) if ns_c else np.nan
                if ns_c and np.isfinite(ci):
                    cb = c_index_weighted(T, E, SS[:, j], counts)
                    c_lo, c_hi = np.nanpercentile(cb, (2.5, 97.5))
                else:
                    c_lo = c_hi = np.nan
                diff = d_lo = d_hi = p = np.nan
                if REFERENCE_METHOD in boot and m != REFERENCE_METHOD and n_auc:
                    ref_j = methods.index(REFERENCE_METHOD)
                    diff = point - auroc(y, S[:, ref_j])
                    db = b - boot[REFERENCE_METHOD]
                    db = db[np.isfinite(db)]
                    if db.size:
                        d_lo, d_hi = np.percentile(db, (2.5, 97.5))
                        # (k + 1) / (B + 1): a bootstrap p is never exactly 0
                        tail = min((db <= 0).sum(), (db >= 0).sum())
                        p = float(min(1.0, 2 * (tail + 1) / (db.size + 1)))
                g = G[:, j]
                k_h, n_h = int(y[g == HIGHER_RISK].sum()), int((g == HIGHER_RISK).sum())
                k_n, n_n = int(y[g == NORMAL].sum()), int((g == NORMAL).sum())
                rr, rr_lo, rr_hi = risk_ratio(k_h, n_h, k_n, n_n)
                records.append({
                    "sex": sex, "method": m, "outcome": o, "n": n, "events": int(y.sum()),
                    "auroc": point, "auroc_low": float(lo), "auroc_high": float(hi),
                    "n_survival": ns, "events_survival": int(E.sum()), "c_index": ci,
                    "c_index_low": float(c_lo), "c_index_high": float(c_hi),
                    "auroc_minus_raw": diff, "diff_low": float(d_lo), "diff_high": float(d_hi),
                    "p_diff": p, "rr_higher_vs_normal": rr, "rr_low": rr_lo, "rr_high": rr_hi,
                    "n_higher": n_h, "n_normal": n_n, "boot_used": used})
    out = pd.DataFrame.from_records(records, columns=[c for c in COLUMNS if c != "p_diff_holm"])
    out.insert(out.columns.get_loc("p_diff") + 1, "p_diff_holm", holm(out["p_diff"].to_numpy()))
    return out[list(COLUMNS)]
