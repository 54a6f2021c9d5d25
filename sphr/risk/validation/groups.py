"""Validation of the risk groups against the repeat visit (Table 4 shape) and Appendix C.

Population (**Decision**): real participants who were apparently healthy at
baseline (classes 1 and 2: the BFH are apparently healthy too), in the test
partition (nobody a fit has seen; ``--validate-on all`` is gone: it validated SPHR on
training rows), with a first repeat visit (``followup.parquet`` instance 1).
For each sex, method, mode and group: the group's share of that
population, and per condition the share with a *new* diagnosis at the repeat
visit (``new_cancer`` / ``new_diabetes`` / ``new_other_serious``; ``any`` = at
least one), among those whose answer is known. Counts are small, so every
share comes with its count and a Wilson 95% interval.

Appendix C: among the same population, participants with a new diagnosis at
any later visit (instances 1-3); time to diagnosis = ``years_since_baseline``
of the first visit that reports it; Pearson r (and p, n) with the health
distance, per condition.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.risk.followup import CONDITIONS, new_any_diagnosis
from sphr.risk.intervals import GROUPS

ROWS: tuple[str, ...] = (*CONDITIONS, "any")
KEYS: tuple[str, ...] = ("sex", "method", "mode")


def wilson(k: int | np.ndarray, n: int | np.ndarray, z: float = 1.959963984540054
           ) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of k successes in n trials; (nan, nan) where n == 0."""
    k = np.asarray(k, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo, hi = np.clip(centre - half, 0, 1), np.clip(centre + half, 0, 1)
    # exact ends at k = 0 and k = n (rounding would leave 1e-17 above 0)
    lo, hi = np.where(k == 0, 0.0, lo), np.where(k == n, 1.0, hi)
    return np.where(n > 0, lo, np.nan), np.where(n > 0, hi, np.nan)


def validation_table(risk: pd.DataFrame, followup: pd.DataFrame, instance: int = 1) -> pd.DataFrame:
    """One row per sex, method, mode, group and condition row (cancer, diabetes, other, any).

    ``risk`` holds eid, sex, method, mode, group for the validation population.
    """
    visit = followup.loc[followup["instance"] == instance].drop_duplicates("eid").copy()
    visit["new_any"] = new_any_diagnosis(visit)
    cols = ["eid"] + [f"new_{c}" for c in ROWS]
    merged = risk.merge(visit[cols], on="eid", how="inner")
    records = []
    for key, sub in merged.groupby(list(KEYS), sort=True):
        total = len(sub)
        for group in GROUPS:
            g = sub.loc[sub["group"] == group]
            s_lo, s_hi = wilson(len(g), total)
            for cond in ROWS:
                vals = g[f"new_{cond}"].astype("boolean")
                answered, cases = int(vals.notna().sum()), int(vals.fillna(False).sum())
                lo, hi = wilson(cases, answered)
                records.append({
                    **dict(zip(KEYS, key, strict=True)), "group": group, "n_total": total,
                    "n_group": len(g), "share": len(g) / total if total else np.nan,
                    "share_low": float(s_lo), "share_high": float(s_hi), "condition": cond,
                    "answered": answered, "cases": cases,
                    "rate": cases / answered if answered else np.nan,
                    "rate_low": float(lo), "rate_high": float(hi)})
    return pd.DataFrame.from_records(records, columns=[
        *KEYS, "group", "n_total", "n_group", "share", "share_low", "share_high", "condition",
        "answered", "cases", "rate", "rate_low", "rate_high"])


def first_diagnosis_years(followup: pd.DataFrame) -> pd.DataFrame:
    """eid and, per condition, years from baseline to the first visit reporting it (NaN: never)."""
    out = pd.DataFrame({"eid": followup["eid"].unique()})
    for cond in CONDITIONS:
        hit = followup.loc[followup[f"new_{cond}"].astype("boolean").fillna(False)]
        first = hit.groupby("eid")["years_since_baseline"].min().rename(f"years_{cond}")
        out = out.merge(first, left_on="eid", right_index=True, how="left")
    return out


def time_correlation(risk: pd.DataFrame, followup: pd.DataFrame) -> pd.DataFrame:
    """Pearson r, p and n of health distance vs time to first diagnosis, per condition."""
    from scipy.stats import pearsonr

    years = first_diagnosis_years(followup)
    merged = risk.merge(years, on="eid", how="inner")
    records = []
    for key, sub in merged.groupby(list(KEYS), sort=True):
        for cond in CONDITIONS:
            ok = sub[f"years_{cond}"].notna().to_numpy()
            d, t = sub["distance"].to_numpy(float)[ok], sub[f"years_{cond}"].to_numpy(float)[ok]
            r = p = np.nan
            if ok.sum() >= 3 and np.ptp(d) > 0 and np.ptp(t) > 0:
                res = pearsonr(d, t)
                r, p = float(res.statistic), float(res.pvalue)
            records.append({**dict(zip(KEYS, key, strict=True)), "condition": cond,
                            "n": int(ok.sum()), "r": r, "p": p})
    return pd.DataFrame.from_records(records, columns=[*KEYS, "condition", "n", "r", "p"])


def holm(p: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values (NaN stays NaN and is not counted)."""
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = ok.size
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out[order] = np.minimum(adj, 1.0)
    return out


def fmt_rate(cases: int, n: int, lo: float, hi: float) -> str:
    if n == 0:
        return "- (0/0)"
    return f"{100 * cases / n:.2f}% ({cases}/{n}) [{100 * lo:.1f}-{100 * hi:.1f}]"


def wide_table(table: pd.DataFrame) -> pd.DataFrame:
    """Table 4 layout: one row per sex, method, mode and measure; columns the three groups."""
    rows = []
    for key, sub in table.groupby(list(KEYS), sort=False):
        base = dict(zip(KEYS, key, strict=True))
        first = sub.loc[sub["condition"] == ROWS[0]].set_index("group")
        rows.append({**base, "measure": "share", **{
            g: fmt_rate(int(first.loc[g, "n_group"]), int(first.loc[g, "n_total"]),
                        first.loc[g, "share_low"], first.loc[g, "share_high"]) for g in GROUPS}})
        for cond in ROWS:
            c = sub.loc[sub["condition"] == cond].set_index("group")
            rows.append({**base, "measure": cond, **{
                g: fmt_rate(int(c.loc[g, "cases"]), int(c.loc[g, "answered"]),
                            c.loc[g, "rate_low"], c.loc[g, "rate_high"]) for g in GROUPS}})
    return pd.DataFrame(rows, columns=[*KEYS, "measure", *GROUPS])


def higher_vs_normal(table: pd.DataFrame) -> pd.DataFrame:
    """Does Higher Risk develop more conditions than Normal? Rates, difference, Fisher p.

    One-sided Fisher exact test (HR rate > N rate): the counts are too small
    for a normal approximation. ``p_holm``: Holm-adjusted over every row of the table (all
    sexes, methods, modes and conditions are one family of tests).
    """
    from scipy.stats import fisher_exact

    records = []
    for key, sub in table.groupby([*KEYS, "condition"], sort=False):
        by = sub.set_index("group")
        n_k, n_n = int(by.loc[GROUPS[0], "cases"]), int(by.loc[GROUPS[0], "answered"])
        h_k, h_n = int(by.loc[GROUPS[2], "cases"]), int(by.loc[GROUPS[2], "answered"])
        p = np.nan
        if n_n and h_n:
            p = float(fisher_exact([[h_k, h_n - h_k], [n_k, n_n - n_k]],
                                   alternative="greater").pvalue)
        rn = n_k / n_n if n_n else np.nan
        rh = h_k / h_n if h_n else np.nan
        records.append({**dict(zip((*KEYS, "condition"), key, strict=True)),
                        "normal": f"{n_k}/{n_n}", "higher": f"{h_k}/{h_n}",
                        "normal_rate": rn, "higher_rate": rh, "difference": rh - rn,
                        "higher_more": bool(rh > rn) if n_n and h_n else None, "p_greater": p})
    out = pd.DataFrame.from_records(records)
    if len(out):
        out["p_holm"] = holm(out["p_greater"].to_numpy(float))
    return out
