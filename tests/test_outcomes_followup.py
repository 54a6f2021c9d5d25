"""Follow-up as UK Biobank epidemiologists define it, on exports written by hand: censoring at
the date lost to follow-up (191) and at each country's date (assessment centre 54), First
Occurrence (category 1712) and algorithmically-defined (category 42) sources, ICD-9 hospital
records (41271/41281), placeholder dates; legacy and RAP layouts, and `sphr ingest
--outcomes release.json`. Expected rows come from :func:`expected`, a plain-Python reading of
the rules in docs/OUTCOMES.md, not from the ingest's own code."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest

from sphr.data.fields import CENTRE_CODING
from sphr.data.ingest import ingest
from sphr.data.outcomes import SPECIAL_DATES, OutcomeConfig, load_outcome_config
from sphr.errors import ConfigError, InputError

BASELINE = dt.date(2008, 1, 2)
BASE = ["31-0.0", "53-0.0", "21003-0.0", "2443-0.0", "2453-0.0", "2473-0.0", "6153-0.0",
        "6177-0.0", "30690-0.0"]
RAP_BASE = ["p31", "p53_i0", "p21003_i0", "p2443_i0", "p2453_i0", "p2473_i0", "p6153_i0_a0",
            "p6177_i0_a0", "p30690_i0"]
#: one legacy column per (field, index) and its RAP name; 41270/41271 are one RAP list column
LINKED = [("54-0.0", "p54_i0"), ("191-0.0", "p191"), ("40000-0.0", "p40000_i0"),
          ("40001-0.0", "p40001_i0"), ("40005-0.0", "p40005_i0"), ("40006-0.0", "p40006_i0"),
          ("41280-0.0", "p41280_a0"), ("41280-0.1", "p41280_a1"),
          ("41281-0.0", "p41281_a0"), ("41281-0.1", "p41281_a1"),
          ("130708-0.0", "p130708"), ("130709-0.0", "p130709"), ("131298-0.0", "p131298"),
          ("131299-0.0", "p131299"), ("131492-0.0", "p131492"),
          ("42000-0.0", "p42000"), ("42001-0.0", "p42001"), ("42006-0.0", "p42006")]
FO_FIELD = {"E11": "130708", "I21": "131298", "J44": "131492"}
ALG_FIELD = {"myocardial_infarction": "42000", "stroke": "42006"}

# centre (coding 10), lost (191), hospital ICD-10 / ICD-9 [(code, date)], cancer (code, date),
# death (date, underlying cause), first occurrences {code: date}, algorithmic {name: date}
PEOPLE: dict[int, dict] = {
    # England, lost to follow-up in 2010: the later diabetes record is after it, censored
    2001: {"centre": 11010, "lost": "2010-06-30", "hosp": [("E119", "2012-01-01")]},
    # Scotland: an infarction after Scotland's hospital date but before England's is censored
    2002: {"centre": 11004, "hosp": [("I219", "2021-10-01")]},
    # Wales: diabetes only in the First Occurrences
    2003: {"centre": 11003, "fo": {"E11": "2015-05-05"}},
    # no centre: England's dates (counted)
    2004: {"hosp": [("I10", "2012-02-02")]},
    # ICD-9 only: a 1994 infarction is prevalent; 250 (diabetes, any type) is in no set
    2005: {"centre": 11022, "icd9": [("4109", "1994-03-01"), ("250", "1995-01-01")],
           "cancer": ("C509", "2009-09-09")},
    # placeholder dates: First Occurrence "= date of birth" and "date unknown" lost date
    2006: {"centre": 11002, "lost": "1900-01-01", "fo": {"E11": "1902-02-02"}},
    # every source at once (Edinburgh): the earliest record wins, on a tie the more specific
    2007: {"centre": 11005, "lost": "2020-01-01",
           "hosp": [("E119", "2014-01-01"), ("I219", "2016-05-05")],
           "icd9": [("1749", "1992-01-01")], "cancer": ("C349", "2017-01-01"),
           "death": ("2019-01-01", "I251"), "fo": {"E11": "2013-01-01", "I21": "2016-05-05"},
           "alg": {"myocardial_infarction": "2016-05-05"}},
    # an algorithmically-defined stroke only; COPD from a First Occurrence named in the release
    2008: {"centre": 11002, "alg": {"stroke": "2011-11-11"}, "fo": {"J44": "2012-12-12"}},
    # Wrexham: an event after Wales's hospital date is censored there, the death is not
    2009: {"centre": 11023, "hosp": [("I639", "2019-01-01")], "death": ("2022-01-01", "J449")},
}

RELEASE = {
    "censoring": {
        "hospital": {"england": "2022-10-31", "scotland": "2021-07-31", "wales": "2018-02-28"},
        "cancer_registry": {"england": "2020-12-31", "scotland": "2021-11-30",
                            "wales": "2020-12-31"},
        "first_occurrence": {"england": "2022-10-31", "scotland": "2021-07-31",
                             "wales": "2018-02-28"},
        "algorithmic": "2022-06-30",
        "death": "2022-11-30",
    },
    "outcomes": {"copd": {"codes": ["J44"], "sources": ["first_occurrence"]}},
    "first_occurrence_fields": {"J44": 131492},
}
COUNTRY = {11004: "scotland", 11005: "scotland", 11003: "wales", 11022: "wales",
           11023: "wales"}


# --------------------------------------------------------------------------- the rules, by hand
def _d(text: str | None) -> dt.date | None:
    if text is None:
        return None
    date = dt.date.fromisoformat(text)
    return None if date in SPECIAL_DATES else date


def _records(p: dict) -> list[tuple[str, str, str, dt.date | None]]:
    """(source, coding, code, date) of one person, as the rules read them."""
    out = [("hospital", "icd10", c, _d(d)) for c, d in p.get("hosp", [])]
    out += [("hospital", "icd9", c, _d(d)) for c, d in p.get("icd9", [])]
    if "cancer" in p:
        out.append(("cancer_registry", "icd10", p["cancer"][0], _d(p["cancer"][1])))
    out += [("first_occurrence", "icd10", c, _d(d)) for c, d in p.get("fo", {}).items()]
    out += [("algorithmic", "algorithm", n, _d(d)) for n, d in p.get("alg", {}).items()]
    if "death" in p:
        out.append(("death", "icd10", p["death"][1], _d(p["death"][0])))
    return out


def _in(outcome: str, coding: str, code: str) -> bool:
    """The built-in outcome sets (docs/OUTCOMES.md) and the release's COPD, written out."""
    if coding == "algorithm":
        return outcome == "cardiovascular" and code in ("myocardial_infarction", "stroke")
    if coding == "icd9":
        n = int(code[:3])
        return ((outcome == "cancer" and 140 <= n <= 208 and n != 173)
                or (outcome == "cardiovascular" and (410 <= n <= 414 or n in (430, 431, 434, 436))))
    cat = code[:3]
    return {"type2_diabetes": cat == "E11",
            "cancer": cat[0] == "C" and cat <= "C97" and cat != "C44",
            "cardiovascular": "I20" <= cat <= "I25" or "I60" <= cat <= "I64",
            "copd": cat == "J44", "death": False}[outcome]


