"""Why SPHR's risk score runs against age: each candidate cause measured on a world run.

In the world tables (docs/notes/WORLDS.md, docs/notes/WORLDS_PAPER.md) the SPHR score's
time-dependent AUROC for death and cardiovascular disease falls below 0.5 while every other distance
stays above it. This benchmark reads a finished run whose export has its truth file (the
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

Without true hazards (real people: the NHANES development set's truth file has ``eid,
age, died, months``) the log-hazard correlations are left out; every score is then judged
on observed death instead: Harrell's C for all-cause death over the whole follow-up
(``death_c``, from RUN/ingest/outcomes.parquet, which every run has; a participant-bootstrap
95% interval for the score as scored), beside the Spearman correlation with age. The
unhealthy-BFH gaps give their counts and a bootstrap interval (a development set's test
partition holds ~15 BFH aged 60 or over per sex).

``--crossfit``: real people scored out of sample (``benchmarks/real_nhanes.py``'s
``crossfit_scores_*.parquet``): per score, Spearman with age, C for death with its interval
and C within 10-year age bands.

    python benchmarks/sphr_age.py RUN --truth TRUTH.parquet [--variants male]
        [--only as_run,age_matched_triplets] [--cohort-profile paper] [--train-profile demo]
        [--crossfit crossfit_scores_quantile.parquet]

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

from sphr.health_distance import health_distance, health_reference
from sphr.stats import spearman

HAZARDS = ("hazard_diabetes", "hazard_cardiovascular", "hazard_death")
SEXES = ("female", "male")
VARIANTS = {"as_run": [], "age_constant": [], "no_augmentation": ["--bfh-fold", "0"],
            "copula_augmentation": ["--augment", "copula"],
            "balanced_triplets": ["--balanced-triplets"],
            "age_matched_triplets": ["--age-matched-triplets"],
            "all_three": ["--balanced-triplets", "--age-matched-triplets", "--augment", "copula"]}


def rho(a: np.ndarray, b: np.ndarray) -> float:
    return round(spearman(a, b), 3)


def associations(d: np.ndarray, age: np.ndarray, hazards: dict[str, np.ndarray],
                 death: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """Spearman with age and each log true hazard; with ``death`` (time, event), Harrell's C
    of ``d`` for observed death (larger = earlier death)."""
    from sphr.survival import c_index

    out = {"age": rho(d, age), **{h.removeprefix("hazard_"): rho(d, v) for h, v in hazards.items()}}
    if death is not None:
        out["death_c"] = round(c_index(death[0], death[1], d), 3)
    return out


def c_index_interval(time: np.ndarray, event: np.ndarray, score: np.ndarray,
                     n_bootstrap: int = 500, seed: int = 0) -> list[float]:
    """[C, low, high]: Harrell's C for death with a participant-bootstrap 95% interval."""
    from sphr.survival import c_index_weighted, resample_counts

    w = resample_counts(np.random.default_rng(seed), len(time), n_bootstrap)
    boot = c_index_weighted(time, event, score, w)
    point = c_index_weighted(time, event, score, np.ones((1, len(time))))[0]
    lo, hi = np.nanpercentile(boot, [2.5, 97.5])
    return [round(float(v), 3) for v in (point, lo, hi)]


