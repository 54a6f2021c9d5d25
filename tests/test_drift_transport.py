"""Drift in every scoring and re-anchoring (sphr.risk.serve.drift, sphr.risk.serve.reanchor,
sphr score)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_risk import _cli, small_run

from sphr.errors import InputError
from sphr.risk.config import REANCHOR_ALL_PARTS
from sphr.risk.population import PopulationSummary
from sphr.risk.serve.drift import drift_line, feature_drift, sex_drift, status_of, summarize

DEV = Path(__file__).resolve().parents[1] / "sphr" / "data" / "real" / "nhanes_ukb_dev.csv"


# ----------------------------------------------------------------------------- the statistics

def _column(train: np.ndarray) -> dict:
    return PopulationSummary().fit(train[:, None], ["x"]).column("x")


@pytest.mark.parametrize(("shift", "scale", "expected"), [
    (0.0, 1.0, "ok"), (0.15, 1.0, "moderate"), (0.5, 1.0, "drift"), (-0.8, 1.0, "drift"),
    (0.0, 18.0, "units")])
def test_statuses_on_constructed_shifts(shift, scale, expected):
    rng = np.random.default_rng(0)
    train = rng.lognormal(1.5, 0.3, 20_000)
    sd = train.std(ddof=1)
    new = (rng.lognormal(1.5, 0.3, 20_000) + shift * sd) * scale
    row = feature_drift(new, _column(train))
    assert row["status"] == expected
    if scale == 1.0:
        assert row["smd"] == pytest.approx(shift, abs=0.03)


def test_status_thresholds_and_small_samples():
    assert status_of(0.09, 0.05, 0.0, 500) == "ok"
    assert status_of(0.1, 0.0, 0.0, 500) == "moderate"
    assert status_of(0.0, 0.25, 0.0, 500) == "drift"
    assert status_of(3.0, 5.0, 0.0, 5) == "few values"  # too few to tell, no alarm
    assert status_of(0.0, 0.0, 0.9, 5) == "units"       # a unit mistake shows at once
    row = feature_drift(np.full(10, np.nan), _column(np.arange(100.0)))
    assert row["status"] == "no values"


@pytest.fixture(scope="module")
def dev_baseline() -> pd.DataFrame:
    from sphr.data.ingest import ingest

    return ingest(DEV).baseline.to_pandas()


def _features(frame: pd.DataFrame) -> list[str]:
    from sphr.data.fields import BY_NAME

    return [c for c in frame.columns if c in BY_NAME and c not in ("eid", "sex")
            and frame[c].dtype.kind == "f" and frame[c].notna().mean() > 0.8]


def test_no_alarm_on_a_random_split_of_one_cohort_and_the_injected_shift_is_flagged(dev_baseline):
    """Real people: a random half against the other half flags nothing; creatinine x 1.15 and
    ALP + 0.7 SD injected into the half are flagged, and nothing else is."""
    features = _features(dev_baseline)
    rng = np.random.default_rng(1)
    half = rng.random(len(dev_baseline)) < 0.5
    for sex, code in (("female", 0), ("male", 1)):
        mine = dev_baseline["sex"].to_numpy() == code
        train, new = dev_baseline.loc[mine & half], dev_baseline.loc[mine & ~half].copy()
        pop = PopulationSummary().fit(train[features].to_numpy(float), features)
        table = sex_drift(new, sex, pop)
        assert not set(table["status"]) & {"drift", "units"}, table[table["status"] != "ok"]
        new["creatinine"] *= 1.15
        new["alp"] += 0.7 * train["alp"].std()
        table = sex_drift(new, sex, pop).set_index("feature")
        assert table.loc["creatinine", "status"] == table.loc["alp", "status"] == "drift"
        assert set(table.index[table["status"] == "drift"]) == {"creatinine", "alp"}
        assert "creatinine" in drift_line(table.reset_index())
        assert summarize(table.reset_index())["passed"]


# ----------------------------------------------------------------------------- a fitted RUN

#: the fixture's 2,000 people have 30-40 BFH with every feature per sex: below the
#: documented minimum, which the too-few test checks
FEW = 20
METHODS = "raw_euclidean,mahalanobis,homeostatic_dysregulation,deep_patient,sphr,phenoage"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, ingest_dir, cohorts_dir):
    run = small_run(tmp_path_factory.mktemp("transport_run"), ingest_dir, cohorts_dir)
    assert _cli(["risk", str(run), "--bootstrap", "10", "--methods", METHODS]) == 0
    return run


def _shifted(export: Path, out: Path, field: str = "30700-0.0", times: float = 1.4) -> Path:
    frame = pd.read_csv(export, dtype=str, keep_default_na=False)
    v = pd.to_numeric(frame[field], errors="coerce") * times
    frame[field] = ["" if np.isnan(x) else f"{x:.6g}" for x in v]
    frame.to_csv(out, index=False)
    return out


def test_the_model_folder_keeps_the_training_population_not_its_rows(run_dir):
    from sphr.io import read_json

    for sex in ("female", "male"):
        data = read_json(run_dir / "risk" / "model" / sex / "population.json")
        feats = data["features"]
        assert len(data["levels"]) == 101 and set(feats) == set(
            read_json(run_dir / "risk" / "model" / sex / "features.json"))
        one = next(iter(feats.values()))
        assert set(one) == {"n", "mean", "sd", "percentiles"} and len(one["percentiles"]) == 101
        # the summary of the real training rows' measured values, and nothing of a row
        raw = pd.read_parquet(run_dir / "cohorts" / sex / "train_raw.parquet")
        real = raw.loc[~raw["augmented"]]
        for name, entry in feats.items():
            values = real[name].to_numpy(float)
            values = values[np.isfinite(values)]
            assert entry["n"] == values.size
            np.testing.assert_allclose(entry["percentiles"],
                                       np.percentile(values, np.linspace(0, 100, 101)))
            assert entry["mean"] == pytest.approx(values.mean())
        text = (run_dir / "risk" / "model" / sex / "population.json").read_text()
        assert "eid" not in text and len(text) < 200 * 101 * len(feats)


def test_score_without_reanchor_is_unchanged_and_reports_drift(run_dir, ukb_export, tmp_path,
                                                                capsys):
    from sphr.risk.model import RiskModel

    out = tmp_path / "scored"
    assert _cli(["score", str(run_dir), str(ukb_export), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("drift: none of")
    scored = pd.read_parquet(out / "risk_groups.parquet")
    baseline = pd.read_parquet(run_dir / "ingest" / "baseline.parquet")
    direct = RiskModel.load(run_dir, device="cpu").score_cohort(baseline).rows
    pd.testing.assert_frame_equal(scored.reset_index(drop=True), direct.reset_index(drop=True))
    fitted = pd.read_parquet(run_dir / "risk" / "risk_groups.parquet")
    held = fitted[fitted["partition"].isin(("calibration", "test"))]
    both = held.merge(scored, on=["eid", "method", "mode"], suffixes=("", "_new"))
    assert len(both) == len(held)
    np.testing.assert_allclose(both["score_new"], both["score"], rtol=1e-6, atol=1e-6)
    assert (both["group_new"] == both["group"]).all()
    drift = pd.read_csv(out / "drift.csv")
    assert len(drift) == sum(len(RiskModel.load(run_dir).sexes_[s].features_)
                             for s in ("female", "male"))
    assert "Drift against the training population" in (out / "report.md").read_text()


def test_on_drift_refuse_exits_with_one_message_and_writes_nothing(run_dir, ukb_export, tmp_path,
                                                                   capsys):
    from sphr.cli import main

    shifted = _shifted(ukb_export, tmp_path / "shifted.csv")
    assert main(["score", str(run_dir), str(shifted), "--out", str(tmp_path / "no"),
                 "--on-drift", "refuse"]) == 2
    err = capsys.readouterr().err
    assert "creatinine" in err and "--on-drift refuse" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()
    assert main(["score", str(run_dir), str(shifted), "--out", str(tmp_path / "yes")]) == 0
    assert "creatinine" in capsys.readouterr().out.splitlines()[0]
    drift = pd.read_csv(tmp_path / "yes" / "drift.csv").set_index(["sex", "feature"])
    assert (drift.xs("creatinine", level="feature")["status"] == "drift").all()
    report = (tmp_path / "yes" / "report.md").read_text()
    assert report.index("creatinine") < report.index("## Scored")  # first thing said


def _files(model: Path) -> dict[str, str]:
    return {p.relative_to(model).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in model.rglob("*") if p.is_file()}


def test_reanchor_refits_only_the_named_parts(run_dir, ukb_export, tmp_path):
    from sphr.io import read_json
    from sphr.risk.serve.apply import run_score

    before = _files(run_dir / "risk" / "model")
    report = run_score(run_dir, ukb_export, tmp_path / "all", device="cpu", reanchor=True,
                       min_bfh=FEW, reanchor_parts=REANCHOR_ALL_PARTS)
    after = _files(tmp_path / "all" / "model")
    prov = read_json(tmp_path / "all" / "model" / "reanchor.json")
    assert prov["reanchored"] == report["reanchored"]["reanchored"]
    for sex in ("female", "male"):
        counts = prov["people"][sex]
        assert counts["bfh_anchor"] >= 14 and counts["bfh_calibration"] > 0
        # learned representations byte-identical
        for name in ("sphr.pt", "deep_patient.joblib"):
            assert after[f"{sex}/{name}"] == before[f"{sex}/{name}"], name
        assert after[f"{sex}/homeostatic_dysregulation.npz"] != \
            before[f"{sex}/homeostatic_dysregulation.npz"]  # its young centre moved
        assert after[f"{sex}/normalizer.json"] != before[f"{sex}/normalizer.json"]
    # only the standardizers and bounds: inputs and references are the fitted model's
    run_score(run_dir, ukb_export, tmp_path / "bounds", device="cpu", reanchor=True,
              min_bfh=FEW, reanchor_parts=("standardizers", "bounds"))
    small = _files(tmp_path / "bounds" / "model")
    old = read_json(run_dir / "risk" / "model" / "risk_model.json")["sexes"]
    new = read_json(tmp_path / "bounds" / "model" / "risk_model.json")["sexes"]
    for sex in ("female", "male"):
        for name in ("normalizer.json", "marker_scaler.json", "sphr.pt", "deep_patient.joblib",
                     "mahalanobis_whitening.npy", "homeostatic_dysregulation.npz",
                     "population.json"):
            assert small[f"{sex}/{name}"] == before[f"{sex}/{name}"], name
        for method, entry in old[sex]["methods"].items():
            for mode, m in entry["modes"].items():
                fresh = new[sex]["methods"][method]["modes"][mode]
                if "strata" in m:
                    assert [s["reference"] for s in fresh["strata"].values()] == \
                        [s["reference"] for s in m["strata"].values()]
                assert fresh["standardizer"] != m["standardizer"] or fresh["bounds"] != m["bounds"]


def test_reanchored_model_holds_95_percent_of_its_calibration_bfh_and_is_reusable(
        run_dir, ukb_export, tmp_path):
    from sphr.risk.serve.apply import run_score

    run_score(run_dir, ukb_export, tmp_path / "a", device="cpu", reanchor=True, min_bfh=FEW)
    rows = pd.read_parquet(tmp_path / "a" / "risk_groups.parquet")
    cal = rows[(rows["partition"] == "calibration") & (rows["label"] == 2)
               & (rows["mode"] == "calibrated") & rows["score"].notna()]
    assert set(rows["partition"]) == {"anchor", "calibration", "scored only"}
    # every sex and every method has calibration BFH to check: an empty frame proves nothing
    methods = set(rows.loc[rows["mode"] == "calibrated", "method"])
    assert set(cal.groupby(["sex", "method"]).groups) == {
        (sex, m) for sex in ("female", "male") for m in methods}
    for (sex, method), g in cal.groupby(["sex", "method"]):
        # the 95% bound is the split-conformal quantile of these very people's scores, so at
        # least 95% of them fall inside it
        share = (g["group"] == "Normal").mean()
        assert share >= 0.95, (sex, method, share, len(g))
    # the saved folder is a model later calls score with: the same scores
    run_score(tmp_path / "a", ukb_export, tmp_path / "b", device="cpu")
    again = pd.read_parquet(tmp_path / "b" / "risk_groups.parquet")
    both = rows.merge(again, on=["eid", "method", "mode"], suffixes=("", "_b"))
    assert len(both) == len(rows)
    np.testing.assert_allclose(both["score_b"], both["score"], rtol=1e-6, atol=1e-6)


def test_too_few_bfh_stops_with_one_message(run_dir, ukb_export, tmp_path):
    from sphr.risk.serve.apply import run_score

    small = tmp_path / "small.csv"
    lines = ukb_export.read_text().splitlines()
    small.write_text("\n".join(lines[:121]) + "\n")  # 120 people: too few BFH per sex
    with pytest.raises(InputError, match="re-anchoring needs at least 50 per sex"):
        run_score(run_dir, small, tmp_path / "out", device="cpu", reanchor=True)
    assert not (tmp_path / "out").exists()


def test_reanchoring_is_seeded(run_dir, ukb_export, tmp_path):
    """The same reanchor_seed gives the same split, model and rows; another seed another
    split (so the seed is used, not ignored)."""
    from sphr.risk.serve.apply import run_score

    for name, seed in (("x", 3), ("y", 3), ("z", 4)):
        run_score(run_dir, ukb_export, tmp_path / name, device="cpu", reanchor=True,
                  reanchor_seed=seed, min_bfh=FEW)
    assert _files(tmp_path / "x" / "model") == _files(tmp_path / "y" / "model")
    x, y, z = (pd.read_parquet(tmp_path / n / "risk_groups.parquet") for n in "xyz")
    assert x.equals(y)
    assert not x["partition"].equals(z["partition"])
    assert _files(tmp_path / "x" / "model") != _files(tmp_path / "z" / "model")


def test_the_refresh_can_score_with_a_reanchored_model(run_dir, ukb_export, tmp_path):
    """Off by default: the run storage's refresh_model names a re-anchored folder, and the
    refresh checks drift against it and scores with it (its groups, not the run's)."""
    import dagster as dg

    from sphr.data.fingerprint import fingerprint
    from sphr.risk.serve.apply import run_score
    from sphr_dagster.definitions import ASSETS, CHECKS
    from sphr_dagster.resources import RunStorage, default_resources

    run_score(run_dir, ukb_export, tmp_path / "re", device="cpu", reanchor=True, min_bfh=FEW)
    assert RunStorage(root=str(run_dir)).scoring_model == run_dir.resolve()  # the default
    resources = default_resources(str(run_dir), export=str(ukb_export), environment=False)
    resources["storage"] = RunStorage(root=str(run_dir), refresh_model=str(tmp_path / "re"))
    result = dg.materialize([*ASSETS, *CHECKS], selection=dg.AssetSelection.groups("refresh"),
                            resources=resources, raise_on_error=False)
    assert result.success
    out = run_dir / "risk" / "refresh" / fingerprint(ukb_export)
    refreshed = pd.read_parquet(out / "risk_groups.parquet")
    mine = pd.read_parquet(tmp_path / "re" / "risk_groups.parquet")
    both = refreshed.merge(mine, on=["eid", "method", "mode"], suffixes=("", "_re"))
    assert len(both) == len(mine)
    np.testing.assert_allclose(both["score"], both["score_re"], rtol=1e-6, atol=1e-6)
    assert (out / "drift.csv").is_file()


def test_reanchoring_fits_nothing_but_the_bounds_on_the_calibration_people(run_dir):
    """Leakage: changing the calibration people's values changes the bounds only; changing
    the anchor people's values changes the rest; nobody's outcome is read (the baseline
    has none)."""
    from sphr.risk.config import REANCHOR_ALL_PARTS
    from sphr.risk.model import RiskModel
    from sphr.risk.serve.reanchor import reanchor

    fitted = RiskModel.load(run_dir, device="cpu")
    baseline = pd.read_parquet(run_dir / "ingest" / "baseline.parquet")
    first, roles = reanchor(fitted, baseline, parts=REANCHOR_ALL_PARTS, min_bfh=FEW)
    assert fitted.provenance_ is None and first.provenance_["seed"] == 0
    cal = set(roles.loc[roles["role"] == "calibration", "eid"])

    def moved(eids: set) -> pd.DataFrame:
        out = baseline.copy()
        out.loc[out["eid"].isin(eids), "creatinine"] *= 1.5  # not a P0 marker: classes stay
        return out

    second, second_roles = reanchor(fitted, moved(cal), parts=REANCHOR_ALL_PARTS, min_bfh=FEW)
    pd.testing.assert_frame_equal(roles, second_roles)
    # every other anchor person: moving all of them alike would keep their ranks, which is
    # all a quantile normalizer reads of them
    anchor = set(sorted(roles.loc[roles["role"] == "anchor", "eid"])[::2])
    third, third_roles = reanchor(fitted, moved(anchor), parts=REANCHOR_ALL_PARTS, min_bfh=FEW)
    pd.testing.assert_frame_equal(roles, third_roles)
    col = fitted.sexes_["female"].features_.index("creatinine")
    for sex in ("female", "male"):
        a, b, c = first.sexes_[sex], second.sexes_[sex], third.sexes_[sex]
        # the anchor people fit the normalizer: moving their creatinine moves its quantiles
        assert not np.array_equal(a.normalizer_.quantiles_[:, col],
                                  c.normalizer_.quantiles_[:, col])
        # ... and the age standardization of the scores measured with them
        assert any(m.standardizer_.center_ != c.methods_[n].modes[k].standardizer_.center_
                   for n, meth in a.methods_.items()
                   for k, m in getattr(meth, "modes", {}).items())
        np.testing.assert_array_equal(a.normalizer_.quantiles_, b.normalizer_.quantiles_)
        for name, method in a.methods_.items():
            for mode, m in getattr(method, "modes", {}).items():
                other = b.methods_[name].modes[mode]
                assert m.strata_.keys() == other.strata_.keys()
                for g in m.strata_:
                    assert m.strata_[g]["reference"] == other.strata_[g]["reference"]
                assert m.standardizer_.center_ == other.standardizer_.center_
        bounds = [(m.bounds_.normal.value, b.methods_[n].modes["calibrated"].bounds_.normal.value)
                  for n, meth in a.methods_.items() for k, m in getattr(meth, "modes", {}).items()
                  if k == "calibrated" and n in ("raw_euclidean", "mahalanobis")]
        assert any(x != y for x, y in bounds)  # the calibration people set the bounds


def test_reanchoring_keeps_the_absolute_risk_models(run_dir, ukb_export, tmp_path):
    # with the rule's parts (standardizers, bounds) the distance the absolute risk reads is
    # the fitted model's, so each person's absolute risk is the unchanged model's
    from sphr.risk.serve.apply import run_score

    run_score(run_dir, ukb_export, tmp_path / "plain", device="cpu")
    run_score(run_dir, ukb_export, tmp_path / "re", device="cpu", reanchor=True, min_bfh=FEW,
              reanchor_parts=("standardizers", "bounds"))
    plain = pd.read_parquet(tmp_path / "plain" / "absolute_risk.parquet")
    re = pd.read_parquet(tmp_path / "re" / "absolute_risk.parquet")
    assert len(plain) > 0 and len(re) == len(plain)
    both = plain.merge(re, on=["eid", "outcome"], suffixes=("", "_re"))
    np.testing.assert_allclose(both["risk_10y_re"], both["risk_10y"], rtol=1e-12)
    # ... and the saved re-anchored folder scores them too
    run_score(tmp_path / "re", ukb_export, tmp_path / "again", device="cpu")
    assert len(pd.read_parquet(tmp_path / "again" / "absolute_risk.parquet")) == len(plain)