SOURCES = {"type2_diabetes": ("hospital", "first_occurrence", "death"),
           "cancer": ("cancer_registry", "hospital", "death"),
           "cardiovascular": ("hospital", "first_occurrence", "algorithmic", "death"),
           "death": ("death",), "copd": ("first_occurrence",)}
PRIORITY = ("cancer_registry", "hospital", "death", "first_occurrence", "algorithmic")


def _censor(source: str, country: str) -> dt.date:
    value = RELEASE["censoring"][source]
    return dt.date.fromisoformat(value if isinstance(value, str) else value[country])


def expected(eid: int, outcome: str) -> tuple[int, bool, float, str | None]:
    """(event, prevalent, time_years, source) by the rules: follow-up ends at the earliest of
    the outcome's sources' dates for the person's country, death and the date lost."""
    p = PEOPLE[eid]
    country = COUNTRY.get(p.get("centre"), "england")
    death = _d(p["death"][0]) if "death" in p else None
    ends = [_censor(s, country) for s in SOURCES[outcome]]
    end = min(d for d in [*ends, death, _d(p.get("lost"))] if d is not None)
    hits = [(date, PRIORITY.index(src), src) for src, coding, code, date in _records(p)
            if date is not None and src in SOURCES[outcome]
            and ((outcome == "death" and src == "death") or _in(outcome, coding, code))]
    if not hits:
        return 0, False, (end - BASELINE).days / 365.25, None
    date, _, src = min(hits)
    if date <= BASELINE:
        return 1, True, 0.0, src
    if date <= end:
        return 1, False, (date - BASELINE).days / 365.25, src
    return 0, False, (end - BASELINE).days / 365.25, None


