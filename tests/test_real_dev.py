"""Real people: the NHANES development set through the stages, then ``sphr score`` on a held-out
slice (sphr/data/real/README.md). The distance methods that need no network, PhenoAge and the
supervised comparators, fitted on 80% of the set and applied to the other 20%."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sphr.risk.phenoage import MARKERS

DATA = Path(__file__).resolve().parents[1] / "sphr" / "data" / "real"
EXPORT, OUTCOMES = DATA / "nhanes_ukb_dev.csv", DATA / "nhanes_ukb_outcomes.json"
METHODS = ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation", "p0_euclidean",
           "phenoage", "supervised_xgboost")


def split(export: Path, keep: set[int], out: Path) -> Path:
    with open(export, "rb") as src, open(out, "wb") as dst:
        dst.write(src.readline())
        for line in src:
            if int(line.split(b",", 1)[0]) in keep:
                dst.write(line)
    return out


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """RUN fitted on the eids not ending in 0 or 5, and those 20% as a new export."""
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.data.ingest import run_ingest
    from sphr.data.outcomes import load_outcome_config
    from sphr.risk.config import RiskConfig
    from sphr.risk.pipeline import run_risk

    root = tmp_path_factory.mktemp("real")
    eids = pd.read_csv(EXPORT, usecols=["eid"])["eid"].to_numpy()
    held = set(eids[eids % 5 == 0].tolist())
    train_csv = split(EXPORT, set(eids.tolist()) - held, root / "train.csv")
    held_csv = split(EXPORT, held, root / "heldout.csv")
    run = root / "run"
    run_ingest(train_csv, run / "ingest", outcome_config=load_outcome_config(OUTCOMES))
    run_cohorts(run / "ingest" / "baseline.parquet", run / "cohorts",
                CohortConfig(n_triplets=1_000, seed=0, folds=2))
    run_risk(run, run / "risk", RiskConfig(methods=METHODS, distance_space="marker",
                                           n_bootstrap=20, n_bootstrap_linked=20))
    return run, held_csv


def test_phenoage_is_scored_where_crp_falls_below_the_completeness_threshold(fitted):
    from sphr.artifacts import load_cohort

    run, _ = fitted
    report = json.loads((run / "risk" / "risk_report.json").read_text())
    rows = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    baseline = pd.read_parquet(run / "ingest" / "baseline.parquet").set_index("eid")
    for sex in ("female", "male"):
        cohort = load_cohort(run / "cohorts" / sex)
        assert "crp" not in cohort.features  # dropped by the completeness filter...
        people = rows.loc[(rows["sex"] == sex) & (rows["method"] == "raw_euclidean")
                          & (rows["mode"] == "calibrated"), "eid"]
        crp = baseline.loc[people, "crp"].notna()
        measured = baseline.loc[people, list(MARKERS)].notna().all(axis=1)
        pheno = rows.loc[(rows["sex"] == sex) & (rows["method"] == "phenoage"), "eid"]
        # ...but PhenoAge scores exactly the cohort's people with a CRP and the other eight
        # markers as measured (the cohort fills missing markers; PhenoAge reads none filled),
        # and counts the others with the reason
        assert set(pheno) == set(measured.index[measured])
        unscored = report["unscored"][f"{sex}/phenoage"]
        assert (unscored["n"], unscored["of"]) == (int((~measured).sum()), len(people))
        assert f"crp ({(~crp).sum()})" in unscored["reason"]
        assert 0.5 < crp.mean() < 0.85


def test_phenoage_agrees_with_bioage_on_real_people(fitted):
    """PhenoAge from the UKB-unit export against the truth file's PhenoAge of the same people.

    The truth file's values (from BioAge's NHANES IV table) take ln(1 + CRP) with CRP in
    mg/dL where Levine's formula, and ours, take ln(CRP): with that one term swapped ours
    reproduces them to 0.002 years (so every unit conversion of the export is right);
    as published they differ by 1.8 years at the median, growing as CRP falls."""
    from sphr.risk.phenoage import AGE_RATE, COEFFICIENTS, CRP_FLOOR_MG_L, REQUIRED, phenoage

    run, _ = fitted
    truth = pd.read_parquet(DATA / "nhanes_ukb_dev_truth.parquet").set_index("eid")
    base = pd.read_parquet(run / "ingest" / "baseline.parquet").set_index("eid")
    both = base.index.intersection(truth.index[truth["phenoage"].notna()])
    ours = phenoage(base.loc[both, list(REQUIRED)])
    crp_mg_dl = base.loc[both, "crp"].to_numpy(float) / 10
    per_ln = COEFFICIENTS["crp"] / AGE_RATE
    swapped = ours + per_ln * (np.log1p(crp_mg_dl)
                               - np.log(np.maximum(crp_mg_dl, CRP_FLOOR_MG_L / 10)))
    expected = truth.loc[both, "phenoage"].to_numpy()
    assert np.isfinite(ours).all() and len(both) > 2000
    assert np.abs(swapped - expected).max() < 0.005
    assert np.median(ours - expected) < -1.0  # the published formula: a real difference


def test_supervised_comparator_is_fitted_on_linked_deaths_and_judged_on_them(fitted):
    run, _ = fitted
    spec = json.loads((run / "risk" / "model" / "risk_model.json").read_text())
    for sex in ("female", "male"):
        entry = spec["sexes"][sex]["methods"]["supervised_death"]
        assert entry["uses_outcome"] and entry["outcome"] == "death"
        assert entry["supervised"]["objective"] == "survival:cox"
        assert len(entry["supervised"]["files"]) == 5 and entry["training_events"] >= 50
        assert "no follow-up" in spec["skipped"][f"{sex}/supervised_xgboost"] or \
            "repeat visit" in spec["skipped"][f"{sex}/supervised_xgboost"]
    linked = pd.read_parquet(run / "risk" / "linked_discrimination.parquet")
    judged = linked.loc[linked["method"] == "supervised_death", "outcome"]
    assert set(judged) == {"death"}
    death = linked.loc[linked["outcome"] == "death"].set_index(["sex", "method"])
    for sex in ("female", "male"):
        assert {"age", "phenoage", "supervised_death", "raw_euclidean"} <= \
            set(death.loc[sex].index)
        # judged on the same held-out people as the distances (22-36 deaths per sex here:
        # too few to ask more of a C-index than that it is estimated)
        sup, raw = death.loc[(sex, "supervised_death")], death.loc[(sex, "raw_euclidean")]
        assert np.isfinite(sup["c_index"]) and (sup["n"], sup["events"]) == \
            (raw["n"], raw["events"])


def test_score_applies_every_method_to_a_held_out_slice(fitted, tmp_path):
    from sphr.risk.serve.apply import run_score

    run, held_csv = fitted
    report = run_score(run, held_csv, tmp_path / "scored")
    scored = pd.read_parquet(tmp_path / "scored" / "risk_groups.parquet")
    n_held = len(pd.read_csv(held_csv, usecols=["eid"]))
    people = scored.loc[scored["method"] == "raw_euclidean", "eid"].unique()
    unscorable = pd.read_csv(tmp_path / "scored" / "unscorable.csv")
    assert len(people) + len(unscorable) == n_held and len(unscorable) < 0.02 * n_held
    assert {"phenoage", "supervised_death", "mahalanobis"} <= set(scored["method"])
    from sphr.data.fields import BY_NAME
    from sphr.risk.phenoage import MARKERS

    columns = [f"{BY_NAME[m].id}-0.0" for m in MARKERS]
    markers = pd.read_csv(held_csv, usecols=["eid", *columns]).set_index("eid")
    complete = markers.notna().all(axis=1)
    for sex in ("female", "male"):
        sub = scored[scored["sex"] == sex]
        sup = sub.loc[sub["method"] == "supervised_death", "eid"]
        assert set(sup) == set(sub.loc[sub["method"] == "raw_euclidean", "eid"])
        pheno = set(sub.loc[sub["method"] == "phenoage", "eid"])
        everyone = set(sub["eid"])
        missing = {e for e in everyone if not complete[e]}
        assert pheno == everyone - missing
        assert report["sexes"][sex]["not_scored"]["phenoage"] == len(missing)
    # the new people are judged the way the fit's test people are: the same model files
    assert scored["group"].isin(("Normal", "Lower Risk", "Higher Risk")).all()


def test_marker_scaler_sees_only_real_training_rows(fitted):
    """The marker space of the risk stage: changing a calibration or test person's raw
    values, or an augmented row's, moves nothing fitted (the scaler the risk model keeps)."""
    from sphr.risk.config import RiskConfig
    from sphr.risk.fit import read_inputs
    from sphr.risk.model import RiskModel

    run, _ = fitted
    config = RiskConfig(methods=("raw_euclidean",), modes=("calibrated",), sexes=("female",))

    def scaler(run_dir: Path) -> dict:
        model = RiskModel(config).fit([read_inputs(run_dir, "female", config)])
        return model.sexes_["female"].marker_scaler_.to_dict()

    before = scaler(run)
    cdir = run / "cohorts" / "female"
    moved_run = run.parent / "moved_run"
    moved = moved_run / "cohorts" / "female"
    moved.mkdir(parents=True)
    for f in (p for p in cdir.iterdir() if p.is_file()):
        (moved / f.name).write_bytes(f.read_bytes())
    features = json.loads((cdir / "features.json").read_text())
    for part in ("test", "calibration"):
        raw = pd.read_parquet(moved / f"{part}_raw.parquet")
        raw[features] = raw[features] * 7.0
        raw.to_parquet(moved / f"{part}_raw.parquet")
    assert scaler(moved_run) == before
    raw = pd.read_parquet(moved / "train_raw.parquet")
    real = ~raw["augmented"].to_numpy(bool)
    raw.loc[real, features] = raw.loc[real, features] * 7.0
    raw.to_parquet(moved / "train_raw.parquet")
    assert scaler(moved_run) != before


def test_cox_comparator_never_reads_a_test_outcome_nor_its_own():
    from sphr.risk.supervised import SupervisedScore

    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 4))
    t = rng.exponential(np.exp(-X[:, 0]))
    event = rng.random(n) < 0.6
    label = np.where(event, t, -t)
    train = np.arange(n) < 450
    base = SupervisedScore("survival:cox", 5, 0).fit_score(X, label, train)
    flipped = label.copy()
    flipped[~train] *= -1  # test outcomes never reach any score
    assert np.array_equal(base, SupervisedScore("survival:cox", 5, 0).fit_score(X, flipped, train))
    own = label.copy()
    own[7] = -own[7]  # a training person's own outcome does not reach their own score
    assert SupervisedScore("survival:cox", 5, 0).fit_score(X, own, train)[7] == \
        pytest.approx(base[7])
    assert np.corrcoef(base[~train], X[~train, 0])[0, 1] > 0.5
