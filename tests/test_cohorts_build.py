"""The cohort step end to end on the synthetic export: contract files, no leakage, fallbacks."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sphr.cohorts import CohortConfig, QuantileNormalizer, build_cohorts, run_cohorts
from sphr.errors import InputError
from sphr.labels import BONA_FIDE_HEALTHY, UNHEALTHY
from sphr.risk.population import observed_values


@pytest.fixture(scope="module")
def baseline(ingest_dir):
    return pd.read_parquet(ingest_dir / "baseline.parquet")


def test_contract_files(cohorts_dir):
    assert (cohorts_dir / "cohort_report.json").exists()
    for sex in ("female", "male"):
        d = cohorts_dir / sex
        assert {p.name for p in d.iterdir()} == {
            "train.parquet", "test.parquet", "train_raw.parquet", "test_raw.parquet",
            "calibration.parquet", "calibration_raw.parquet", "triplets.npz", "normalizer.json",
            "features.json", "cohort_report.json", "imputed.parquet"}
        features = json.loads((d / "features.json").read_text())
        train = pd.read_parquet(d / "train.parquet")
        test = pd.read_parquet(d / "test.parquet")
        assert list(train.columns) == ["eid", "age_years", "age_group", "label", "augmented",
                                       *features]
        assert train[features].dtypes.eq(np.float32).all()
        triplets = np.load(d / "triplets.npz")["triplets"]
        assert triplets.shape == (5_000, 3) and triplets.max() < len(train)
        lab = train["label"].to_numpy()
        assert (lab[triplets[:, 0]] == lab[triplets[:, 1]]).all()
        assert (lab[triplets[:, 0]] != lab[triplets[:, 2]]).all()
        # augmented rows: training only, negative ids, BFH only
        assert not test["augmented"].any() and (test["eid"] > 0).all()
        aug = train[train["augmented"]]
        assert len(aug) == 3 * ((train["label"] == BONA_FIDE_HEALTHY) & ~train["augmented"]).sum()
        assert (aug["eid"] < 0).all() and (aug["label"] == BONA_FIDE_HEALTHY).all()
        assert not set(train["eid"]) & set(test["eid"])


def test_split_is_stratified_70_30(cohorts_dir):
    report = json.loads((cohorts_dir / "female" / "cohort_report.json").read_text())
    for name, total in report["classes"].items():
        assert abs(report["test"][name] - 0.3 * total) <= 1.5


def test_normalizer_fitted_on_real_training_rows_only(cohorts_dir):
    d = cohorts_dir / "male"
    features = json.loads((d / "features.json").read_text())
    raw = pd.read_parquet(d / "train_raw.parquet")
    # the measured values of the real rows: the filled ones (imputed.parquet) left out
    real = observed_values(raw.loc[~raw["augmented"]], features,
                           pd.read_parquet(d / "imputed.parquet"))
    norm = QuantileNormalizer.load(d / "normalizer.json")
    expected = QuantileNormalizer().fit(real, features=features, observed_only=True)
    np.testing.assert_allclose(norm.quantiles_, expected.quantiles_)
    z = pd.read_parquet(d / "train.parquet")
    z_real = z.loc[~z["augmented"], features].to_numpy()
    assert abs(z_real.mean()) < 0.05 and abs(z_real.std() - 1) < 0.1


def test_augmented_bfh_stay_inside_p0_ranges(cohorts_dir):
    raw = pd.read_parquet(cohorts_dir / "female" / "train_raw.parquet")
    aug = raw[raw["augmented"]]
    assert len(aug) > 0
    assert (aug["cholesterol"] <= 5.18).all() and (aug["hdl"] >= 1.3).all()
    assert aug["glucose"].between(3.9, 5.6).all() and (aug["hba1c"] < 42).all()
    assert (aug["crp"] < 10).all() and (aug["age"] == aug["age"].round()).all()


def test_same_seed_same_cohorts(baseline):
    a, _ = build_cohorts(baseline, CohortConfig(n_triplets=1000, seed=4))
    b, _ = build_cohorts(baseline, CohortConfig(n_triplets=1000, seed=4))
    c, _ = build_cohorts(baseline, CohortConfig(n_triplets=1000, seed=5))
    for sex in a:
        pd.testing.assert_frame_equal(a[sex].train, b[sex].train)
        np.testing.assert_array_equal(a[sex].triplets, b[sex].triplets)
    assert not a["female"].train["eid"].equals(c["female"].train["eid"])


def test_no_bona_fide_healthy_is_a_clear_error(baseline):
    config = CohortConfig(n_triplets=100, ranges={"crp": {"high": 0.0001}})
    with pytest.raises(InputError, match=r"no bona fide healthy female participants.*units"):
        build_cohorts(baseline, config)


def test_constant_feature_is_dropped_and_reported(baseline):
    frame = baseline.copy()
    frame["pdw"] = 16.6
    cohorts, _ = build_cohorts(frame, CohortConfig(n_triplets=100))
    for c in cohorts.values():
        assert "pdw" not in c.features and c.report["dropped_constant"] == ["pdw"]


def test_class_with_one_member(baseline):
    frame = baseline[baseline["sex"] == 0].copy()
    healthy = frame[frame["label"] == "apparently_healthy"]
    from sphr.data.fields import PREDICTOR_NAMES

    one_unhealthy = frame[frame["label"] == "unhealthy"].dropna(subset=list(PREDICTOR_NAMES))[:1]
    frame = pd.concat([healthy, one_unhealthy])
    cohorts, _ = build_cohorts(frame, CohortConfig(n_triplets=500, sexes=("female",)))
    c = cohorts["female"]
    assert (c.train["label"] == UNHEALTHY).sum() == 1  # kept in training, not in test
    anchors = c.train["label"].to_numpy()[c.triplets[:, 0]]
    assert not (anchors == UNHEALTHY).any()


def test_empty_cohort(baseline):
    women = baseline[baseline["sex"] == 0]
    with pytest.raises(InputError, match="no male participants left"):
        build_cohorts(women, CohortConfig(n_triplets=100))


def test_cli(tmp_path, ingest_dir, capsys):
    from sphr.cli import main

    ranges = tmp_path / "ranges.json"
    ranges.write_text('{"glucose": {"high": 6.1}}')
    assert main(["cohorts", str(ingest_dir / "baseline.parquet"), "--out", str(tmp_path / "c"),
                 "--profile", "demo", "--sex", "female", "--ranges", str(ranges)]) == 0
    assert "female:" in capsys.readouterr().out
    report = json.loads((tmp_path / "c" / "female" / "cohort_report.json").read_text())
    glucose = next(r for r in report["clinical_ranges"] if r["marker"] == "glucose")
    assert glucose["high"] == 6.1 and report["triplets"]["n"] == 20_000
    assert not (tmp_path / "c" / "male").exists()


def test_failed_run_leaves_no_output(tmp_path, ingest_dir):
    with pytest.raises(InputError):
        run_cohorts(ingest_dir / "baseline.parquet", tmp_path / "c",
                    CohortConfig(ranges={"crp": {"high": 0.0001}}))
    assert not (tmp_path / "c").exists()
    assert not list(tmp_path.iterdir())


def test_severity_triplets_contrast_the_number_of_markers_out_of_range(baseline):
    """triplet_classes="severity" (docs/METHODS.md, SPHR variants): anchor and positive have
    as many P0 markers out of range (capped at 3), the negative another count; seeded."""
    from sphr.cohorts.ranges import SEVERITY_CAP, severity_classes
    from sphr.errors import ConfigError

    config = CohortConfig(n_triplets=3_000, seed=5, triplet_classes="severity")
    built, _ = build_cohorts(baseline, config)
    again, _ = build_cohorts(baseline, config)
    for sex, cohort in built.items():
        severity = severity_classes(cohort.train_raw, sex, config.clinical_ranges())
        assert set(np.unique(severity)) <= set(range(SEVERITY_CAP + 1))
        assert len(np.unique(severity)) >= 3
        a, p, n = (severity[cohort.triplets[:, i]] for i in range(3))
        assert (a == p).all() and (a != n).all()
        # BFH (and the augmented rows drawn inside their ranges) have none out of range
        assert (severity[cohort.train["label"].to_numpy() == BONA_FIDE_HEALTHY] == 0).all()
        assert np.array_equal(cohort.triplets, again[sex].triplets)
        assert cohort.report["triplets"]["classes"] == "severity"
    with pytest.raises(ConfigError, match="triplet classes"):
        build_cohorts(baseline, CohortConfig(triplet_classes="stage"))
