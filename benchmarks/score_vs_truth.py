"""How each risk score follows the generator's true risk, on held-out people of a world run.

For a run made by ``benchmarks/worlds.py`` (synthetic export with its truth file): per sex and
method, the Spearman correlation of the calibrated score with the log true hazard of type 2
diabetes, cardiovascular disease and death, and with age; and how much of the true diabetes
hazard a ridge read-out recovers from the SPHR embedding vs the normalized raw features
(5-fold cross-validated on the test people). The last line is one JSON object.

    python benchmarks/score_vs_truth.py runs/worlds/nonlinear [runs/worlds/linear ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import cross_val_predict

from sphr.stats import spearman

HAZARDS = ("hazard_diabetes", "hazard_cardiovascular", "hazard_death")
META = ("eid", "label", "augmented", "age_years", "age_group", "sex")


def readout(X: np.ndarray, y: np.ndarray) -> float:
    pred = cross_val_predict(RidgeCV(alphas=np.logspace(-3, 3, 13)), X, y, cv=5)
    return spearman(pred, y)


def analyse(run: Path) -> dict:
    truth = pd.read_parquet(run / "export" / "ukb_synthetic.truth.parquet").set_index("eid")
    rg = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    rg = rg[(rg["mode"] == "calibrated") & (rg["partition"] == "test")]
    out: dict = {}
    for sex, sub in rg.groupby("sex"):
        res: dict = {"n": int(sub["eid"].nunique()), "spearman": {}}
        for method, g in sub.groupby("method"):
            t = truth.loc[g["eid"]]
            res["spearman"][method] = {h.removeprefix("hazard_"): round(float(
                spearman(g["score"], np.log(t[h]))), 3) for h in HAZARDS}
            res["spearman"][method]["age"] = round(spearman(g["score"], t["age"]), 3)
        sphr = pd.read_parquet(run / "train" / sex / "nplb" / "embeddings_test.parquet")
        raw = pd.read_parquet(run / "cohorts" / sex / "test.parquet")
        res["diabetes_hazard_readout"] = {}
        for name, frame in (("sphr", sphr), ("raw", raw)):
            X = frame[[c for c in frame.columns if c not in META]].to_numpy(float)
            y = np.log(truth.loc[frame["eid"], "hazard_diabetes"].to_numpy())
            res["diabetes_hazard_readout"][name] = {"spearman": round(readout(X, y), 3),
                                                    "dims": X.shape[1]}
        out[sex] = res
    return out


def main(argv: list[str]) -> int:
    result = {}
    for arg in argv or ["runs/worlds/nonlinear"]:
        run = Path(arg)
        result[run.name] = analyse(run)
        for sex, res in result[run.name].items():
            print(f"== {run.name}, {sex} (n {res['n']}): Spearman of the score with the log true "
                  "hazard (diabetes, cardiovascular, death) and with age")
            for m, v in sorted(res["spearman"].items(), key=lambda kv: -kv[1]["diabetes"]):
                print(f"   {m:26s} {v['diabetes']:+.3f} {v['cardiovascular']:+.3f} "
                      f"{v['death']:+.3f}   age {v['age']:+.3f}")
            print("   ridge read-out of the log true diabetes hazard:",
                  res["diabetes_hazard_readout"])
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