# --------------------------------------------------------------------------- writing the export
def _row(eid: int, p: dict, i: int, layout: str) -> dict[str, str]:
    sex = i % 2
    cells = dict(zip(BASE, [str(sex), BASELINE.isoformat(), "55", "0", "0", "0",
                            "-7" if sex == 0 else "", "" if sex == 0 else "-7", "5.1"],
                     strict=True))
    centre = p.get("centre")
    cells["54-0.0"] = ("" if centre is None else CENTRE_CODING[centre]
                       if layout == "rap-labels" else str(centre))
    cells["191-0.0"] = p.get("lost", "")
    death = p.get("death")
    cells["40000-0.0"], cells["40001-0.0"] = death if death else ("", "")
    cells["40006-0.0"], cells["40005-0.0"] = p.get("cancer", ("", ""))
    for field, key in (("41270", "hosp"), ("41271", "icd9")):
        recs = p.get(key, [])
        dates = [d for _, d in recs] + ["", ""]
        cells[f"{int(field) + 10}-0.0"], cells[f"{int(field) + 10}-0.1"] = dates[:2]
        if layout == "legacy":
            codes = [c for c, _ in recs] + ["", ""]
            cells[f"{field}-0.0"], cells[f"{field}-0.1"] = codes[:2]
        else:
            cells[field] = json.dumps([c for c, _ in recs]) if recs else ""
    for code, fid in FO_FIELD.items():
        date = p.get("fo", {}).get(code, "")
        cells[f"{fid}-0.0"] = date
        if code != "J44":
            cells[f"{int(fid) + 1}-0.0"] = "40" if date else ""  # a source-of-report value
    for name, fid in ALG_FIELD.items():
        cells[f"{fid}-0.0"] = p.get("alg", {}).get(name, "")
    cells["42001-0.0"] = "1" if "myocardial_infarction" in p.get("alg", {}) else ""
    return {"eid": str(eid), **cells}


def write_export(path: Path, layout: str = "legacy") -> Path:
    rows = [_row(e, p, i, layout) for i, (e, p) in enumerate(PEOPLE.items())]
    if layout == "legacy":
        names = {"eid": "eid", **{c: c for c in BASE}, **{c: c for c, _ in LINKED},
                 "41270-0.0": "41270-0.0", "41270-0.1": "41270-0.1",
                 "41271-0.0": "41271-0.0", "41271-0.1": "41271-0.1"}
    else:
        prefix = "participant." if layout == "rap" else ""
        names = {"eid": prefix + "eid", **{c: prefix + r for c, r in zip(BASE, RAP_BASE,
                                                                         strict=True)},
                 **{c: prefix + r for c, r in LINKED}, "41270": prefix + "p41270",
                 "41271": prefix + "p41271"}
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(names.values())
        w.writerows([[r.get(k, "") for k in names] for r in rows])
    return path


