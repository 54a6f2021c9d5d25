"""The beyond-age yardstick on the cross-fit (docs/METHODS.md, "Higher risk for your age"):
per sex and score, dC = C(age + score) - C(age) with its paired bootstrap interval, the
age-adjusted hazard ratio per SD and Spearman with age (everyone, held-out BFH), from
:mod:`sphr.beyond_age`; and, over refits, the rule that chooses SPHR by dC."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .common import SEXES, score_rows
from .refits import RULE_SCORES

#: (c) of the rule: the largest refit SD of the pooled C
MAX_REFIT_SD = 0.02


def _r(v: float) -> float | None:
    return round(float(v), 4) if np.isfinite(v) else None


def beyond_age_figures(frame: pd.DataFrame, scores: list[str], n_bootstrap: int, seed: int
                       ) -> tuple[dict, dict]:
    """sex -> score -> the yardstick's figures, and sex -> score -> the dC draws (one
    resample stream per sex, shared by every score and by every refit of the same people)."""
    from sphr.beyond_age import beyond_age_table

    names = [s for s in scores if s != "age"]
    frame = frame.assign(bfh=frame["label"].to_numpy() == 2) if "label" in frame else frame
    table, draws = beyond_age_table(frame, names, time="time_years", event="died", age="age",
                                    bfh="bfh" if "bfh" in frame else None, by="sex",
                                    n_bootstrap=n_bootstrap, seed=seed)
    out: dict = {sex: {} for sex in SEXES}
    for row in table.itertuples(index=False):
        out[row.sex][row.score] = {
            "dc": [_r(row.dc), _r(row.dc_low), _r(row.dc_high)],
            "c_age": _r(row.c_age), "hr_per_sd": [_r(row.hr_per_sd), _r(row.hr_low),
                                                   _r(row.hr_high)],
            "spearman_age": _r(row.spearman_age), "spearman_age_bfh": _r(row.spearman_age_bfh),
            "n": row.n, "n_bfh": row.n_bfh, "events": row.events}
    return out, {sex: {name: draws[(sex, name)] for name in names
                       if (sex, name) in draws} for sex in SEXES}


def dc_rule(figures: list[dict], draws: list[dict], c_spread: dict) -> dict:
    """The pre-registered rule per sex and judged score, over refits: (a) the mean dC's
    bootstrap interval above 0, (b) every refit's dC > 0, (c) refit SD of the pooled C <=
    :data:`MAX_REFIT_SD`."""
    out: dict = {}
    for sex in SEXES:
        out[sex] = {}
        for name in RULE_SCORES:
            if not all(name in f[sex] for f in figures):
                continue
            dcs = [f[sex][name]["dc"][0] for f in figures]
            mean_draws = np.mean([d[sex][name] for d in draws], axis=0)
            finite = mean_draws[np.isfinite(mean_draws)]
            lo, hi = (np.percentile(finite, (2.5, 97.5)) if finite.size > 1
                      else (np.nan, np.nan))
            sd = c_spread[sex][name]["sd"] if name in c_spread.get(sex, {}) else np.nan
            a, b = bool(lo > 0), all(d is not None and d > 0 for d in dcs)
            c = bool(np.isfinite(sd) and sd <= MAX_REFIT_SD)
            out[sex][name] = {"mean_dc": _r(np.mean([d for d in dcs if d is not None])),
                              "interval": [_r(lo), _r(hi)], "refit_dc": dcs,
                              "c_sd": sd, "mean_c": c_spread[sex].get(name, {}).get("mean"),
                              "dc_interval_above_0": a, "every_refit_dc_above_0": b,
                              "c_sd_at_most": c, "passes": a and b and c}
    return out


def beyond_markdown(result: dict, labels: dict[str, str]) -> str:
    """The yardstick's table per space: dC [95% CI], HR per SD, Spearman with age (held-out
    BFH), per sex."""
    lines = []
    for space, by_sex in result.get("beyond_age", {}).items():
        lines += [f"Distance space `{space}`: what each score adds to age for death, "
                  "cross-fitted. dC = C(age + score) - C(age) [95% CI]; HR per SD adjusted "
                  "for age; rho = Spearman of the score with age among held-out BFH", "",
                  "| score | women dC | women HR/SD | women rho | men dC | men HR/SD | men rho |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        def cells(s: str, key: str, by_sex: dict = by_sex) -> list[str]:
            f = by_sex[s][key]
            dc, hr, rho = f["dc"], f["hr_per_sd"], f["spearman_age_bfh"]
            return [f"{dc[0]:+.3f} [{dc[1]:+.3f}, {dc[2]:+.3f}]" if dc[0] is not None else "-",
                    f"{hr[0]:.2f} [{hr[1]:.2f}, {hr[2]:.2f}]" if hr[0] is not None else "-",
                    f"{rho:+.2f}" if rho is not None else "-"]

        lines += score_rows(by_sex, labels, cells)
        ages = {s: by_sex[s].get("raw_euclidean", {}).get("c_age") for s in SEXES}
        lines += ["", "Age alone: C " + ", ".join(f"{s} {v:.3f}" for s, v in ages.items()
                                                  if v is not None), ""]
    return "\n".join(lines)


def dc_rule_markdown(rule: dict, labels: dict[str, str]) -> str:
    lines = ["SPHR's rule by dC (docs/METHODS.md): passes when the mean dC over refits has a "
             "95% interval above 0, every refit's dC > 0 and the refit SD of C <= "
             f"{MAX_REFIT_SD}", "",
             "| sex | score | mean dC [interval] | refits' dC | C (SD) | passes |",
             "| --- | --- | --- | --- | --- | --- |"]
    for sex, by in rule.items():
        for name, r in by.items():
            dcs = ", ".join(f"{d:+.3f}" if d is not None else "-" for d in r["refit_dc"])
            lines.append(
                f"| {sex} | {labels.get(name, name)} | {r['mean_dc']:+.3f} "
                f"[{r['interval'][0]:+.3f}, {r['interval'][1]:+.3f}] | {dcs} | "
                f"{r['mean_c']:.3f} ({r['c_sd']:.3f}) | {'yes' if r['passes'] else 'no'} |")
    return "\n".join(lines) + "\n"
