"""``--refits``: each score's pooled and per-fold C over refits, their spread, the mean
bootstrap interval and the pre-registered stability rule, as numbers and markdown."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .cindex import c_indices, plain_c
from .common import SEXES, refit_seed, score_rows
from .tables import LABELS


def spread(values: list[float]) -> dict[str, float]:
    """Mean, SD (ddof 1; NaN for one value), min and max of one score's C over refits."""
    v = np.asarray(values, float)
    sd = float(np.std(v, ddof=1)) if v.size > 1 else float("nan")
    return {"mean": round(float(v.mean()), 4), "sd": round(sd, 4),
            "min": round(float(v.min()), 4), "max": round(float(v.max()), 4)}


def refit_spread(runs: list[dict[str, pd.DataFrame]], c_index: dict, folds: pd.DataFrame,
                 seed: int) -> dict:
    """Per space, sex and score of the death table (``c_index``): the pooled cross-fitted C of
    every refit and their spread; per fold, the C of every refit and the fold's SD over refits
    (``fold_sd``), summarized as their mean (``mean_fold_sd``)."""
    out: dict = {"k": len(runs), "seeds": [refit_seed(seed, r) for r in range(len(runs))],
                 "c_index": {}, "spread": {}, "per_fold": {}}
    fold = folds.set_index("eid")["fold"]
    for space, by_sex in c_index.items():
        out["c_index"][space], out["spread"][space], out["per_fold"][space] = {}, {}, {}
        for sex, scores in by_sex.items():
            subs = [run[space].loc[run[space]["sex"] == sex] for run in runs]
            cs, sp, pf = {}, {}, {}
            for name in scores:
                cs[name] = [round(plain_c(sub, name), 4) for sub in subs]
                sp[name] = spread(cs[name])
                per = [[round(plain_c(sub.loc[fold.reindex(sub["eid"]).to_numpy() == k], name), 4)
                        for sub in subs] for k in sorted(fold.unique())]
                sds = [spread(p)["sd"] for p in per]
                pf[name] = {"c": per, "fold_sd": sds,
                            "mean_fold_sd": round(float(np.mean(sds)), 4)}
            out["c_index"][space][sex], out["spread"][space][sex] = cs, sp
            out["per_fold"][space][sex] = pf
    return out


#: the scores the stability rule judges (docs/METHODS.md, "SPHR's stability from fit to fit")
RULE_SCORES: tuple[str, ...] = ("sphr", "sphr_joint")


def refit_intervals(runs: list[dict[str, pd.DataFrame]], space: str, n_bootstrap: int,
                    seed: int) -> dict:
    """sex -> score -> the mean over refits of each refit's bootstrap 95% interval of its
    pooled C (the same resamples in every refit)."""
    per = [c_indices(run[space], [c for c in run[space].columns if c in LABELS],
                     n_bootstrap, seed)[0] for run in runs]
    out: dict = {}
    for sex in SEXES:
        names = set.intersection(*(set(p.get(sex, {})) for p in per))
        out[sex] = {n: [round(float(np.mean([p[sex][n][i] for p in per])), 4) for i in (1, 2)]
                    for n in sorted(names)}
    return out


def stability_rule(spread: dict, intervals: dict) -> dict:
    """The pre-registered pass/fail per sex and judged score: the mean bootstrap interval of
    the pooled C above 0.5 and the refit SD at most the raw Euclidean distance's."""
    out: dict = {}
    for sex in SEXES:
        raw_sd = spread[sex]["raw_euclidean"]["sd"]
        out[sex] = {}
        for name in RULE_SCORES:
            if name not in spread[sex] or name not in intervals.get(sex, {}):
                continue
            low = intervals[sex][name][0]
            sd = spread[sex][name]["sd"]
            out[sex][name] = {"mean_c": spread[sex][name]["mean"],
                              "interval": intervals[sex][name], "sd": sd, "raw_sd": raw_sd,
                              "above_half": low > 0.5,
                              "sd_at_most_raw": sd <= raw_sd, "passes": low > 0.5 and sd <= raw_sd}
    return out


def rule_markdown(rule: dict) -> str:
    lines = ["Stability rule (docs/METHODS.md): mean C over refits [mean bootstrap 95% interval], "
             "refit SD against the raw distance's; passes = interval above 0.5 and SD at most "
             "the raw distance's", "",
             "| sex | score | mean C [interval] | SD (raw's) | passes |",
             "| --- | --- | --- | --- | --- |"]
    for sex, by in rule.items():
        for name, r in by.items():
            lines.append(f"| {sex} | {LABELS.get(name, name)} | {r['mean_c']:.3f} "
                         f"[{r['interval'][0]:.3f}, {r['interval'][1]:.3f}] | {r['sd']:.3f} "
                         f"({r['raw_sd']:.3f}) | {'yes' if r['passes'] else 'no'} |")
    return "\n".join(lines) + "\n"


def refit_markdown(refits: dict) -> str:
    """The refit table: per score and sex, mean, SD and min-max of the pooled C over refits,
    and the mean over folds of each fold's SD over refits."""
    lines = []
    for space, by_sex in refits["spread"].items():
        lines += [f"Distance space `{space}`, {refits['k']} refits (seeds {refits['seeds']}): "
                  "pooled cross-fitted C for death, mean, SD [min-max] over refits; fold SD = "
                  "the mean over folds of one fold's SD over refits", "",
                  "| score | women | women fold SD | men | men fold SD |",
                  "| --- | --- | --- | --- | --- |"]
        def cells(s: str, key: str, by_sex: dict = by_sex, space: str = space) -> list[str]:
            v = by_sex[s][key]
            return [f"{v['mean']:.3f}, SD {v['sd']:.3f} [{v['min']:.3f}-{v['max']:.3f}]",
                    f"{refits['per_fold'][space][s][key]['mean_fold_sd']:.3f}"]

        lines += [*score_rows(by_sex, LABELS, cells), ""]
    return "\n".join(lines)
