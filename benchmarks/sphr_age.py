"""Why SPHR's risk score runs against age: each candidate cause measured on a world run.

In the world tables (docs/WORLDS.md, docs/WORLDS_PAPER.md) the SPHR score's time-dependent
AUROC for death and cardiovascular disease falls below 0.5 while every other distance stays
above it. This benchmark reads a finished run whose export has its truth file (the
generator's true hazards) and measures, on the held-out test people of each sex:

1. ``standardization``: Spearman of the SPHR score with age and the log true hazards, as
   the pipeline scores it, unstandardized (the raw distance), and standardized per age
   group as the pipeline does, but on the calibration BFH (people no fit has seen) instead
   of the training BFH.
2. ``reference``: the same with the age group's reference taken as the median of the
   embedded real training BFH instead of G(median profile); how far each age group's
   reference sits from the youngest group's; and the distance to that one fixed
   reference for everyone.
3. ``label_gap``: median distance of the unhealthy minus that of the BFH, under 50 and at
   60 or over, for SPHR, the raw features and Mahalanobis, and the same gap (in BFH SDs)
   for a linear discriminant of unhealthy vs BFH on the markers without age: does the
   cohort's label structure itself shrink the gap with age?
4. ``--variants SEX``: SPHR retrained (``--train-profile``, demo by default: minutes at
   500,000 participants) on variants of the run's cohort, each scored as in 2: as run,
   age held constant in the network's input, no augmentation (``--bfh-fold 0``), copula
   augmentation, anchor classes drawn uniformly (``--balanced-triplets``), positive and
   negative from the anchor's age group (``--age-matched-triplets``), and the last three
   together (``all_three``); ``--only`` picks some.

    python benchmarks/sphr_age.py RUN --truth TRUTH.parquet [--variants male]
        [--only as_run,age_matched_triplets] [--cohort-profile paper] [--train-profile demo]

Last line: one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

HAZARDS = ("hazard_diabetes", "hazard_cardiovascular", "hazard_death")
SEXES = ("female", "male")
VARIANTS = {"as_run": [], "age_constant": [], "no_augmentation": ["--bfh-fold", "0"],
            "copula_augmentation": ["--augment", "copula"],
            "balanced_triplets": ["--balanced-triplets"],
            "age_matched_triplets": ["--age-matched-triplets"],
            "all_three": ["--balanced-triplets", "--age-matched-triplets", "--augment", "copula"]}


def rho(a: np.ndarray, b: np.ndarray) -> float:
    return round(float(spearmanr(a, b)[0]), 3)


def associations(d: np.ndarray, age: np.ndarray, hazards: dict[str, np.ndarray]) -> dict:
    return {"age": rho(d, age), **{h.removeprefix("hazard_"): rho(d, v) for h, v in hazards.items()}}


def gap(d: np.ndarray, label: np.ndarray, age: np.ndarray) -> dict[str, float]:
    """Median distance of the unhealthy minus that of the BFH, by age band."""
    out = {}
    for band, m in (("under_50", age < 50), ("60_or_over", age >= 60)):
        out[band] = round(float(np.median(d[m & (label == 0)]) - np.median(d[m & (label == 2)])), 3)
    return out


def standardize(d: np.ndarray, groups: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The pipeline's age standardization (sphr.risk.calibration.AgeStandardizer, the risk
    stage's group size), fitted on the ``ref`` rows instead of the training BFH."""
    from sphr.risk.calibration import AgeStandardizer
    from sphr.risk.config import RiskConfig

    names = sorted(set(groups), key=lambda g: int(g.split("-")[0]))  # age order: neighbours pool
    std = AgeStandardizer(names, RiskConfig().standardize_min_group).fit(d[ref], groups[ref])
    return std.transform(d, groups)


def embedded_reference_distance(Z_train: np.ndarray, train: pd.DataFrame, Z: np.ndarray,
                                groups: np.ndarray) -> np.ndarray:
    """Distance to the median of the embedded real training BFH of the person's age group."""
    bfh = (train["label"].to_numpy() == 2) & ~train["augmented"].to_numpy(bool)
    g_train = train["age_group"].astype(str).to_numpy()
    d = np.empty(len(Z))
    for g in np.unique(groups):
        d[groups == g] = np.linalg.norm(Z[groups == g] - np.median(Z_train[bfh & (g_train == g)], 0),
                                        axis=1)
    return d


