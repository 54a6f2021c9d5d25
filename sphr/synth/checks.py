"""Does a synthetic cohort carry what docs/SYNTH.md promises? Measured, not assumed.

``python -m sphr.synth.checks --participants 20000 --seed 0 --world linear`` prints every
targeted within-sex Spearman correlation beside its documented range, LDL and cholesterol by
age decade in women, the treated diabetics below HbA1c 48 mmol/mol, the repeat visit and the
world's oracle ceilings.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd

from sphr.synth.params import HBA1C_DIAGNOSTIC, TARGET_CORRELATIONS

SEXES = {0: "female", 1: "male"}


def correlation_check(visits: pd.DataFrame) -> pd.DataFrame:
    """One row per targeted pair and sex: the baseline Spearman correlation and its range."""
    base = visits[visits["instance"] == 0]
    rows = []
    for t in TARGET_CORRELATIONS:
        for code, sex in SEXES.items():
            if t.sex not in (None, sex):
                continue
            pair = base.loc[base["sex"] == code, [t.a, t.b]].dropna()
            rho = float(pair.corr(method="spearman").iloc[0, 1])
            rows.append({"a": t.a, "b": t.b, "sex": sex, "spearman": round(rho, 3), "low": t.low,
                         "high": t.high, "target": t.target, "within": t.low <= rho <= t.high,
                         "n": len(pair)})
    return pd.DataFrame(rows)


def age_trend(visits: pd.DataFrame, marker: str, sex: int = 0) -> dict[str, float | dict]:
    """Mean by age decade and Spearman correlation with age, at baseline, for one sex."""
    base = visits[(visits["instance"] == 0) & (visits["sex"] == sex)][["age", marker]].dropna()
    decade = (base["age"] // 10 * 10).astype(int)
    return {"by_decade": base.groupby(decade)[marker].mean().round(3).to_dict(),
            "spearman_age": round(float(base.corr(method="spearman").iloc[0, 1]), 3)}


def treated_diabetes(visits: pd.DataFrame, truth: pd.DataFrame) -> dict[str, float]:
    """HbA1c of participants with diabetes at baseline: median and share below 48 mmol/mol."""
    base = visits[visits["instance"] == 0].set_index("eid")
    dm = truth.loc[truth["onset_years_diabetes"] == 0, "eid"]
    h = base.loc[dm, "hba1c"].dropna().to_numpy()
    return {"n": int(h.size), "median": round(float(np.median(h)), 1),
            "share_below_48": round(float((h < HBA1C_DIAGNOSTIC).mean()), 3)}


def repeat_visit(visits: pd.DataFrame, truth: pd.DataFrame) -> dict[str, object]:
    rep = visits[visits["instance"] == 1]
    frailty = truth.set_index("eid")["frailty"]
    return {"share": round(len(rep) / int((visits["instance"] == 0).sum()), 4),
            "first_date": str(rep["assessment_date"].min().date()),
            "last_date": str(rep["assessment_date"].max().date()),
            "frailty_repeat_minus_all": round(float(frailty.loc[rep["eid"]].mean()
                                                    - frailty.mean()), 3)}


def main(argv: list[str] | None = None) -> int:
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.config import WORLDS, SynthConfig

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--participants", type=int, default=SynthConfig.participants)
    ap.add_argument("--seed", type=int, default=SynthConfig.seed)
    ap.add_argument("--world", default=SynthConfig.world, choices=WORLDS)
    args = ap.parse_args(argv)
    cohort = generate_cohort(args.participants, args.seed, world=args.world)
    table = correlation_check(cohort.visits)
    with pd.option_context("display.width", 140, "display.max_rows", 200):
        print(table.to_string(index=False))
    print(f"all within range: {bool(table['within'].all())}")
    for marker in ("ldl", "cholesterol"):
        print(f"women {marker}: {json.dumps(age_trend(cohort.visits, marker))}")
    print(f"treated diabetes: {json.dumps(treated_diabetes(cohort.visits, cohort.truth))}")
    print(f"repeat visit: {json.dumps(repeat_visit(cohort.visits, cohort.truth))}")
    print(f"oracle AUROC ({args.world}): "
          f"{json.dumps(cohort.truth.attrs['world']['oracle_auroc'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
