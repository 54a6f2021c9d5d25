"""Outcomes from linked records: ingest in every layout, censoring, errors, synthetic incidence."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sphr.data.ingest import ingest, run_ingest
from sphr.data.outcomes import OUTCOMES, OutcomeConfig
from sphr.errors import ConfigError, InputError
from sphr.synth.export import FORMATS, default_suffix, truth_path, write_export
from sphr.synth.linked import TARGET_10Y

BASELINE = dt.date(2008, 1, 2)
LEGACY_BASE = ["eid", "31-0.0", "53-0.0", "21003-0.0", "2443-0.0", "2453-0.0", "2473-0.0",
               "6153-0.0", "6153-0.1", "6177-0.0", "30690-0.0"]
RAP_BASE = ["eid", "p31", "p53_i0", "p21003_i0", "p2443_i0", "p2453_i0", "p2473_i0",
            "p6153_i0_a0", "p6153_i0_a1", "p6177_i0_a0", "p30690_i0"]
LEGACY_LINKED = ["40000-0.0", "40001-0.0", "40002-0.0", "40002-0.1", "40005-0.0", "40005-1.0",
                 "40006-0.0", "40006-1.0", "41270-0.0", "41270-0.1", "41270-0.2", "41280-0.0",
                 "41280-0.1", "41280-0.2"]
RAP_LINKED = ["p40000_i0", "p40001_i0", "p40002_i0", "p40005_i0", "p40005_i1", "p40006_i0",
              "p40006_i1", "p41270", "p41280_a0", "p41280_a1", "p41280_a2"]
LABEL = {"E119": "E11.9 Non-insulin-dependent diabetes mellitus: Without complications",
         "E11": "E11 Non-insulin-dependent diabetes mellitus",
         "I219": "I21.9 Acute myocardial infarction, unspecified",
         "I10": "I10 Essential (primary) hypertension",
         "C509": "C50.9 Breast, unspecified", "C443": "C44.3 Skin of other parts of face",
         "C349": "C34.9 Bronchus or lung, unspecified",
         "J449": "J44.9 Chronic obstructive pulmonary disease, unspecified"}

# eid: hospital [(code, date)] by array index (None = empty slot), registrations
# [(code, date)] by instance, death (date, underlying, [contributory])
PEOPLE: dict[int, dict] = {
    # an empty first slot (a gap), diabetes before baseline (prevalent), an infarction after
    1001: {"hospital": [None, ("E119", "2005-03-01"), ("I219", "2012-06-01")]},
    # hypertension and non-melanoma skin cancer are in no outcome set; breast cancer is
    1002: {"hospital": [("I10", "2010-01-01")],
           "cancer": [("C509", "2015-05-05"), ("C443", "2011-01-01")]},
    # both records after their sources' censoring dates
    1003: {"hospital": [("E119", "2023-01-15")], "cancer": [("C509", "2021-06-01")]},
    # death: causes are events on its date; a hospital record after death is censored
    1004: {"hospital": [("C349", "2016-01-01")], "death": ("2015-03-03", "I219", ["E119", "I10"])},
    # death censors the later hospital diabetes record
    1005: {"hospital": [("E119", "2018-01-01")], "death": ("2014-01-01", "J449", [])},
    1006: {},
    # UK Biobank's "date unknown": the code cannot be placed in time
    1007: {"hospital": [("E119", "1900-01-01")]},
    # cancer on the baseline day is prevalent; a bare category counts
    1008: {"hospital": [("C509", "2008-01-02"), ("E11", "2009-05-05")]},
}


def _base_row(eid: int, sex: int) -> list[str]:
    return [str(eid), str(sex), BASELINE.isoformat(), "55", "0", "0", "0",
            *(("-7", "") if sex == 0 else ("", "")), "" if sex == 0 else "-7", "5.1"]


def _legacy_row(eid: int, rec: dict) -> list[str]:
    death = rec.get("death")
    hosp = rec.get("hospital", []) + [None] * 3
    cancer = rec.get("cancer", []) + [None] * 2
    contributory = (death[2] if death else []) + [None] * 2
    return [
        death[0] if death else "", death[1] if death else "",
        *(c or "" for c in contributory[:2]),
        *(c[1] if c else "" for c in cancer[:2]), *(c[0] if c else "" for c in cancer[:2]),
        *(h[0] if h else "" for h in hosp[:3]), *(h[1] if h else "" for h in hosp[:3]),
    ]


def _rap_row(eid: int, rec: dict, labels: bool) -> list[str]:
    death = rec.get("death")
    hosp = rec.get("hospital", [])
    cancer = rec.get("cancer", []) + [None] * 2

    def code(c: str | None) -> str:
        return "" if c is None else LABEL[c] if labels else c

    def many(codes: list[str | None]) -> str:
        if not codes:
            return ""
        if labels:  # Table Exporter: '|'-separated labels, an empty slot stays empty
            return "|".join(code(c) for c in codes)
        return json.dumps([c for c in codes])  # dx extract_dataset: a JSON list, null gaps

    dates = [h[1] if h else "" for h in hosp] + [""] * (3 - len(hosp))
    return [
        death[0] if death else "", code(death[1]) if death else "",
        many(death[2]) if death else "",
        *(c[1] if c else "" for c in cancer[:2]), *(code(c[0]) if c else "" for c in cancer[:2]),
        many([h[0] if h else None for h in hosp]), *dates,
    ]


def write_linked(path: Path, layout: str = "legacy", people: dict | None = None,
                 edit=None) -> Path:
    people = PEOPLE if people is None else people
    if layout == "legacy":
        header = LEGACY_BASE + LEGACY_LINKED
        rows = [_base_row(e, i % 2) + _legacy_row(e, r) for i, (e, r) in enumerate(people.items())]
    else:
        prefix = "participant." if layout == "rap" else ""
        header = [prefix + c for c in RAP_BASE + RAP_LINKED]
        rows = [_base_row(e, i % 2) + _rap_row(e, r, layout == "rap-labels")
                for i, (e, r) in enumerate(people.items())]
    if edit is not None:
        edit(header, rows)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def years(date: str) -> float:
    return (dt.date.fromisoformat(date) - BASELINE).days / 365.25


def table(outcomes: pl.DataFrame) -> dict[tuple[int, str], dict]:
    return {(r["eid"], r["outcome"]): r for r in outcomes.iter_rows(named=True)}


# --------------------------------------------------------------------------- hand-made exports
@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    path = write_linked(tmp_path_factory.mktemp("linked") / "ukb.csv")
    return ingest(path)


def test_outcome_rows_and_schema(legacy):
    out = legacy.outcomes
    assert out.columns == ["eid", "outcome", "event", "time_years", "prevalent", "source",
                           "event_date"]
    assert out.schema["event"] == pl.Int8 and out.schema["prevalent"] == pl.Boolean
    assert out.height == len(PEOPLE) * len(OUTCOMES)
    assert out["outcome"].to_list()[:4] == [o.name for o in OUTCOMES]


def test_prevalent_gap_and_incident(legacy):
    t = table(legacy.outcomes)
    # the empty slot 0 does not shift the dates: E11.9 keeps 2005-03-01 and is prevalent
    dm = t[(1001, "type2_diabetes")]
    assert dm["prevalent"] and dm["event"] == 1 and dm["time_years"] == 0
    assert dm["source"] == "hospital" and dm["event_date"] == dt.date(2005, 3, 1)
    cvd = t[(1001, "cardiovascular")]
    assert not cvd["prevalent"] and cvd["event"] == 1
    assert cvd["time_years"] == pytest.approx(years("2012-06-01"))
    cancer = t[(1002, "cancer")]
    assert cancer["event"] == 1 and cancer["source"] == "cancer_registry"
    assert cancer["time_years"] == pytest.approx(years("2015-05-05"))
    # on the baseline day counts as before baseline
    assert t[(1008, "cancer")]["prevalent"]
    assert t[(1008, "type2_diabetes")]["event"] == 1  # "E11" without a subcode
    none = t[(1006, "cancer")]
    assert none["event"] == 0 and none["source"] is None and none["event_date"] is None
    assert none["time_years"] == pytest.approx(years("2020-12-31"))  # cancer registry's date
    assert t[(1006, "cardiovascular")]["time_years"] == pytest.approx(years("2022-10-31"))
    assert t[(1006, "death")]["time_years"] == pytest.approx(years("2022-11-30"))


def test_event_after_censoring_date_is_censored(legacy):
    t = table(legacy.outcomes)
    cancer, dm = t[(1003, "cancer")], t[(1003, "type2_diabetes")]
    assert cancer["event"] == 0 and cancer["time_years"] == pytest.approx(years("2020-12-31"))
    assert dm["event"] == 0 and dm["time_years"] == pytest.approx(years("2022-10-31"))
    by = legacy.report["outcomes"]["by_outcome"]
    assert by["cancer"]["after_censoring"] == 1 and by["type2_diabetes"]["after_censoring"] == 1


def test_death_is_an_event_and_censors_other_outcomes(legacy):
    t = table(legacy.outcomes)
    died = years("2015-03-03")
    assert t[(1004, "death")]["event"] == 1
    assert t[(1004, "death")]["time_years"] == pytest.approx(died)
    # the causes on the death certificate are events on the date of death
    for outcome in ("cardiovascular", "type2_diabetes"):
        row = t[(1004, outcome)]
        assert row["event"] == 1 and row["source"] == "death"
        assert row["time_years"] == pytest.approx(died)
    # the lung cancer recorded after death does not count: censored at death
    assert t[(1004, "cancer")]["event"] == 0
    assert t[(1004, "cancer")]["time_years"] == pytest.approx(died)
    dm = t[(1005, "type2_diabetes")]
    assert dm["event"] == 0 and dm["time_years"] == pytest.approx(years("2014-01-01"))
    by = legacy.report["outcomes"]["by_outcome"]
    assert by["type2_diabetes"]["censored_at_death"] == 1
    assert by["cancer"]["after_death"] == 1
    assert by["death"]["events"] == 2


def test_codes_outside_every_outcome_are_ignored_and_counted(legacy):
    r = legacy.report["outcomes"]
    # I10 (hospital), C44.3 (registry), J44.9 and I10 (death)
    assert r["codes_outside_every_outcome"] == {"cancer_registry": 1, "hospital": 1, "death": 2}
    assert r["most_common_codes_outside"]["I10"] == 2
    t = table(legacy.outcomes)
    assert all(t[(1002, o)]["event"] == 0 for o in ("type2_diabetes", "cardiovascular"))


def test_placeholder_dates_are_missing_and_counted(legacy):
    r = legacy.report["outcomes"]
    assert r["special_dates"] == {"41280 (hospital_icd10_date)": {"1900-01-01": 1}}
    assert r["codes_without_date"] == {"hospital": 1}
    assert table(legacy.outcomes)[(1007, "type2_diabetes")]["event"] == 0


@pytest.mark.parametrize("layout", ["rap", "rap-labels"])
def test_rap_layouts_give_the_same_outcomes(tmp_path, legacy, layout):
    result = ingest(write_linked(tmp_path / "rap.csv", layout))
    assert result.outcomes.equals(legacy.outcomes)
    assert result.report["outcomes"]["codes_outside_every_outcome"] == (
        legacy.report["outcomes"]["codes_outside_every_outcome"])


def test_parquet_with_list_columns(tmp_path, legacy):
    """A RAP parquet keeps the whole 41270 array in one list column, nulls in the gaps."""
    csv_path = write_linked(tmp_path / "rap.csv", "rap")
    frame = pl.read_csv(csv_path, infer_schema=False)
    frame = frame.rename({c: c.removeprefix("participant.") for c in frame.columns})
    frame = frame.with_columns(
        [pl.col(c).str.json_decode(pl.List(pl.String)) for c in ("p41270", "p40002_i0")]
        + [pl.col(c).str.to_date() for c in frame.columns
           if c.startswith(("p41280", "p40005", "p40000", "p53"))])
    frame.write_parquet(tmp_path / "rap.parquet")
    assert ingest(tmp_path / "rap.parquet").outcomes.equals(legacy.outcomes)


def test_malformed_date_names_file_field_and_row(tmp_path):
    def edit(header, rows):
        rows[2][header.index("41280-0.2")] = "2012-13-45"

    path = write_linked(tmp_path / "ukb.csv", edit=edit)
    with pytest.raises(InputError) as info:
        run_ingest(path, tmp_path / "out")
    err = info.value
    assert "'2012-13-45' is not a date" in str(err) and str(path) in str(err)
    assert err.field == "41280-0.2 (hospital_icd10_date)" and err.row == 3
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("row", "column", "value", "message", "field"), [
    (4, "40006-1.0", "12.5", "not an ICD-10 code", "40006-1.0 (cancer_icd10)"),
    (1, "41270-0.1", "E119|I10", "several values in one array column",
     "41270-0.1 (hospital_icd10)"),
], ids=["malformed_code", "list_in_an_array_column"])
def test_malformed_code_and_list_in_an_array_column(tmp_path, row, column, value, message, field):
    def edit(header, rows):
        rows[row][header.index(column)] = value

    with pytest.raises(InputError) as info:
        ingest(write_linked(tmp_path / "a.csv", edit=edit))
    assert message in str(info.value)
    assert info.value.field == field and info.value.row == row + 1


def test_export_without_linked_fields(tmp_path, legacy):
    out = tmp_path / "out"
    run_ingest(write_linked(tmp_path / "a.csv"), out)
    assert (out / "outcomes.parquet").exists()
    saved = pl.read_parquet(out / "outcomes.parquet")
    assert saved.equals(legacy.outcomes)

    def drop_linked(header, rows):
        keep = len(LEGACY_BASE)
        del header[keep:]
        for r in rows:
            del r[keep:]

    result = run_ingest(write_linked(tmp_path / "b.csv", edit=drop_linked), out)
    assert result.outcomes is None
    report = json.loads((out / "ingest_report.json").read_text())
    assert report["outcomes"]["written"] is False and "none of the linked" in (
        report["outcomes"]["why"])
    # the earlier export's outcomes would pass for this one's
    assert not (out / "outcomes.parquet").exists()


def test_a_source_with_codes_but_no_dates_is_a_warning(tmp_path):
    def drop_dates(header, rows):
        for name in [c for c in header if c.startswith("41280")]:
            i = header.index(name)
            del header[i]
            for r in rows:
                del r[i]

    result = ingest(write_linked(tmp_path / "a.csv", edit=drop_dates))
    assert any("41270" in w and "41280" in w for w in result.report["warnings"])
    report = result.report["outcomes"]
    assert report["sources_present"] == ["cancer_registry", "death"]
    # cardiovascular is still built from the death registry alone, censored at its date
    row = table(result.outcomes)[(1006, "cardiovascular")]
    assert row["time_years"] == pytest.approx(years("2022-11-30"))
    assert report["by_outcome"]["cardiovascular"]["sources_missing"] == [
        "hospital", "first_occurrence", "algorithmic"]


# --------------------------------------------------------------------------- configuration
def test_overrides_change_codes_sources_and_dates(tmp_path):
    path = write_linked(tmp_path / "ukb.csv")
    config = OutcomeConfig.from_overrides({
        "outcomes": {"cardiovascular": {"codes": ["I20-I25", "I60-I64", "I10"]},
                     "copd": {"codes": ["J44"], "sources": ["death"], "title": "COPD"},
                     "death": None},
        "censoring": {"cancer_registry": "2022-12-31"},
    })
    result = ingest(path, outcome_config=config)
    t = table(result.outcomes)
    assert {o for _, o in t} == {"type2_diabetes", "cancer", "cardiovascular", "copd"}
    assert t[(1002, "cardiovascular")]["event"] == 1  # I10 now counts
    assert t[(1005, "copd")]["event"] == 1
    # cancer follows up to the earliest of its sources' dates: now the hospital's
    assert t[(1003, "cancer")]["event"] == 1
    assert t[(1006, "cancer")]["time_years"] == pytest.approx(years("2022-10-31"))


@pytest.mark.parametrize(("override", "message"), [
    ({"outcomes": {"x": {"codes": ["E11"]}}}, "needs 'codes' and 'sources'"),
    ({"outcomes": {"cancer": {"codes": ["C00-C9"]}}}, "not an ICD-10 code"),
    ({"outcomes": {"cancer": {"sources": ["gp"]}}}, "unknown source"),
    ({"censoring": {"gp": "2020-01-01"}}, "unknown source"),
    ({"censoring": {"hospital": "31/10/2022"}}, "not a date"),
    ({"outcome": {}}, "outcome override: no key 'outcome'"),
])
def test_bad_overrides(override, message):
    with pytest.raises(ConfigError, match=message):
        OutcomeConfig.from_overrides(override)


def test_cli_outcome_override(tmp_path, capsys):
    from sphr.cli import main

    path = write_linked(tmp_path / "ukb.csv")
    override = tmp_path / "outcomes.json"
    override.write_text(json.dumps({"outcomes": {"death": None}}))
    assert main(["ingest", str(path), "--out", str(tmp_path / "out"), "--outcomes",
                 str(override)]) == 0
    assert "outcomes:" in capsys.readouterr().out
    saved = pl.read_parquet(tmp_path / "out" / "outcomes.parquet")
    assert "death" not in saved["outcome"].to_list()


# --------------------------------------------------------------------------- synthetic cohort
def test_every_synthetic_format_gives_the_same_outcomes(tmp_path, synthetic_cohort, ukb_export):
    reference = ingest(ukb_export).outcomes
    assert reference is not None and reference.height == 4 * 2_000
    for fmt in (f for f in FORMATS if f != "ukbconv"):
        path = write_export(synthetic_cohort, tmp_path / f"ukb{default_suffix(fmt)}", fmt,
                            decoys=25, seed=11)
        assert ingest(path).outcomes.equals(reference), fmt


def test_generator_is_deterministic_and_keeps_existing_outputs():
    from sphr.synth.cohort import generate_cohort

    a, b = generate_cohort(500, seed=9), generate_cohort(500, seed=9)
    plain = generate_cohort(500, seed=9, linked=False)
    assert a.linked.equals(b.linked) and a.truth.equals(b.truth)
    # the linked records come from their own stream: nothing else moves
    assert a.visits.equals(plain.visits)
    assert a.truth[plain.truth.columns].equals(plain.truth)
    assert {"true_years_cancer", "true_years_cardiovascular", "true_years_death"} <= set(
        a.truth.columns)
    assert not a.linked.equals(generate_cohort(500, seed=10).linked)


@pytest.fixture(scope="module")
def cohort_20k(tmp_path_factory):
    from sphr.synth.cohort import generate_cohort

    cohort = generate_cohort(20_000, seed=0)
    path = write_export(cohort, tmp_path_factory.mktemp("big") / "ukb.csv", "ukbconv",
                        decoys=0, seed=0)
    return cohort, ingest(path), path


def test_synthetic_incidence_is_in_the_documented_ranges(cohort_20k):
    _, result, _ = cohort_20k
    by = result.report["outcomes"]["by_outcome"]
    for outcome, (low, high) in TARGET_10Y.items():
        assert low <= by[outcome]["cumulative_incidence_10y"] <= high, (outcome, by[outcome])
    # records run past the censoring dates, and deaths censor the other outcomes
    assert all(by[o]["after_censoring"] > 0 for o in by)
    assert by["cancer"]["censored_at_death"] > 0
    report = result.report["outcomes"]
    assert report["codes_outside_every_outcome"]["hospital"] > 0
    assert report["special_dates"]["41280 (hospital_icd10_date)"]["1900-01-01"] > 0


def test_synthetic_prevalence_agrees_with_baseline_self_reports(cohort_20k):
    _, result, path = cohort_20k
    truth = pl.read_parquet(truth_path(path))
    prevalent = result.outcomes.filter(pl.col("prevalent")).join(truth, on="eid")
    dm = prevalent.filter(pl.col("outcome") == "type2_diabetes")
    cancer = prevalent.filter(pl.col("outcome") == "cancer")
    cvd = prevalent.filter(pl.col("outcome") == "cardiovascular")
    assert dm.height > 100 and (dm["onset_years_diabetes"] == 0).all()
    assert cancer.height > 100 and (cancer["onset_years_cancer"] == 0).all()
    assert cvd.height > 100 and (cvd["true_years_cardiovascular"] == 0).all()
    # and most participants diabetic at baseline have no earlier hospital record of it
    share = dm.height / int((truth["onset_years_diabetes"] == 0).sum())
    assert 0.3 < share < 0.7


def test_synthetic_events_follow_the_latent_hazards(cohort_20k):
    cohort, result, _ = cohort_20k
    t = cohort.truth
    out = result.outcomes.filter(~pl.col("prevalent")).to_pandas().merge(t, on="eid")
    for outcome, latent in (("type2_diabetes", "metabolic"), ("cardiovascular", "metabolic"),
                            ("death", "frailty")):
        sub = out[out["outcome"] == outcome]
        high = sub[latent] > np.quantile(sub[latent], 0.75)
        assert sub.loc[high, "event"].mean() > 1.8 * sub.loc[~high, "event"].mean(), outcome
    # the truth keeps the true times: every recorded incident death is the true one
    deaths = out[(out["outcome"] == "death") & (out["event"] == 1)]
    assert np.allclose(deaths["time_years"], deaths["true_years_death"], atol=1 / 365)


def test_small_blocks_give_the_same_outcomes_and_rows(tmp_path, monkeypatch, ukb_export):
    """Many reader blocks and many side-hook passes: same table, right row numbers."""
    import sphr.data.outcomes.collector as collector
    import sphr.data.reader as reader

    reference = ingest(ukb_export).outcomes
    monkeypatch.setattr(reader, "_BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(collector, "_BUFFER_CELLS", 500)
    assert ingest(ukb_export).outcomes.equals(reference)
    lines = ukb_export.read_text().split("\n")
    header = next(csv.reader([lines[0]]))
    col = header.index("41280-0.0")
    row = next(i for i in range(1500, 2000) if next(csv.reader([lines[i]]))[col])
    cells = next(csv.reader([lines[row]]))
    cells[col] = "2012/06/01"
    lines[row] = ",".join(f'"{c}"' for c in cells)
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines))
    with pytest.raises(InputError) as info:
        ingest(bad)
    assert info.value.row == row and info.value.field == "41280-0.0 (hospital_icd10_date)"


def test_truncated_last_row_drops_its_outcomes(tmp_path, ukb_export):
    data = ukb_export.read_bytes()
    cut = tmp_path / "ukb.csv"
    cut.write_bytes(data[: len(data) - 700])
    result = ingest(cut, drop_truncated_last_row=True)
    assert result.outcomes.height == 4 * 1_999
    assert set(result.outcomes["eid"].unique()) == set(result.baseline["eid"])
