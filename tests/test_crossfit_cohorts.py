"""The cross-fit's folds and fold cohorts (docs/METHODS.md, "Cross-fitting", "Missing
markers"): balanced stratified folds, no fold's people in its own fit, imputation from the
fit's own rows, and everyone with a stated reason when left out."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sphr.cohorts import CohortConfig, build_cohorts, run_cohorts
from sphr.cohorts.build import impute_training_medians
from sphr.cohorts.folds import assign_folds
from sphr.cohorts.normalize import QuantileNormalizer, training_medians
from sphr.errors import ConfigError
from sphr.layout import fold_count, fold_dir


@pytest.fixture(scope="module")
def baseline(ingest_dir):
    return pd.read_parquet(ingest_dir / "baseline.parquet")


@pytest.fixture(scope="module")
def cohorts(baseline):
    return build_cohorts(baseline, CohortConfig(n_triplets=500, seed=3, folds=4, impute=True))


def test_folds_are_balanced_within_every_stratum():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 503)
    groups = rng.choice(["36-45", "46-50", "51-55"], 503)
    fold = assign_folds(labels, groups, 5, np.random.default_rng(1))
    assert set(fold) == set(range(5))
    assert np.ptp(np.bincount(fold)) <= 1
    for c in range(3):
        for g in ("36-45", "46-50", "51-55"):
            counts = np.bincount(fold[(labels == c) & (groups == g)], minlength=5)
            assert np.ptp(counts) <= 1
    again = assign_folds(labels, groups, 5, np.random.default_rng(1))
    assert np.array_equal(fold, again)
    assert not np.array_equal(fold, assign_folds(labels, groups, 5, np.random.default_rng(2)))


def test_folds_refuse_fewer_than_two():
    with pytest.raises(ConfigError, match="at least 2"):
        assign_folds(np.zeros(10), np.array(["a"] * 10), 1, np.random.default_rng(0))


def test_no_fold_reaches_its_own_fit(cohorts):
    for cohort in cohorts[0].values():
        everyone = np.concatenate([
            cohort.train.loc[~cohort.train["augmented"], "eid"], cohort.calibration["eid"],
            cohort.test["eid"]])
        tested = []
        for fold in cohort.folds:
            held = set(fold.test["eid"])
            fitted = set(fold.train.loc[~fold.train["augmented"], "eid"]) | \
                set(fold.calibration["eid"])
            assert not held & fitted
            assert held | fitted == set(everyone)
            tested.extend(held)
        # every participant is scored in exactly one fold
        assert sorted(tested) == sorted(everyone.tolist())


def test_fold_normalizer_and_imputation_use_the_fold_training_rows(cohorts):
    cohort = cohorts[0]["female"]
    fold = cohort.folds[1]
    real = ~fold.train_raw["augmented"].to_numpy(bool)
    train = fold.train_raw.loc[real].reset_index(drop=True)
    raw = train[fold.features].to_numpy(float)
    # the normalizer saw each marker where it was measured, not the filled values
    filled = fold.imputed.set_index("eid")["imputed"].reindex(train["eid"]).fillna("")
    for j, f in enumerate(fold.features):
        raw[[f in names.split(";") for names in filled], j] = np.nan
    refit = type(fold.normalizer)(fold.normalizer.n_quantiles).fit(
        raw, features=fold.features, observed_only=True)
    assert np.allclose(refit.quantiles_, fold.normalizer.quantiles_)
    # the imputed values are the fold's training medians, not the cohort's
    assert fold.report["imputed"]["participants"] > 0


def test_imputation_reads_only_the_rows_it_fits_on():
    raw = np.array([[1.0, 5.0], [3.0, np.nan], [2.0, 9.0], [100.0, 7.0], [np.nan, 9.0]])
    fit_rows = np.array([0, 1, 2])
    norm = QuantileNormalizer().fit(raw[fit_rows], observed_only=True)
    filled = impute_training_medians(raw, norm)
    assert filled[4, 0] == 2.0  # the median of rows 0-2, not row 3's 100
    assert filled[1, 1] == 7.0 and np.isnan(raw).sum() == 2
    # the value sphr score fills in
    assert np.allclose(filled[[4, 1], [0, 1]], training_medians(norm))
    moved = raw.copy()
    moved[3, 0] = -1e6  # a row the fit does not see changes nobody's filled value
    again = impute_training_medians(moved, QuantileNormalizer().fit(moved[fit_rows],
                                                                    observed_only=True))
    assert np.array_equal(again[[1, 4]], filled[[1, 4]])


def test_everyone_left_out_has_a_reason(baseline):
    _, report = build_cohorts(baseline, CohortConfig(n_triplets=500, seed=3, folds=0,
                                                     impute=True))
    assert report["kept"] + sum(report["left_out"].values()) == report["participants"]
    assert report["kept"] > report["complete_cases"]
    _, complete = build_cohorts(baseline, CohortConfig(n_triplets=500, seed=3, folds=0,
                                                       impute=False))
    assert complete["kept"] <= complete["complete_cases"]
    assert complete["left_out"]["too_many_missing"] > 0


def test_fold_folders_are_written(ingest_dir, tmp_path):
    run_cohorts(ingest_dir / "baseline.parquet", tmp_path,
                CohortConfig(n_triplets=500, seed=3, folds=3))
    d = tmp_path / "female"
    assert fold_count(d) == 3
    folds = pd.read_parquet(d / "folds.parquet")
    assert sorted(folds["fold"].unique()) == [0, 1, 2]
    for k in range(3):
        test = pd.read_parquet(fold_dir(d, k) / "test.parquet")
        assert set(test["eid"]) == set(folds.loc[folds["fold"] == k, "eid"])
        report = json.loads((fold_dir(d, k) / "cohort_report.json").read_text())
        assert report["fold"] == {"fold": k, "folds": 3}


def test_the_stage_commands_cross_fit_as_the_main_command_does(ingest_dir, tmp_path):
    """`sphr cohorts` (folds by default), `sphr train`, `sphr baselines`, `sphr risk`: the
    train and baselines commands fit the fold models beside the single split's, so the risk
    stage cross-fits from the stage commands as from the main command."""
    import shutil

    from sphr.cli import main

    run = tmp_path / "run"
    shutil.copytree(ingest_dir, run / "ingest")
    assert main(["cohorts", str(run / "ingest" / "baseline.parquet"), "--out",
                 str(run / "cohorts"), "--folds", "2", "--triplets", "500"]) == 0
    cohort = run / "cohorts" / "female"
    assert main(["train", str(cohort), "--epochs", "2", "--device", "cpu"]) == 0
    assert sorted(p.name for p in (run / "train" / "female" / "folds").iterdir()) == \
        ["fold0", "fold1"]
    assert main(["baselines", str(cohort), "--out", str(run / "baselines" / "female"),
                 "--representations", "raw,deep_patient", "--dp-epochs", "2",
                 "--device", "cpu"]) == 0
    assert (run / "baselines" / "folds" / "female" / "fold1" / "deep_patient").is_dir()
    assert main(["risk", str(run), "--sexes", "female", "--methods",
                 "raw_euclidean,deep_patient,sphr", "--bootstrap", "20",
                 "--n-bootstrap-linked", "20", "--device", "cpu"]) == 0
    report = json.loads((run / "risk" / "female" / "risk_report.json").read_text())
    assert report["design"]["validation"] == "cross-fit"
    rows = pd.read_parquet(run / "risk" / "female" / "risk_groups.parquet")
    assert {"raw_euclidean", "deep_patient", "sphr"} <= set(rows["method"])
    assert rows["fold"].notna().all()