def _release(tmp_path: Path) -> Path:
    path = tmp_path / "release.json"
    path.write_text(json.dumps(RELEASE))
    return path


@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("followup")
    return ingest(write_export(folder / "ukb.csv"),
                  outcome_config=load_outcome_config(_release(folder)))


# --------------------------------------------------------------------------- tests
def test_every_row_follows_the_rules(legacy):
    out = legacy.outcomes
    assert out.height == len(PEOPLE) * 5
    for r in out.iter_rows(named=True):
        event, prevalent, years, source = expected(r["eid"], r["outcome"])
        got = (r["event"], r["prevalent"], r["time_years"], r["source"])
        assert got == (event, prevalent, pytest.approx(years), source), (r, got)


def _row_of(result, eid: int, outcome: str) -> dict:
    return result.outcomes.filter((pl.col("eid") == eid) & (pl.col("outcome") == outcome)
                                  ).row(0, named=True)


def test_lost_to_follow_up_ends_every_outcome(legacy):
    lost = (dt.date(2010, 6, 30) - BASELINE).days / 365.25
    for outcome in ("type2_diabetes", "cancer", "cardiovascular", "death"):
        row = _row_of(legacy, 2001, outcome)
        assert row["event"] == 0 and row["time_years"] == pytest.approx(lost)
    by = legacy.report["outcomes"]["by_outcome"]["type2_diabetes"]
    assert by["after_lost_to_follow_up"] == 1 and by["censored_lost_to_follow_up"] >= 1
    assert legacy.report["outcomes"]["lost_to_follow_up"] == 2  # 2001 and 2007 (2006: unknown)


def test_each_country_is_censored_at_its_own_date(legacy):
    scot = _row_of(legacy, 2002, "cardiovascular")  # I21.9 on 2021-10-01, Scotland to 07-31
    assert scot["event"] == 0
    assert scot["time_years"] == pytest.approx((dt.date(2021, 7, 31) - BASELINE).days / 365.25)
    wales = _row_of(legacy, 2009, "cardiovascular")  # I63.9 in 2019, Wales to 2018-02-28
    assert wales["event"] == 0
    assert _row_of(legacy, 2009, "death")["event"] == 1  # deaths run to 2022-11-30 there
    england = _row_of(legacy, 2004, "cardiovascular")
    assert england["time_years"] == pytest.approx((dt.date(2022, 6, 30) - BASELINE).days
                                                  / 365.25)  # algorithmic's single date
    report = legacy.report["outcomes"]
    assert report["participants_by_country"] == {"england": 4, "scotland": 2, "wales": 3}
    assert report["participants_without_centre"] == 1
    assert report["by_outcome"]["cardiovascular"]["censoring_date"] == {
        "england": "2022-06-30", "scotland": "2021-07-31", "wales": "2018-02-28"}


def test_first_occurrence_icd9_and_algorithmic_events(legacy):
    fo = _row_of(legacy, 2003, "type2_diabetes")
    assert (fo["event"], fo["source"], fo["event_date"]) == (1, "first_occurrence",
                                                             dt.date(2015, 5, 5))
    icd9 = _row_of(legacy, 2005, "cardiovascular")
    assert icd9["prevalent"] and icd9["source"] == "hospital"
    cancer = _row_of(legacy, 2005, "cancer")
    assert (cancer["event"], cancer["prevalent"], cancer["source"]) == (1, False,
                                                                         "cancer_registry")
    assert _row_of(legacy, 2005, "type2_diabetes")["event"] == 0  # ICD-9 250 is in no set
    stroke = _row_of(legacy, 2008, "cardiovascular")
    assert (stroke["event"], stroke["source"]) == (1, "algorithmic")
    assert _row_of(legacy, 2008, "copd")["event"] == 1  # a field named in the release
    report = legacy.report["outcomes"]
    assert report["first_occurrence_fields_read"] == {"E11": 130708, "I21": 131298,
                                                      "J44": 131492}
    assert report["reported_by"]["E11"] == {"40": 3}
    assert "250" in report["most_common_codes_outside"]


