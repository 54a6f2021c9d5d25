"""sphr synth + sphr ingest: every export form gives the same baseline and follow-up."""

from __future__ import annotations

import polars as pl
import pytest

from sphr.data.fields import PREDICTOR_NAMES
from sphr.data.ingest import ingest, run_ingest
from sphr.synth.export import FORMATS, default_suffix, truth_path, write_export


@pytest.fixture(scope="module")
def reference(ukb_export):
    return ingest(ukb_export)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "ukbconv"])
def test_every_format_gives_the_same_baseline(tmp_path, synthetic_cohort, reference, fmt):
    path = write_export(synthetic_cohort, tmp_path / f"ukb{default_suffix(fmt)}", fmt,
                        decoys=25, seed=11)
    result = ingest(path)
    assert result.baseline.equals(reference.baseline)
    assert result.followup.equals(reference.followup)


def test_baseline_schema_and_labels(reference):
    base = reference.baseline
    assert base["eid"].is_unique().all()
    assert set(PREDICTOR_NAMES) <= set(base.columns)
    assert set(base["label"].unique()) == {"unhealthy", "apparently_healthy", "unknown"}
    assert base.schema["sex"] == pl.Int8 and base.schema["cholesterol"] == pl.Float64
    # special codes never reach a model as numbers
    assert base["sleep_duration"].min() >= 1
    for col in ("diabetes", "cancer", "other_serious"):
        assert set(base[col].drop_nulls().unique()) <= {0, 1}


def test_decoys_and_truth_stay_out(ukb_export, reference):
    report = reference.report
    assert report["columns_in_file"] > report["columns_read"] + 25
    header = ukb_export.read_text().split("\n", 1)[0]
    assert "metabolic" not in header and "hazard" not in header
    truth = pl.read_parquet(truth_path(ukb_export))
    assert {"metabolic", "hazard_diabetes", "onset_years_diabetes"} <= set(truth.columns)
    assert truth.height == reference.baseline.height


def test_report_counts(reference):
    r = reference.report
    assert r["participants"] == 2_000 and r["rows_read"] == 2_000
    by_sex = r["labels_by_sex"]
    assert sum(sum(v.values()) for v in by_sex.values()) == 2_000
    codes = r["special_codes"]["2443-0.0 (diabetes)"]
    assert set(codes) <= {"-1", "-3"} and sum(codes.values()) > 0
    assert "-7" in r["special_codes"]["6177-0.0 (medication_men)"]
    assert 0.80 < r["completeness"]["hdl"] < 0.92  # UKB: ~14% missing
    assert r["completeness"]["age"] == 1.0


def test_followup_matches_the_truth(ukb_export, reference):
    truth = pl.read_parquet(truth_path(ukb_export))
    fu = reference.followup.join(truth.select("eid", "onset_years_diabetes"), on="eid")
    assert fu.height > 0 and set(fu["instance"].unique()) <= {1, 2, 3}
    # the repeat visit (Aug 2012 - Jun 2013) comes at least ~1.8 years after a baseline visit
    # (which ran to Oct 2010)
    assert (fu["years_since_baseline"] > 1.8).all()
    new = fu.filter(pl.col("new_diabetes") == True)  # noqa: E712
    # a new diagnosis at a visit means the true onset came before that visit
    assert (new["onset_years_diabetes"] <= new["years_since_baseline"] + 0.01).all()


def test_same_seed_same_export(tmp_path, synthetic_cohort):
    from sphr.synth.cohort import generate_cohort

    a = write_export(generate_cohort(300, seed=5), tmp_path / "a.csv", "ukbconv", decoys=5, seed=5)
    b = write_export(generate_cohort(300, seed=5), tmp_path / "b.csv", "ukbconv", decoys=5, seed=5)
    c = write_export(generate_cohort(300, seed=6), tmp_path / "c.csv", "ukbconv", decoys=5, seed=6)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_cli_round_trip(tmp_path, capsys):
    from sphr.cli import main

    export = tmp_path / "ukb.tsv"
    assert main(["synth", "--participants", "400", "--seed", "3", "--format", "tsv",
                 "--out", str(export)]) == 0
    assert main(["ingest", str(export), "--out", str(tmp_path / "ingest")]) == 0
    out = capsys.readouterr().out
    assert "labels by sex" in out
    assert {p.name for p in (tmp_path / "ingest").iterdir()} == {
        "baseline.parquet", "followup.parquet", "outcomes.parquet", "ingest_report.json"}
    assert pl.read_parquet(tmp_path / "ingest" / "baseline.parquet").height == 400
    assert "outcomes:" in out


def test_run_ingest_writes_atomically(tmp_path, ukb_export):
    out = tmp_path / "ingest"
    run_ingest(ukb_export, out)
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
