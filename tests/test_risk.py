"""Single-visit risk: intervals, modes on hand-made examples, validation, CLI, score, report."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pdf_setup import printing_pdfs

from sphr.errors import ConfigError, InputError
from sphr.risk import GROUPS, assign_groups, make_intervals
from sphr.risk.calibration import pooled_windows
from sphr.risk.distance import DistanceModel
from sphr.risk.intervals import HIGHER_RISK, LOWER_RISK, NORMAL
from sphr.risk.model import COLUMNS
from sphr.risk.validation.groups import higher_vs_normal, time_correlation, validation_table, wilson

# ----------------------------------------------------------------------------- intervals

finite = st.floats(0, 1e6, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(finite, finite, finite, finite)
def test_normal_inside_lower_risk_after_repairs(a, b, c, d):
    iv = make_intervals((a, b), (c, d))
    assert iv.normal_low <= iv.normal_high
    assert iv.lower_low <= iv.normal_low <= iv.normal_high <= iv.lower_high


def test_degenerate_intervals_take_min_max():
    iv = make_intervals((5.0, 3.0), (6.0, 2.0))
    assert (iv.normal_low, iv.normal_high, iv.lower_low, iv.lower_high) == (3.0, 5.0, 2.0, 6.0)
    assert iv.repairs == ("normal_swapped", "lower_swapped")
    # LR lower end above N's (the identity case): LR widened to the hull
    iv = make_intervals((1.0, 4.0), (1.5, 5.0))
    assert (iv.lower_low, iv.lower_high) == (1.0, 5.0) and iv.repairs == ("lower_widened",)


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, min_size=1, max_size=50), finite, finite, finite, finite)
def test_every_distance_gets_exactly_one_group(s, a, b, c, d):
    """Eq. A.5 person by person: in N is Normal, in LR but not N is Lower Risk, outside both
    Higher Risk (after the repairs, N lies inside LR)."""
    iv = make_intervals((a, b), (c, d))
    groups = assign_groups(np.array(s), iv)
    assert len(groups) == len(s) and set(groups) <= set(GROUPS)
    assert iv.lower_low <= iv.normal_low <= iv.normal_high <= iv.lower_high
    for value, group in zip(s, groups, strict=True):
        if iv.normal_low <= value <= iv.normal_high:
            assert group == NORMAL
        elif iv.lower_low <= value <= iv.lower_high:
            assert group == LOWER_RISK
        else:
            assert group == HIGHER_RISK


def test_nan_distance_is_rejected():
    with pytest.raises(ValueError):
        assign_groups(np.array([1.0, np.nan]), make_intervals((0, 1), (0, 2)))


def test_pooled_windows_borrow_nearest_groups():
    assert pooled_windows([20, 20, 20], 10) == [[0], [1], [2]]
    assert pooled_windows([0, 3, 20, 0], 10) == [[0, 1, 2], [0, 1, 2], [2], [2, 3]]
    assert pooled_windows([1, 1], 10) == [[0, 1], [0, 1]]


# ----------------------------------------------------------------------------- hand-made modes

def _bfh(values: np.ndarray, group: str = "46-50") -> pd.DataFrame:
    """Eleven BFH members on one feature: a = i**2, i = 0..10 (skewed on purpose)."""
    return pd.DataFrame({"a": values, "label": np.int8(2), "augmented": False,
                         "age_group": group})


def _people(a: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"a": a, "age_group": "46-50"})


SQUARES = np.arange(11.0) ** 2  # P50 = 25; P2.5 = 0.25, P97.5 = 95.25, P1 = 0.1, P99 = 98.1


def test_paper_mode_known_answer():
    model = DistanceModel("raw_euclidean", "paper", ["a"], min_group_size=2).fit(_bfh(SQUARES))
    iv = model.intervals("46-50")
    # N = [d(P2.5), d(P97.5)] = [24.75, 70.25]; LR = [24.9, 73.1] widened to contain N
    assert iv.normal_low == pytest.approx(24.75) and iv.normal_high == pytest.approx(70.25)
    assert iv.lower_low == pytest.approx(24.75) and iv.lower_high == pytest.approx(73.1)
    assert iv.repairs == ("lower_widened",)
    out = model.transform(_people([25.0, 0.4, 50.0, 96.0, 99.0]))
    assert out["distance"].tolist() == pytest.approx([0.0, 24.6, 25.0, 71.0, 74.0])
    # as written (Eq. A.5): closer than N's lower bound is not Normal
    assert out["group"].tolist() == [HIGHER_RISK, HIGHER_RISK, NORMAL, LOWER_RISK, HIGHER_RISK]


def test_paper_mode_degenerate_interval_is_swapped():
    model = DistanceModel("raw_euclidean", "paper", ["a"], min_group_size=2).fit(
        _bfh(100 - SQUARES))
    iv = model.intervals("46-50")  # d(P2.5) = 70.25 > d(P97.5) = 24.75
    assert (iv.normal_low, iv.normal_high) == pytest.approx((24.75, 70.25))
    assert "normal_swapped" in iv.repairs


def test_calibrated_mode_known_answer():
    """Training BFH give the reference and the age standardization; the calibration BFH (whom
    the fit never sees) give a one-sided conformal bound."""
    calibration = _bfh(25.0 + np.arange(1.0, 21.0))  # distances 1..20 to the reference 25
    model = DistanceModel("raw_euclidean", "calibrated", ["a"], min_group_size=2,
                      standardize_min_group=2).fit(_bfh(SQUARES), calibration)
    assert model.strata_["46-50"]["reference"] == pytest.approx([25.0])
    # training own distances 0 9 11 16 21 24 24 25 39 56 75: median 24, IQR 32 - 13.5
    assert model.standardizer_.center_["46-50"] == pytest.approx(24.0)
    assert model.standardizer_.scale_["46-50"] == pytest.approx(18.5 / 1.349)
    # n = 20: the 95% bound is the ceil(21 * 0.95) = 20th smallest calibration distance
    assert model.bounds_.normal.method == "conformal" and model.bounds_.normal.n == 20
    iv = model.intervals("46-50")
    assert iv.normal_high == pytest.approx(20.0) and iv.normal_low == -np.inf
    assert model.bounds_.lower.method == "lognormal" and iv.lower_high > 20.0
    out = model.transform(_people([25.0, 45.0, 45.5, 25.0 + iv.lower_high + 1]))
    # one-sided: distance 0 is Normal (the paper's two-sided mapping would not say so)
    assert out["group"].tolist() == [NORMAL, NORMAL, LOWER_RISK, HIGHER_RISK]
    assert out["normal_low"].isna().all()
    assert out["score"].to_numpy() == pytest.approx((np.array([0, 20, 20.5, iv.lower_high + 1])
                                                     - 24.0) / (18.5 / 1.349))


def test_calibrated_mode_needs_calibration_rows():
    with pytest.raises(InputError, match="calibration"):
        DistanceModel("raw_euclidean", "calibrated", ["a"], min_group_size=2).fit(_bfh(SQUARES))


def test_fit_uses_only_real_bfh_rows():
    train = pd.concat([_bfh(SQUARES),
                       _bfh(np.full(5, 1e6)).assign(augmented=True),  # augmented BFH
                       _bfh(np.full(5, -1e6)).assign(label=np.int8(1))])  # not BFH
    model = DistanceModel("raw_euclidean", "paper", ["a"], min_group_size=2).fit(train)
    assert model.strata_["46-50"]["reference"] == pytest.approx([25.0])
    assert model.strata_["46-50"]["n_bfh"] == 11


def test_age_outside_groups_joins_nearest_and_unknown_group_is_an_error():
    model = DistanceModel("raw_euclidean", "paper", ["a"], min_group_size=2).fit(_bfh(SQUARES))
    out = model.transform(pd.DataFrame({"a": [25.0, 25.0, 25.0], "age_years": [30.0, 48.0, 80.0]}))
    assert out["age_group"].tolist() == ["36-45", "46-50", "66-75"]
    with pytest.raises(InputError, match="age groups"):
        model.transform(pd.DataFrame({"a": [1.0], "age_group": ["20-30"]}))
    with pytest.raises(InputError):
        model.transform(pd.DataFrame({"a": [1.0]}))


def test_mahalanobis_matches_the_formula():
    from scipy.spatial.distance import mahalanobis

    rng = np.random.default_rng(0)
    cov = np.array([[2.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 0.5]])
    X = rng.multivariate_normal([0, 1, 2], cov, size=400)
    train = pd.DataFrame(X, columns=["a", "b", "c"]).assign(label=np.int8(2), augmented=False,
                                                            age_group="51-55")
    model = DistanceModel("mahalanobis", "paper", ["a", "b", "c"]).fit(train)
    VI = np.linalg.inv(model.space_.covariance_)
    p50 = np.percentile(X, 50, axis=0)
    new = rng.normal(size=(5, 3))
    out = model.transform(pd.DataFrame(new, columns=["a", "b", "c"]).assign(age_group="51-55"))
    expected = [mahalanobis(x, p50, VI) for x in new]
    assert out["distance"].to_numpy() == pytest.approx(expected, rel=1e-9)
    # the shrunk covariance stays close to the true one with 400 rows
    assert np.abs(model.space_.covariance_ - cov).max() < 0.4


def test_p0_method_uses_only_p0_markers():
    features = ["glucose", "bmi", "hdl"]
    rng = np.random.default_rng(1)
    train = pd.DataFrame(rng.normal(size=(30, 3)), columns=features).assign(
        label=np.int8(2), augmented=False, age_group="56-60")
    model = DistanceModel("p0_euclidean", "paper", features).fit(train)
    a = pd.DataFrame({"glucose": [0.0], "bmi": [0.0], "hdl": [0.0], "age_group": ["56-60"]})
    b = a.assign(bmi=100.0)
    assert model.transform(a)["distance"].iloc[0] == model.transform(b)["distance"].iloc[0]


# ----------------------------------------------------------------------------- validation

def test_wilson_interval_known_values():
    lo, hi = wilson(np.array([0, 5, 0]), np.array([10, 10, 0]))
    assert lo[:2] == pytest.approx([0.0, 0.2366], abs=1e-4)
    assert hi[:2] == pytest.approx([0.2775, 0.7634], abs=1e-4)
    assert np.isnan(lo[2]) and np.isnan(hi[2])


def test_validation_table_counts_and_time_correlation():
    risk = pd.DataFrame({"eid": np.arange(6), "sex": "female", "method": "sphr", "mode": "paper",
                         "group": [NORMAL, NORMAL, NORMAL, HIGHER_RISK, HIGHER_RISK, LOWER_RISK],
                         "distance": [1.0, 2.0, 3.0, 8.0, 9.0, 5.0]})
    fu = pd.DataFrame({"eid": [0, 1, 2, 3, 4, 5, 3, 4], "instance": [1] * 6 + [2, 2],
                       "years_since_baseline": [4.0, 5.0, 4.5, 5.0, 4.0, 4.2, 7.0, 7.0],
                       "new_cancer": [False, False, None, True, False, False, True, True],
                       "new_diabetes": [False, True, False, True, True, False, True, True],
                       "new_other_serious": [False, False, False, False, True, False, True, True]})
    t = validation_table(risk, fu)
    row = t[(t["group"] == NORMAL) & (t["condition"] == "cancer")].iloc[0]
    assert (row["n_group"], row["n_total"], row["answered"], row["cases"]) == (3, 6, 2, 0)
    assert row["share"] == pytest.approx(0.5)
    hr = t[(t["group"] == HIGHER_RISK) & (t["condition"] == "diabetes")].iloc[0]
    assert (hr["cases"], hr["answered"], hr["rate"]) == (2, 2, 1.0)
    assert hr["rate_low"] == pytest.approx(wilson(2, 2)[0])
    anyrow = t[(t["group"] == NORMAL) & (t["condition"] == "any")].iloc[0]
    assert (anyrow["cases"], anyrow["answered"]) == (1, 2)  # eid 2: unknown cancer, rest negative
    assert len(t) == 3 * 4  # every group appears, empty or not
    hvn = higher_vs_normal(t).set_index("condition")
    assert hvn.loc["diabetes", "higher"] == "2/2" and hvn.loc["diabetes", "normal"] == "1/3"
    assert bool(hvn.loc["diabetes", "higher_more"]) and 0 < hvn.loc["diabetes", "p_greater"] < 1
    corr = time_correlation(risk, fu)
    dia = corr[corr["condition"] == "diabetes"].iloc[0]
    # first diabetes: eid 1 at 5.0 (d 2), eid 3 at 5.0 (d 8), eid 4 at 4.0 (d 9)
    assert dia["n"] == 3
    from scipy.stats import pearsonr

    assert dia["r"] == pytest.approx(pearsonr([2, 8, 9], [5.0, 5.0, 4.0]).statistic)


# ----------------------------------------------------------------------------- run dir, CLI

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, ingest_dir, cohorts_dir):
    """RUN with the fixture ingest and cohorts, a tiny DeepPatient and a small real SPHR."""
    return small_run(tmp_path_factory.mktemp("run"), ingest_dir, cohorts_dir)


def small_run(run, ingest_dir, cohorts_dir):
    """``run`` linked to the fixture ingest and cohorts, with a tiny DeepPatient and a small
    real SPHR: the run directory ``sphr risk`` fits from."""
    (run / "ingest").symlink_to(ingest_dir)
    (run / "cohorts").symlink_to(cohorts_dir)
    write_small_deep_models(run, cohorts_dir)
    return run


def write_small_deep_models(run, cohorts_dir) -> None:
    """A tiny DeepPatient and a small SPHR (an 8-wide SPHREmbedding trained for one epoch
    on 2,000 of the cohort's triplets) per sex in RUN/baselines and RUN/train, so the risk
    stage has every method on the small fixture, read as the pipeline's are."""
    from sphr.artifacts import load_cohort
    from sphr.baselines.pipeline import run_baselines
    from sphr.cohorts.triplets import read_triplets
    from sphr.layout import baselines_dir, train_dir
    from sphr.train import SPHREmbedding, TrainConfig

    for i, sex in enumerate(("female", "male")):
        run_baselines(cohorts_dir / sex, baselines_dir(run, sex), ["deep_patient"], device="cpu",
                      params={"deep_patient": {"epochs": 2, "hidden": (24, 16)}})
        cohort = load_cohort(cohorts_dir / sex)
        X = cohort.matrix("train")
        triplets = read_triplets(cohorts_dir / sex / "triplets.npz", len(X))[:2000]
        config = TrainConfig(epochs=1, out_dim=8, batch_size=500, seed=i, device="cpu",
                             threads=1, checkpoint_every=0)
        SPHREmbedding(config).fit(X, labels=cohort.train["label"].to_numpy(), triplets=triplets,
                                  feature_names=cohort.features
                                  ).save(train_dir(run, sex) / "model.pt")


def _cli(argv: list[str]) -> int:
    # sphr.cli imports every stage; parse with this stage alone so the test needs only sphr.risk
    from sphr.risk.commands import register

    parser = argparse.ArgumentParser(prog="sphr")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


@pytest.fixture(scope="module")
def risk_out(run_dir):
    out = run_dir / "risk"
    with printing_pdfs():
        assert _cli(["risk", str(run_dir), "--bootstrap", "50"]) == 0
    return out


def test_risk_cli_writes_every_output(risk_out, cohorts_dir):
    from sphr.artifacts import load_cohort
    from sphr.risk.config import METHODS, PAPER_METHODS, SHIPPED_SPHR, SPHR_VARIANTS

    # the variants that did not win are options, not defaults
    METHODS = tuple(m for m in METHODS if m not in SPHR_VARIANTS or m == SHIPPED_SPHR)

    for name in ("risk_groups.parquet", "risk_groups.csv", "validation.parquet", "validation.md",
                 "thresholds.csv", "time_correlation.parquet", "report.html",
                 "discrimination.parquet", "heldout_bfh.parquet",
                 "model/risk_model.json", "model/female/normalizer.json", "model/male/sphr.pt",
                 "model/female/deep_patient.joblib", "model/male/mahalanobis_whitening.npy"):
        assert (risk_out / name).is_file(), name
    rows = pd.read_parquet(risk_out / "risk_groups.parquet")
    assert tuple(rows.columns) == COLUMNS
    assert tuple(pd.read_csv(risk_out / "risk_groups.csv", nrows=2).columns) == COLUMNS
    assert set(METHODS) <= set(rows["method"]) and set(rows["mode"]) == {"paper", "calibrated"}
    assert set(rows.loc[rows["mode"] == "paper", "method"]) == set(PAPER_METHODS)
    # every real participant, exactly once per method and mode, in exactly one group, with
    # their role; a method not computed for someone is counted in risk_report.json
    unscored = json.loads((risk_out / "risk_report.json").read_text())["unscored"]
    for sex in ("female", "male"):
        c = load_cohort(cohorts_dir / sex)
        roles = {"train": int((~c.train["augmented"]).sum()), "calibration": len(c.calibration),
                 "test": len(c.test)}
        for (method, _), sub in rows[rows["sex"] == sex].groupby(["method", "mode"]):
            missing = unscored.get(f"{sex}/{method}", {"n": 0})["n"]
            assert len(sub) == sum(roles.values()) - missing, (sex, method)
            assert sub["eid"].is_unique and (sub["eid"] > 0).all()
            if not missing:
                assert sub["partition"].value_counts().to_dict() == roles
    assert rows["group"].isin(GROUPS).all()
    paper = rows[rows["mode"] == "paper"]
    assert (paper["lower_low"] <= paper["normal_low"]).all()
    assert (rows["normal_high"] <= rows["lower_high"]).all()
    calibrated = rows[rows["mode"] == "calibrated"]
    assert calibrated["normal_low"].isna().all()  # one-sided
    disc = pd.read_parquet(risk_out / "discrimination.parquet")
    for col in ("sex", "method", "outcome", "n", "events", "auroc", "auroc_low", "auroc_high",
                "c_index", "c_index_low", "c_index_high"):
        assert col in disc.columns
    assert {"age", *METHODS} <= set(disc["method"])
    v = pd.read_parquet(risk_out / "validation.parquet")
    assert set(v["group"]) == set(GROUPS) and (v["n_group"] <= v["n_total"]).all()
    assert ((v["rate_low"] <= v["rate"]) | v["rate"].isna()).all()
    md = (risk_out / "validation.md").read_text()
    assert "1.52% / 2.96% / 4.14%" in md  # the paper's SPHR cancer rates (men) beside ours


def test_report_html_is_self_contained(risk_out):
    from sphr.risk.report import find_chromium

    text = (risk_out / "report_appendix.html").read_text()
    assert text.count("<table") >= 4 and text.count('<img src="data:image/png;base64,') >= 5
    assert "http://" not in text and "https://" not in text
    # a forwarded report does not show where it was made
    assert str(risk_out.parent.resolve()) not in text and str(risk_out.parent) not in text
    for needle in ("Definitions", "Table 4", "Thresholds used", "Distance distributions",
                   "closer than Normal", "held-out bona fide healthy",
                   "New diagnoses over the repeat visits", "Group shares by age group"):
        assert needle in text
    # the reader's summary comes first, its figure before the definitions (in the appendix)
    assert text.index("<h2>Every method at a glance</h2>") < text.index('alt="forest plot') \
        < text.index("<h2>Definitions</h2>")
    assert text.index('<details class="appendix"') < text.index("<h2>Definitions</h2>")
    assert (risk_out / "report_summary.png").is_file()
    if find_chromium() is not None:  # printed from the same HTML, A4
        assert (risk_out / "report.pdf").read_bytes()[:5] == b"%PDF-"


@pytest.mark.browser  # headless Chromium renders the PNG
def test_report_renders_to_a_nonblank_png(risk_out, tmp_path):
    from sphr.risk.report import find_chromium, render_png

    if find_chromium() is None:
        pytest.skip("no chromium / chromium-browser / google-chrome on PATH")
    png = render_png(risk_out / "report_appendix.html", tmp_path / "report.png")
    assert png.stat().st_size > 30_000
    import matplotlib.image as mpimg

    img = mpimg.imread(png)
    assert img.shape[0] >= 2000 and img.shape[1] >= 1200
    gray = img[..., :3].mean(axis=2)
    assert gray.std() > 0.05  # not a blank page
    assert (gray < 0.5).mean() > 0.005  # some dark pixels: text, table borders, plots


def test_score_reproduces_risk_groups(risk_out, run_dir, ukb_export, tmp_path):
    from sphr.risk.serve.apply import run_score

    report = run_score(run_dir, ukb_export, tmp_path / "scored")
    scored = pd.read_parquet(tmp_path / "scored" / "risk_groups.parquet")
    assert tuple(scored.columns) == COLUMNS and report["rows"] == len(scored)
    fitted = pd.read_parquet(risk_out / "risk_groups.parquet")
    # every method, the supervised comparators and PhenoAge included, scores new people
    assert set(scored["method"]) == set(fitted["method"])
    # a supervised score of a training person is out of fold (cross-fitted) when fitted and
    # the mean of the fold models when scored: only the others compare
    supervised = fitted["method"].str.startswith("supervised_")
    fitted = fitted[~supervised | (fitted["partition"] != "train")]
    keys = ["eid", "method", "mode"]
    both = fitted.merge(scored, on=keys, suffixes=("", "_new"))
    assert len(both) == len(fitted)  # the same complete cases are scored
    assert both["distance_new"].to_numpy() == pytest.approx(both["distance"].to_numpy(), rel=1e-5,
                                                           abs=1e-5)
    assert (both["group_new"] == both["group"]).mean() > 0.999


@pytest.mark.parametrize("standardization", ["training_groups", "calibration_line"])
def test_risk_model_fit_save_load_score_reproduces_the_fitted_rows(run_dir, tmp_path,
                                                                    standardization):
    """One fitted object: RiskModel.fit -> save -> load -> score gives the calibration and
    test people the rows the fit gave them (from the baseline in UKB units, through the saved
    normalizer, marker scaler, representations, references, standardizers and bounds), and
    a loaded model saves as the folder it was read from."""
    from sphr.data.fingerprint import tree_sha256
    from sphr.risk.config import RiskConfig
    from sphr.risk.fit import fit_run
    from sphr.risk.model import RiskModel
    from sphr.risk.pipeline import thresholds_table

    config = RiskConfig(n_bootstrap=10, n_bootstrap_linked=10, device="cpu",
                        standardization=standardization)
    fitted = fit_run(run_dir, config)
    assert set(fitted.sexes_) == {"female", "male"} and tuple(fitted.rows_.columns) == COLUMNS
    spec_path = fitted.save(tmp_path / "model")
    loaded = RiskModel.load(tmp_path / "model", device="cpu")
    assert loaded.config == config and loaded.skipped_ == fitted.skipped_
    assert loaded.unscored_ == fitted.unscored_
    baseline = pd.read_parquet(run_dir / "ingest" / "baseline.parquet")
    scored = loaded.score_cohort(baseline)
    assert tuple(scored.rows.columns) == COLUMNS and scored.report["rows"] == len(scored.rows)
    held_out = fitted.rows_[fitted.rows_["partition"].isin(("calibration", "test"))]
    assert {"sphr", "sphr_joint", "deep_patient", "mahalanobis", "phenoage"} <= \
        set(held_out["method"])
    both = held_out.merge(scored.rows, on=["eid", "method", "mode"], suffixes=("", "_new"))
    assert len(both) == len(held_out)
    for col in ("distance", "score", "normal_high", "lower_high"):
        np.testing.assert_allclose(both[f"{col}_new"], both[col], rtol=1e-6, atol=1e-6,
                                   err_msg=col)
    assert (both["group_new"] == both["group"]).all()
    assert (both["label_new"] == both["label"]).all()  # the saved clinical ranges
    loaded.save(tmp_path / "again")
    assert tree_sha256(tmp_path / "again") == tree_sha256(tmp_path / "model")
    table = thresholds_table(json.loads(spec_path.read_text()))
    calibrated = table[table["mode"] == "calibrated"]
    assert calibrated["normal_high"].notna().all() and calibrated["score_scale"].gt(0).all()


def test_the_fit_of_a_sex_returns_what_it_fitted(run_dir):
    """SexFit returns the fitted methods, skips and rows (it holds no model to write into);
    SexModel.fit keeps what it returned, and fitting twice gives the same rows."""
    from sphr.risk.config import RiskConfig
    from sphr.risk.fit import age_groups, read_inputs
    from sphr.risk.model import SexModel
    from sphr.risk.model.fitting import FittedSex, SexFit

    methods = ("raw_euclidean", "mahalanobis", "phenoage")
    config = RiskConfig(methods=methods, n_bootstrap=10, n_bootstrap_linked=10, device="cpu")
    inputs, groups = read_inputs(run_dir, "female", config), age_groups(run_dir)
    fitted = SexFit("female", inputs, config, groups).run()
    assert isinstance(fitted, FittedSex) and tuple(fitted.methods) == methods
    assert set(fitted.rows["method"]) == set(methods) and fitted.marker_scaler is not None
    model = SexModel("female").fit(inputs, config, groups)
    assert tuple(model.methods_) == methods and model.skipped_ == fitted.skipped
    assert model.unscored_ == fitted.unscored and set(model.absolute_) == set(fitted.absolute)
    pd.testing.assert_frame_equal(model.rows_, fitted.rows)


def test_saved_methods_state_their_kind_and_an_entry_without_one_is_an_error(risk_out, tmp_path):
    """Every method entry of risk_model.json states its kind, which says how it is read; an
    entry without a known kind (none is guessed from its keys: a folder of an older layout is
    refused before, tests/test_old_layouts.py) is one clear error naming the entry."""
    import shutil

    from sphr.io import read_json, write_json
    from sphr.risk.model import KINDS, RiskModel

    spec = read_json(risk_out / "model" / "risk_model.json")
    kinds = {(sex, name): entry["kind"] for sex, s in spec["sexes"].items()
             for name, entry in s["methods"].items()}
    assert set(kinds.values()) <= set(KINDS) and {"distance", "phenoage"} <= set(kinds.values())
    current = RiskModel.load(risk_out / "model", device="cpu")
    for (sex, name), kind in kinds.items():
        assert current.sexes_[sex].methods_[name].kind == kind
    damaged = tmp_path / "damaged"
    shutil.copytree(risk_out / "model", damaged)
    for kind in ("quantum", None):
        entry = spec["sexes"]["female"]["methods"]["raw_euclidean"]
        if kind is None:
            del entry["kind"]
        else:
            entry["kind"] = kind
        write_json(spec, damaged / "risk_model.json")
        with pytest.raises(InputError, match="unknown kind") as err:
            RiskModel.load(damaged, device="cpu")
        assert err.value.field == "methods.raw_euclidean.kind"


def test_a_saved_config_with_a_key_that_is_no_setting_is_an_error(risk_out, tmp_path):
    """risk_model.json's config is read key for key: one that is no RiskConfig field (such as
    the removed validate_on) is an error naming it, never dropped."""
    import shutil

    from sphr.errors import ConfigError
    from sphr.io import read_json, write_json
    from sphr.risk.model import RiskModel

    damaged = tmp_path / "model"
    shutil.copytree(risk_out / "model", damaged)
    spec = read_json(damaged / "risk_model.json")
    assert "validate_on" not in spec["config"]
    spec["config"]["validate_on"] = "test"
    write_json(spec, damaged / "risk_model.json")
    with pytest.raises(ConfigError, match="config: no key 'validate_on'"):
        RiskModel.load(damaged, device="cpu")


@pytest.fixture(scope="module")
def small_cohort():
    from sphr.synth.cohort import generate_cohort

    return generate_cohort(150, seed=3)


def test_score_refuses_wrong_units(risk_out, run_dir, small_cohort, tmp_path):
    from sphr.risk.serve.apply import run_score
    from sphr.synth.cohort import SyntheticCohort
    from sphr.synth.export import write_export

    visits = small_cohort.visits.assign(glucose=small_cohort.visits["glucose"] * 18.016)  # mg/dL
    bad = write_export(SyntheticCohort(visits, small_cohort.truth), tmp_path / "mgdl.csv",
                       "ukbconv", decoys=0, seed=3)
    with pytest.raises(InputError, match="units") as err:
        run_score(run_dir, bad, tmp_path / "out")
    assert err.value.field.startswith("30740-0.0") and err.value.file == str(bad)
    assert not (tmp_path / "out").exists()
    run_score(run_dir, bad, tmp_path / "out", allow_out_of_range=True)  # the documented override
    assert (tmp_path / "out" / "risk_groups.parquet").is_file()


def test_score_refuses_a_missing_feature(risk_out, run_dir, small_cohort, tmp_path):
    from sphr.risk.serve.apply import run_score
    from sphr.synth.export import write_export

    good = write_export(small_cohort, tmp_path / "ok.csv", "ukbconv", decoys=0, seed=3)
    frame = pd.read_csv(good, dtype=str)
    frame = frame.drop(columns=[c for c in frame.columns if c.startswith("30760-")])  # HDL
    frame.to_csv(tmp_path / "no_hdl.csv", index=False)
    with pytest.raises(InputError, match="hdl") as err:
        run_score(run_dir, tmp_path / "no_hdl.csv", tmp_path / "out")
    assert err.value.field.startswith("30760-0.0")
    with pytest.raises(InputError, match="sphr risk"):
        run_score(tmp_path, good, tmp_path / "out")


def test_score_labels_with_the_runs_custom_ranges(ingest_dir, ukb_export, tmp_path):
    """A run built with ``--ranges`` is scored with those ranges, not the defaults (was a bug:
    ``sphr score`` had its own copy of the labelling with the default ranges)."""
    from sphr.cohorts import CohortConfig, run_cohorts
    from sphr.cohorts.ranges import P0_RANGES, assign_classes, ranges_for, with_overrides
    from sphr.risk.config import RiskConfig
    from sphr.risk.pipeline import risk_for_sex
    from sphr.risk.serve.apply import run_score

    overrides = {"glucose": {"low": 3.5, "high": 6.1}, "hdl": {"female": {"low": 1.1}}}
    run = tmp_path / "run"
    run.mkdir()
    (run / "ingest").symlink_to(ingest_dir)
    run_cohorts(ingest_dir / "baseline.parquet", run / "cohorts",
                CohortConfig(n_triplets=1_000, seed=11, ranges=overrides, sexes=("female",)))
    risk_for_sex(run, "female", run / "risk",
                 RiskConfig(methods=("raw_euclidean",), modes=("calibrated",), n_bootstrap=10,
                            n_bootstrap_linked=10, sexes=("female",)))
    run_score(run, ukb_export, tmp_path / "scored")
    scored = pd.read_parquet(tmp_path / "scored" / "risk_groups.parquet")
    fitted = pd.read_parquet(run / "risk" / "risk_groups.parquet")
    both = fitted.merge(scored, on=["eid", "method", "mode"], suffixes=("", "_new"))
    assert len(both) == len(fitted) > 0
    assert (both["label_new"] == both["label"]).all()  # the cohort's classes, custom ranges
    # and the custom ranges matter here: the defaults would label some of these people otherwise
    women = pd.read_parquet(ingest_dir / "baseline.parquet").set_index("eid").loc[both["eid"]]
    custom = assign_classes(women, "female", with_overrides(overrides))
    default = assign_classes(women, "female", tuple(ranges_for("female", P0_RANGES)))
    assert (custom == both["label_new"].to_numpy()).all() and (custom != default).sum() > 0



def test_sphr_variants_are_fitted_on_training_bfh_saved_and_scored_alike(run_dir, ukb_export,
                                                                          tmp_path):
    """docs/METHODS.md "SPHR variants aimed at risk": each variant is deterministic, its
    reference comes from the training BFH only, and sphr score reproduces it on new people."""
    from sphr.artifacts import load_cohort
    from sphr.layout import train_dir
    from sphr.risk.config import SPHR_VARIANTS, RiskConfig
    from sphr.risk.fit import fit_run
    from sphr.risk.pipeline import run_risk
    from sphr.risk.serve.apply import run_score
    from sphr.risk.spaces import EmbeddingSpace, build_space

    config = RiskConfig(methods=("sphr", *SPHR_VARIANTS), modes=("calibrated",),
                        n_bootstrap=10, n_bootstrap_linked=10)
    a, b = (fit_run(run_dir, config, ("female",)).rows_ for _ in range(2))
    pd.testing.assert_frame_equal(a, b)  # same inputs and seed: the same rows
    assert set(a["method"]) == {"sphr", *SPHR_VARIANTS}
    # the age line and the young reference are fitted on the rows given: BFH training rows
    cohort = load_cohort(run_dir / "cohorts" / "female")
    bfh = cohort.train[(cohort.train["label"] == 2) & ~cohort.train["augmented"]]
    X = bfh[cohort.features].to_numpy(float)
    ages = bfh["age_years"].to_numpy(float)
    sphr = {"sphr": train_dir(run_dir, "female") / "model.pt"}
    line = build_space("sphr_age_line", cohort.features, representations=sphr).fit(X, ages=ages)
    assert np.abs(line.transform(X).mean(axis=0)).max() < 1e-6  # least-squares residuals
    young = build_space("sphr_young", cohort.features, representations=sphr).fit(X, ages=ages)
    rows = ages <= 50 if (ages <= 50).sum() >= 10 else np.argsort(ages, kind="stable")[:10]
    assert np.allclose(young.center_, np.median(young.space.transform(X[rows]), axis=0))
    # a composition of the SPHR representation (read through its interface) and a rule
    assert isinstance(young.space, EmbeddingSpace) and young.space.kind == "sphr"
    out = tmp_path / "risk"
    run_risk(run_dir, out, config)
    scored = pd.read_parquet(run_score(out, ukb_export, tmp_path / "scored") and
                             tmp_path / "scored" / "risk_groups.parquet")
    fitted = pd.read_parquet(out / "risk_groups.parquet")
    both = fitted.merge(scored, on=["eid", "method", "mode"], suffixes=("", "_new"))
    assert set(both["method"]) == {"sphr", *SPHR_VARIANTS} and len(both) == len(fitted)
    assert both["distance_new"].to_numpy() == pytest.approx(both["distance"].to_numpy(),
                                                           rel=1e-5, abs=1e-5)


def test_sphr_variant_references_see_only_training_bfh(run_dir):
    """The age line, the young reference and the joint scales are fitted on the real training
    BFH alone: moving calibration, test, augmented or non-BFH training rows moves none of
    them, moving a training BFH row does (docs/METHODS.md, SPHR variants aimed at risk)."""
    from sphr.artifacts import load_cohort
    from sphr.layout import train_dir
    from sphr.risk.distance import DistanceModel
    from sphr.risk.spaces import build_space

    cohort = load_cohort(run_dir / "cohorts" / "female")
    sphr = {"sphr": train_dir(run_dir, "female") / "model.pt"}

    def fitted(train: pd.DataFrame, calibration: pd.DataFrame) -> dict[str, np.ndarray]:
        out = {}
        for method in ("sphr_age_line", "sphr_young", "sphr_joint"):
            space = build_space(method, cohort.features, representations=sphr)
            model = DistanceModel(method, "calibrated", cohort.features, space=space)
            model.fit(train, calibration)
            probe = cohort.test[cohort.features].to_numpy(float)[:20]
            out[method] = model.space_.transform(probe)
        return out

    before = fitted(cohort.train, cohort.calibration)
    train, calibration = cohort.train.copy(), cohort.calibration.copy()
    moved = (train["label"] != 2) | train["augmented"]
    train.loc[moved, cohort.features] += 3.0
    calibration[cohort.features] += 3.0
    after = fitted(train, calibration)
    for method in before:
        assert np.array_equal(before[method], after[method]), method
    bfh = np.flatnonzero(~moved.to_numpy())
    train.loc[train.index[bfh[:5]], cohort.features] += 3.0
    again = fitted(train, calibration)
    assert all(not np.array_equal(before[m], again[m]) for m in before)


def test_report_writes_paths_relative_to_the_run():
    from sphr.risk.report.tables import relative

    assert relative("missing /data/run7/cohorts/male/x.parquet", "/data/run7") == \
        "missing cohorts/male/x.parquet"
    assert relative("in /data/run7", "/data/run7") == "in ."
    assert relative("no path here", "") == "no path here"


def test_the_fitted_model_names_the_shipped_sphr_score(risk_out):
    """risk_model.json records which method is the shipped SPHR score and how its network
    was trained (here a test network of no profile, so no spread), and a saved model keeps
    it through sphr score's load."""
    from sphr.io import read_json
    from sphr.risk.model import RiskModel

    spec = read_json(risk_out / "model" / "risk_model.json")
    assert spec["shipped_sphr"] == "sphr_joint"
    assert spec["sphr_refits"]["spread"] is None
    assert RiskModel.load(risk_out / "model").sphr_["shipped_sphr"] == "sphr_joint"
    assert "How far one SPHR fit can be trusted" in (risk_out / "report_appendix.html").read_text()


def test_every_method_is_defined_once_and_dispatched_by_its_registry():
    """The method lists are views of one registry (sphr.risk.config.RISK_METHODS), and every
    distance method has exactly one way to build its space: a marker space, or an embedding
    (with the variants' reference rule)."""
    from sphr.risk import config, spaces
    from sphr.risk.report.names import METHOD_ORDER, method_name, short_name

    info = config.RISK_METHODS
    assert config.ALL_METHODS == tuple(info) == (*config.METHODS, *config.SCORE_METHODS)
    assert set(config.PAPER_METHODS) == {"raw_euclidean", "mahalanobis", "p0_euclidean",
                                         "deep_patient", "sphr"}
    marker = set(spaces._MARKER_SPACES)
    embedded = set(config.EMBEDDED_BY)
    assert marker == set(config.MARKER_SPACE_METHODS)
    assert marker | embedded == set(config.METHODS) and not marker & embedded
    assert set(spaces._REFERENCE_RULES) == set(config.SPHR_VARIANTS) <= embedded
    for name in info:
        assert method_name(name) == info[name].display
        assert short_name(name) == (info[name].short or info[name].display)
    assert set(info) <= set(METHOD_ORDER)
    with pytest.raises(ConfigError, match="unknown risk method"):
        spaces.build_space("nosuch", ["glucose"])