def test_placeholder_dates_are_missing_and_counted(legacy):
    special = legacy.report["outcomes"]["special_dates"]
    assert special["130708 (first_e11_date)"] == {"1902-02-02": 1}
    assert special["191 (lost_to_follow_up_date)"] == {"1900-01-01": 1}
    row = _row_of(legacy, 2006, "type2_diabetes")
    assert row["event"] == 0  # no date, no event; and not lost: followed to the end
    assert row["time_years"] == pytest.approx((dt.date(2022, 10, 31) - BASELINE).days / 365.25)


def test_a_person_with_every_source(legacy):
    # diabetes: First Occurrence 2013 before hospital 2014; infarction: hospital, First
    # Occurrence and category 42 on one day, hospital wins; death censors at 2019
    dm = _row_of(legacy, 2007, "type2_diabetes")
    assert (dm["source"], dm["event_date"]) == ("first_occurrence", dt.date(2013, 1, 1))
    cvd = _row_of(legacy, 2007, "cardiovascular")
    assert (cvd["source"], cvd["event_date"]) == ("hospital", dt.date(2016, 5, 5))
    assert _row_of(legacy, 2007, "cancer")["prevalent"]  # ICD-9 174.9 in 1992
    death = _row_of(legacy, 2007, "death")
    assert death["event"] == 1 and death["event_date"] == dt.date(2019, 1, 1)


@pytest.mark.parametrize("layout", ["rap", "rap-labels"])
def test_rap_layouts_give_the_same_outcomes(tmp_path, legacy, layout):
    config = load_outcome_config(_release(tmp_path))
    result = ingest(write_export(tmp_path / "rap.csv", layout), outcome_config=config)
    assert result.outcomes.equals(legacy.outcomes)
    assert result.report["outcomes"]["participants_by_country"] == (
        legacy.report["outcomes"]["participants_by_country"])


def test_cli_ingest_with_the_release_file(tmp_path, legacy):
    from sphr.cli import main

    path = write_export(tmp_path / "ukb.csv")
    assert main(["ingest", str(path), "--out", str(tmp_path / "out"), "--outcomes",
                 str(_release(tmp_path))]) == 0
    assert pl.read_parquet(tmp_path / "out" / "outcomes.parquet").equals(legacy.outcomes)


def test_without_the_release_file_the_defaults_apply(tmp_path):
    """UK Biobank's per-country defaults: Scotland's hospital date is 2021-07-31 too."""
    result = ingest(write_export(tmp_path / "ukb.csv"))
    row = _row_of(result, 2002, "cardiovascular")
    assert row["time_years"] == pytest.approx((dt.date(2021, 7, 31) - BASELINE).days / 365.25)
    assert "copd" not in result.outcomes["outcome"].unique().to_list()