def death_outcome(run: Path, eids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(years to death or censoring, died) of ``eids`` from the run's linked outcomes."""
    path = run / "ingest" / "outcomes.parquet"
    if not path.exists():
        return None
    o = pd.read_parquet(path)
    o = o[o["outcome"] == "death"].drop_duplicates("eid").set_index("eid").reindex(eids)
    if o["time_years"].isna().any():
        return None
    return o["time_years"].to_numpy(float), o["event"].to_numpy(bool)


def gap(d: np.ndarray, label: np.ndarray, age: np.ndarray, n_bootstrap: int = 0,
        seed: int = 0) -> dict:
    """Median distance of the unhealthy minus that of the BFH, by age band; with
    ``n_bootstrap``, also the counts (unhealthy, BFH) and a bootstrap 95% interval."""
    rng = np.random.default_rng(seed)
    out: dict = {}
    for band, m in (("under_50", age < 50), ("60_or_over", age >= 60)):
        u, b = d[m & (label == 0)], d[m & (label == 2)]
        out[band] = round(float(np.median(u) - np.median(b)), 3)
        if n_bootstrap:
            boot = [np.median(rng.choice(u, u.size)) - np.median(rng.choice(b, b.size))
                    for _ in range(n_bootstrap)]
            out[f"{band}_ci"] = [round(float(v), 3) for v in np.percentile(boot, [2.5, 97.5])]
            out[f"{band}_n"] = [int(u.size), int(b.size)]
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
    centres = {g: health_reference(Z_train[bfh & (g_train == g)], reference="median_of_embedded")
               for g in np.unique(groups)}
    return health_distance(Z, centres, groups)


def _hazards(truth: pd.DataFrame, eids: np.ndarray) -> dict[str, np.ndarray]:
    """Log true hazards of ``eids``; none for a truth file without them (real people)."""
    return {h: np.log(truth.loc[eids, h].to_numpy(float)) for h in HAZARDS if h in truth.columns}


def _reference(run: Path, sex: str, eids: np.ndarray, assoc) -> tuple[dict, pd.DataFrame]:
    """The embedded-BFH reference, where the age groups' references sit (distance from the
    youngest group's, against the unhealthy-BFH gap) and the distance to that one fixed
    reference for everyone; also the test embeddings (rows in ``eids`` order)."""
    tr = pd.read_parquet(run / "train" / sex / "nplb" / "embeddings_train.parquet")
    te = pd.read_parquet(run / "train" / sex / "nplb" / "embeddings_test.parquet")
    te = te.set_index("eid").loc[eids].reset_index()
    cols = [c for c in te.columns if c.startswith("e") and c[1:].isdigit()]
    d_emb = embedded_reference_distance(tr[cols].to_numpy(float), tr, te[cols].to_numpy(float),
                                        te["age_group"].astype(str).to_numpy())
    res = {"median_of_embedded_bfh": assoc(d_emb)}
    refs = {g: np.asarray(st["reference"]) for g, st in json.loads(
        (run / "risk" / "model" / "risk_model.json").read_text())["sexes"][sex]["methods"]
        ["sphr"]["modes"]["calibrated"]["strata"].items()}
    first = next(iter(refs))
    res["shift_from_youngest"] = {
        g: round(float(np.linalg.norm(r - refs[first])), 3) for g, r in refs.items()}
    res["fixed_youngest"] = assoc(health_distance(te[cols].to_numpy(float), refs[first]))
    return res, te


def _lda_gap(run: Path, sex: str, eids: np.ndarray, label: np.ndarray, age: np.ndarray,
             assoc) -> dict:
    """A linear discriminant of unhealthy vs BFH on the markers without age: its gap (in
    BFH SDs) by age band and its associations."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    from sphr.artifacts import load_cohort

    cohort = load_cohort(run / "cohorts" / sex)
    feats = [f for f in cohort.features if f != "age"]
    real = cohort.train[~cohort.train["augmented"]]
    keep = real["label"].to_numpy() != 1
    lda = LinearDiscriminantAnalysis().fit(real[feats].to_numpy(float)[keep],
                                           (real["label"].to_numpy()[keep] == 0).astype(int))
    s = lda.decision_function(cohort.test.set_index("eid").loc[eids, feats].to_numpy(float))
    s = s / s[label == 2].std()
    return {"lda_markers_without_age_in_bfh_sd": gap(s, label, age),
            "lda_markers_without_age_associations": assoc(s)}


def analyse_sex(run: Path, truth: pd.DataFrame, rg: pd.DataFrame, sex: str) -> dict:
    """Every figure of one sex on its held-out test people (module docstring, 1-3)."""
    every = rg[(rg["sex"] == sex) & (rg["method"] == "sphr")].drop_duplicates("eid")
    part = every["partition"].to_numpy()
    test = part == "test"
    eids = every["eid"].to_numpy()[test]
    age = truth.loc[eids, "age"].to_numpy(float)
    death = death_outcome(run, eids)
    hz = _hazards(truth, eids)

    def assoc(d: np.ndarray) -> dict:
        return associations(d, age, hz, death)

    d_all = every["distance"].to_numpy(float)
    groups_all = every["age_group"].astype(str).to_numpy()
    cal_bfh = (every["label"].to_numpy() == 2) & (part == "calibration")
    score = every["score"].to_numpy(float)[test]
    res: dict = {"n_test": int(test.sum()),
                 "deaths_test": None if death is None else int(death[1].sum())}
    res["standardization"] = {
        "as_scored": assoc(score), "unstandardized": assoc(d_all[test]),
        "on_calibration_bfh": assoc(standardize(d_all, groups_all, cal_bfh)[test]),
        "n_calibration_bfh": int(cal_bfh.sum())}
    res["reference"], te = _reference(run, sex, eids, assoc)
    label = te["label"].to_numpy()
    res["label_gap"] = {"sphr": gap(d_all[test], label, age, n_bootstrap=1000)}
    scores = {"sphr_as_scored": score, "age": age}
    for method in ("raw_euclidean", "mahalanobis"):
        r = rg[(rg["sex"] == sex) & (rg["method"] == method) & (rg["partition"] == "test")]
        r = r.drop_duplicates("eid").set_index("eid").loc[eids]
        res["label_gap"][method] = gap(r["distance"].to_numpy(float), label, age, n_bootstrap=1000)
        res.setdefault("other_methods_as_scored", {})[method] = assoc(r["score"].to_numpy(float))
        res.setdefault("other_methods_unstandardized", {})[method] = assoc(
            r["distance"].to_numpy(float))
        scores[method] = r["score"].to_numpy(float)
    res["label_gap"].update(_lda_gap(run, sex, eids, label, age, assoc))
    if "death" in {h.removeprefix("hazard_") for h in hz}:
        # the true death hazard with its (linear) age trend removed: what an age-free score
        # could reach at best
        h = hz["hazard_death"]
        scores["true_hazard_age_free"] = h - np.polyval(np.polyfit(age, h, 1), age)
    if death is not None:
        res["death_c_interval"] = {k: c_index_interval(*death, v) for k, v in scores.items()}
    return res


def analyse_run(run: Path, truth: pd.DataFrame) -> dict:
    rg = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    rg = rg[rg["mode"] == "calibrated"]
    return {sex: analyse_sex(run, truth, rg, sex) for sex in SEXES}


def crossfit_associations(path: Path, methods: tuple[str, ...] = (
        "sphr", "sphr_joint", "raw_euclidean", "mahalanobis", "deep_patient", "age"),
        bands: tuple[tuple[int, int], ...] = ((40, 49), (50, 59), (60, 73))) -> dict:
    """Real people scored out of sample (``benchmarks/real_nhanes.py``'s
    crossfit_scores_*.parquet: eid, sex, age, time_years, died, one column per score): per
    sex and score, Spearman with age, Harrell's C for death with a bootstrap interval, and C
    within each age band (does the score rank death among people of one age?)."""
    from sphr.survival import c_index

    scores = pd.read_parquet(path)
    out: dict = {}
    for sex in SEXES:
        q = scores[scores["sex"] == sex]
        res: dict = {"n": len(q), "deaths": int(q["died"].sum())}
        for m in (m for m in methods if m in q.columns):
            ok = q[m].notna().to_numpy()
            x, age = q[m].to_numpy(float)[ok], q["age"].to_numpy(float)[ok]
            t, e = q["time_years"].to_numpy(float)[ok], q["died"].to_numpy(bool)[ok]
            res[m] = {"n": int(ok.sum()), "age": rho(x, age), "death_c": c_index_interval(t, e, x),
                      "death_c_within_age": {f"{lo}-{hi}": round(c_index(
                          t[(age >= lo) & (age <= hi)], e[(age >= lo) & (age <= hi)],
                          x[(age >= lo) & (age <= hi)]), 3) for lo, hi in bands}}
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
            hz = _hazards(truth, eids)
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
    ap.add_argument("--crossfit", type=Path, default=None,
                    help="also: benchmarks/real_nhanes.py's crossfit_scores_*.parquet")
    args = ap.parse_args()
    truth = pd.read_parquet(args.truth or args.run / "export" / "ukb_synthetic.truth.parquet")
    truth = truth.set_index("eid")
    result = {"run": str(args.run), "analysis": analyse_run(args.run, truth)}
    if args.crossfit:
        result["crossfit"] = {"path": str(args.crossfit),
                              **crossfit_associations(args.crossfit)}
    if args.variants:
        result["variants"] = {"sex": args.variants, "cohort_profile": args.cohort_profile,
                              "train_profile": args.train_profile,
                              **variants(args.run, truth, args.variants, args.cohort_profile,
                                         args.train_profile, args.only)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