def analyse_run(run: Path, truth: pd.DataFrame) -> dict:
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    from sphr.artifacts import load_cohort

    rg = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    rg = rg[rg["mode"] == "calibrated"]
    out: dict = {}
    for sex in SEXES:
        res: dict = {}
        every = rg[(rg["sex"] == sex) & (rg["method"] == "sphr")].drop_duplicates("eid")
        part = every["partition"].to_numpy()
        test = part == "test"
        eids = every["eid"].to_numpy()[test]
        age = truth.loc[eids, "age"].to_numpy(float)
        hz = {h: np.log(truth.loc[eids, h].to_numpy(float)) for h in HAZARDS}
        d_all = every["distance"].to_numpy(float)
        groups_all = every["age_group"].astype(str).to_numpy()
        cal_bfh = (every["label"].to_numpy() == 2) & (part == "calibration")
        res["n_test"] = int(test.sum())
        res["standardization"] = {
            "as_scored": associations(every["score"].to_numpy(float)[test], age, hz),
            "unstandardized": associations(d_all[test], age, hz),
            "on_calibration_bfh": associations(
                standardize(d_all, groups_all, cal_bfh)[test], age, hz),
            "n_calibration_bfh": int(cal_bfh.sum())}
        tr = pd.read_parquet(run / "train" / sex / "nplb" / "embeddings_train.parquet")
        te = pd.read_parquet(run / "train" / sex / "nplb" / "embeddings_test.parquet")
        te = te.set_index("eid").loc[eids].reset_index()
        cols = [c for c in te.columns if c.startswith("e") and c[1:].isdigit()]
        d_emb = embedded_reference_distance(tr[cols].to_numpy(float), tr, te[cols].to_numpy(float),
                                            te["age_group"].astype(str).to_numpy())
        res["reference"] = {"median_of_embedded_bfh": associations(d_emb, age, hz)}
        # where the age groups' references sit: distance from the youngest group's, against
        # the unhealthy-BFH gap; and the distance to that one fixed reference for everyone
        refs = {g: np.asarray(st["reference"]) for g, st in json.loads(
            (run / "risk" / "model" / "risk_model.json").read_text())["sexes"][sex]["methods"]
            ["sphr"]["modes"]["calibrated"]["strata"].items()}
        first = next(iter(refs))
        res["reference"]["shift_from_youngest"] = {
            g: round(float(np.linalg.norm(r - refs[first])), 3) for g, r in refs.items()}
        res["reference"]["fixed_youngest"] = associations(
            np.linalg.norm(te[cols].to_numpy(float) - refs[first], axis=1), age, hz)
        label = te["label"].to_numpy()
        res["label_gap"] = {"sphr": gap(d_all[test], label, age)}
        for method in ("raw_euclidean", "mahalanobis"):
            r = rg[(rg["sex"] == sex) & (rg["method"] == method) & (rg["partition"] == "test")]
            r = r.drop_duplicates("eid").set_index("eid").loc[eids]
            res["label_gap"][method] = gap(r["distance"].to_numpy(float), label, age)
            res.setdefault("other_methods_as_scored", {})[method] = associations(
                r["score"].to_numpy(float), age, hz)
        cohort = load_cohort(run / "cohorts" / sex)
        feats = [f for f in cohort.features if f != "age"]
        real = cohort.train[~cohort.train["augmented"]]
        keep = real["label"].to_numpy() != 1
        lda = LinearDiscriminantAnalysis().fit(real[feats].to_numpy(float)[keep],
                                               (real["label"].to_numpy()[keep] == 0).astype(int))
        s = lda.decision_function(cohort.test.set_index("eid").loc[eids, feats].to_numpy(float))
        s = s / s[label == 2].std()
        res["label_gap"]["lda_markers_without_age_in_bfh_sd"] = gap(s, label, age)
        res["label_gap"]["lda_markers_without_age_associations"] = associations(s, age, hz)
        out[sex] = res
    return out


def variants(run: Path, truth: pd.DataFrame, sex: str, cohort_profile: str,
             train_profile: str, only: list[str] | None = None) -> dict:
    from sphr.artifacts import load_cohort
    from sphr.cohorts.triplets import read_triplets
    from sphr.train.config import TrainConfig
    from sphr.train.model_io import embed
    from sphr.train.trainer import train_sphr

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in VARIANTS.items():
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            if name in ("as_run", "age_constant"):
                cdir = run / "cohorts" / sex
            else:
                cdir = Path(tmp) / name
                subprocess.run([sys.executable, "-m", "sphr.cli", "-q", "cohorts",
                                str(run / "ingest" / "baseline.parquet"), "--out", str(cdir),
                                "--profile", cohort_profile, "--seed", "0", *flags], check=True)
                cdir = cdir / sex
            c = load_cohort(cdir)
            X, Xt = c.matrix("train").copy(), c.matrix("test").copy()
            if name == "age_constant":
                X[:, c.features.index("age")] = 0.0
                Xt[:, c.features.index("age")] = 0.0
            labels = c.train["label"].to_numpy(np.int64)
            res = train_sphr(X, read_triplets(c.directory / "triplets.npz", len(X)),
                             TrainConfig.profile(train_profile), labels=labels,
                             augmented=c.train["augmented"].to_numpy(bool))
            groups = c.test["age_group"].astype(str).to_numpy()
            d = embedded_reference_distance(embed(res.model, X), c.train, embed(res.model, Xt),
                                            groups)
            eids = c.test["eid"].to_numpy()
            age = truth.loc[eids, "age"].to_numpy(float)
            label = c.test["label"].to_numpy()
            hz = {h: np.log(truth.loc[eids, h].to_numpy(float)) for h in HAZARDS}
            out[name] = {**associations(d, age, hz),
                         "age_non_bfh": rho(d[label != 2], age[label != 2]),
                         "label_gap": gap(d, label, age),
                         "best_epoch": (res.validation or {}).get("best_epoch"),
                         "s": round(time.perf_counter() - t0, 1)}
            print(f"{sex} {name}: {out[name]}", file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--truth", type=Path, default=None,
                    help="truth file (default RUN/export/ukb_synthetic.truth.parquet)")
    ap.add_argument("--variants", choices=SEXES, default=None,
                    help="also retrain SPHR on cohort variants of this sex")
    ap.add_argument("--only", type=lambda v: v.split(","), default=None,
                    help=f"comma-separated variants (default all: {','.join(VARIANTS)})")
    ap.add_argument("--cohort-profile", default="paper", choices=("demo", "paper"))
    ap.add_argument("--train-profile", default="demo", choices=("demo", "paper"))
    args = ap.parse_args()
    truth = pd.read_parquet(args.truth or args.run / "export" / "ukb_synthetic.truth.parquet")
    truth = truth.set_index("eid")
    result = {"run": str(args.run), "analysis": analyse_run(args.run, truth)}
    if args.variants:
        result["variants"] = {"sex": args.variants, "cohort_profile": args.cohort_profile,
                              "train_profile": args.train_profile,
                              **variants(args.run, truth, args.variants, args.cohort_profile,
                                         args.train_profile, args.only)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