def test_an_unknown_centre_names_file_field_and_row(tmp_path):
    path = write_export(tmp_path / "ukb.csv")
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(",11003,", ",99999,", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as info:
        ingest(path)
    assert info.value.field == "54-0.0 (assessment_centre)" and info.value.row == 3
    assert "assessment centre" in str(info.value)


@pytest.mark.parametrize(("override", "message"), [
    ({"censoring": {"hospital": {"ireland": "2022-01-01"}}}, "unknown countries"),
    ({"censoring": {"gp": "2022-01-01"}}, "unknown source"),
    ({"censoring": {"hospital": {"wales": "28/02/2018"}}}, "not a date"),
    ({"outcomes": {"cancer": {"icd9": ["14-208"]}}}, "not an ICD-9 code"),
    ({"outcomes": {"cancer": {"icd9_exclud": ["173"]}}}, "outcome 'cancer': no key 'icd9_exclud'"),
    ({"outcomes": {"cvd2": {"codes": [], "sources": ["hospital"],
                            "algorithmic": ["heart_attack"]}}}, "unknown algorithmic"),
    ({"outcomes": {"cancer": {"sources": ["primary_care"]}}}, "unknown source"),
    ({"first_occurrence_fields": {"J44.9": 131492}}, "3-character"),
    ({"first_occurence_fields": {}}, "no key 'first_occurence_fields'"),
])
def test_bad_release_files_name_the_file_and_key(tmp_path, override, message):
    path = tmp_path / "release.json"
    path.write_text(json.dumps(override))
    with pytest.raises(ConfigError, match=message) as info:
        load_outcome_config(path)
    assert str(path) in str(info.value)


def test_a_single_date_applies_to_every_country():
    config = OutcomeConfig.from_overrides({"censoring": {"hospital": "2021-03-31"}})
    assert set(config.censoring["hospital"].dates.values()) == {dt.date(2021, 3, 31)}
    partial = OutcomeConfig.from_overrides({"censoring": {"hospital": {"wales": "2019-01-31"}}})
    assert partial.censoring_date("hospital", "wales") == dt.date(2019, 1, 31)
    assert partial.censoring_date("hospital", "scotland") == dt.date(2021, 7, 31)  # default


# --------------------------------------------------------------------------- synthetic export
def test_synthetic_follow_up_fields_are_additions(monkeypatch, synthetic_cohort):
    """Their own random stream, drawn last: every other column of the export keeps its
    values; only the decoy centre 54-0.0 gives way to the real one."""
    import sphr.synth.followup as followup
    from sphr.synth.export import build_export_frame

    full = build_export_frame(synthetic_cohort, "ukbconv", decoys=25, seed=11)
    monkeypatch.setattr(followup, "follow_up_columns", lambda *a, **k: [])
    plain = build_export_frame(synthetic_cohort, "ukbconv", decoys=25, seed=11)
    changed = [c for c in plain.columns if not plain[c].equals(full[c])]
    assert changed == ["54-0.0"]
    added = set(full.columns) - set(plain.columns)
    assert {"191-0.0", "130708-0.0", "130709-0.0", "131298-0.0", "42000-0.0",
            "42006-0.0"} <= added


def test_synthetic_first_occurrences_agree_with_the_records(ukb_export, ingest_dir):
    """The derived fields repeat the hospital and death records: leaving them out moves no
    first event; Scottish and Welsh centres and losses to follow-up are there."""
    without = OutcomeConfig.from_overrides({"outcomes": {
        "type2_diabetes": {"sources": ["hospital", "death"]},
        "cardiovascular": {"sources": ["hospital", "death"]}}})
    plain = ingest(ukb_export, outcome_config=without).outcomes
    full = pl.read_parquet(ingest_dir / "outcomes.parquet")
    assert full.equals(plain)
    report = json.loads((ingest_dir / "ingest_report.json").read_text())["outcomes"]
    countries = report["participants_by_country"]
    assert countries["scotland"] > 0.04 * 2_000 and countries["wales"] > 0.02 * 2_000
    assert report["participants_without_centre"] == 0 and report["lost_to_follow_up"] >= 1
    assert {"first_occurrence", "algorithmic"} <= set(report["sources_present"])
    # Scotland's hospital date censors its participants' cardiovascular follow-up earlier
    by = report["by_outcome"]["cardiovascular"]["censoring_date"]
    assert by["scotland"] < by["england"]


def test_the_run_settings_take_the_release_file(tmp_path):
    """`python -m sphr_dagster run --outcomes release.json`: per-country dates and First
    Occurrence fields reach the ingest's configuration."""
    from sphr.settings import resolve

    settings = resolve(outcomes=str(_release(tmp_path)))
    config = settings.config("ingest").outcome_config()
    assert config.censoring_date("hospital", "wales") == dt.date(2018, 2, 28)
    assert config.censoring_date("algorithmic", "scotland") == dt.date(2022, 6, 30)
    assert config.first_occurrence_fields["J44"] == 131492
    assert "copd" in [o.name for o in config.outcomes]
