"""``sphr score``'s report in the main report's structure (issue 48): with linked records in
the export, the people scored are judged as the risk stage judges its held-out people (the
verdict first, a group-ordering table per sex, dC per score; OUT/beyond_age.parquet and
OUT/group_ordering.parquet); without them the report says the ordering cannot be judged, and
why. A small fitted run (two distances, mode calibrated) and the 2,000-person synthetic
export."""

from __future__ import annotations

import json

import pandas as pd
import pytest

METHODS = ("raw_euclidean", "mahalanobis")


@pytest.fixture(scope="module")
def run(tmp_path_factory, ingest_dir, cohorts_dir):
    from sphr.risk.config import RiskConfig
    from sphr.risk.model import RiskModel
    from sphr.risk.pipeline import risk_for_sex

    run = tmp_path_factory.mktemp("score_run")
    (run / "ingest").symlink_to(ingest_dir)
    (run / "cohorts").symlink_to(cohorts_dir)
    config = RiskConfig(methods=METHODS, modes=("calibrated",), n_bootstrap=10,
                        n_bootstrap_linked=10)
    for sex in ("female", "male"):
        risk_for_sex(run, sex, run / "risk" / sex, config)
    RiskModel.combine([RiskModel.load(run / "risk" / s / "model")
                       for s in ("female", "male")]).save(run / "risk" / "model")
    return run


@pytest.fixture(scope="module")
def scored(run, ukb_export, tmp_path_factory):
    from sphr.risk.serve.apply import run_score

    out = tmp_path_factory.mktemp("scored") / "out"
    return out, run_score(run, ukb_export, out, device="cpu")


def test_score_judges_its_groups_on_the_exports_linked_records(scored):
    from sphr.risk.report.frames import ordering_label

    out, report = scored
    assert report["ordering"]["judged"] and "death" in report["ordering"]["outcomes"]
    order = pd.read_parquet(out / "group_ordering.parquet")
    gain = pd.read_parquet(out / "beyond_age.parquet")
    assert set(order["method"]) == set(METHODS) == set(gain["method"])
    assert set(order["sex"]) == {"female", "male"}
    # the people judged are the people scored into a group with records of the outcome,
    # that outcome's prevalent cases left out
    rows = pd.read_parquet(out / "risk_groups.parquet")
    outcomes = pd.read_parquet(out / "outcomes.parquet")
    death = outcomes.loc[(outcomes["outcome"] == "death") & ~outcomes["prevalent"].astype(bool)]
    people = rows.loc[(rows["method"] == "raw_euclidean") & rows["group"].notna()]
    people = people.loc[people["eid"].isin(death["eid"])]
    got = order.loc[(order["method"] == "raw_euclidean") & (order["outcome"] == "death")
                    & (order["group"] != "outside Normal")]
    assert int(got["n"].sum()) == len(people) > 0
    # the verdict first, then a table per sex whose verdict row reads the frame's words
    text = (out / "report.md").read_text()
    assert text.index("Verdict") < text.index("Women:") < text.index("Men:") \
        < text.index("What each score adds to age") < text.index("Drift against")
    assert "the people scored from this export" in text
    for sex, who in (("female", "Women:"), ("male", "Men:")):
        block = order.loc[(order["sex"] == sex) & (order["method"] == "mahalanobis")
                          & (order["outcome"] == "death")]
        section = text[text.index(who):]
        verdict_row = next(line for line in section.splitlines() if "groups ordered?" in line)
        assert ordering_label(block) in verdict_row
    html = (out / "report.html").read_text()
    assert html.index("Verdict") < html.index("Drift against")


def test_score_without_linked_records_says_why(run, synthetic_cohort, tmp_path):
    from sphr.risk.serve.apply import run_score
    from sphr.synth.export import write_export

    bare = write_export(synthetic_cohort, tmp_path / "bare.csv", "ukbconv", decoys=0, seed=11,
                        linked=False)
    report = run_score(run, bare, tmp_path / "out", device="cpu")
    assert not report["ordering"]["judged"]
    assert not (tmp_path / "out" / "group_ordering.parquet").exists()
    assert not (tmp_path / "out" / "beyond_age.parquet").exists()
    text = (tmp_path / "out" / "report.md").read_text()
    assert "cannot be judged on this export: the export has none of the linked fields" in text
    assert json.loads((tmp_path / "out" / "score_report.json").read_text())["ordering"][
        "why"] == report["ordering"]["why"]


def test_score_builds_the_outcomes_with_the_release_file(run, ukb_export, scored, tmp_path):
    """--outcomes release.json: the censoring dates of the release, as the pipeline's ingest
    takes them; an earlier death registry date follows nobody past it."""
    from sphr.risk.serve.apply import run_score

    release = tmp_path / "release.json"
    release.write_text(json.dumps({"censoring": {"death": "2015-01-31"}}))
    run_score(run, ukb_export, tmp_path / "out", device="cpu", outcomes=str(release))
    early = pd.read_parquet(tmp_path / "out" / "outcomes.parquet")
    late = pd.read_parquet(scored[0] / "outcomes.parquet")
    e, d = (f.loc[f["outcome"] == "death"] for f in (early, late))
    assert e["time_years"].max() < d["time_years"].max()
    assert e["event"].sum() <= d["event"].sum()


def test_the_refresh_judges_its_groups_or_says_why(run, ukb_export):
    from sphr.data.ingest import ingest
    from sphr.risk.serve.refresh import run_refresh

    result = ingest(ukb_export)
    baseline, outcomes = result.baseline.to_pandas(), result.outcomes.to_pandas()
    info = run_refresh(run, baseline, ukb_export, "v-linked", device="cpu", outcomes=outcomes,
                       date="2026-01-01")
    out = run / "risk" / "refresh" / "v-linked"
    assert info["ordering"]["judged"]
    order = pd.read_parquet(out / "group_ordering.parquet")
    assert set(order["sex"]) == {"female", "male"} and set(order["method"]) == set(METHODS)
    text = (out / "report.md").read_text()
    assert text.index("Verdict") < text.index("Women:") < text.index("Men:") \
        < text.index("What each score adds to age") < text.index("Changes since")
    assert "everyone scored in this refresh" in text
    why = "the export has none of the linked fields (test)"
    info = run_refresh(run, baseline, ukb_export, "v-bare", device="cpu", no_outcomes=why,
                       date="2026-01-02")
    out = run / "risk" / "refresh" / "v-bare"
    assert not info["ordering"]["judged"] and not (out / "group_ordering.parquet").exists()
    text = (out / "report.md").read_text()
    assert f"cannot be judged on this export: {why}." in text
    assert text.index("cannot be judged") < text.index("Changes since")
