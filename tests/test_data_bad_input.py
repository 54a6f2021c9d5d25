"""Bad input: one clear error naming file, field and row, and nothing half-written."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import polars as pl
import pytest
from benchmark_loader import load_benchmark

from sphr.data.ingest import ingest, run_ingest
from sphr.errors import InputError

BASE_COLUMNS = ["eid", "31-0.0", "53-0.0", "21003-0.0", "2443-0.0", "2453-0.0", "2473-0.0",
                "6153-0.0", "6153-0.1", "6177-0.0", "30690-0.0"]


def write_csv(path: Path, header: list[str], rows: list[list[str]], *, quote_all=True) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL,
                       lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def person(eid, sex="0", diabetes="0", cancer="0", other="0", med_w=("-7", ""), med_m=("",),
           chol="5.1"):
    return [str(eid), sex, "2008-01-02", "55", diabetes, cancer, other, *med_w, *med_m, chol]


def good_rows(n=5):
    return [person(1000 + i, sex=str(i % 2), med_w=("-7", "") if i % 2 == 0 else ("", ""),
                   med_m=("",) if i % 2 == 0 else ("-7",)) for i in range(n)]


def expect_error(path: Path, tmp_path: Path, *, contains: str, field: str | None = None,
                 row: int | None = None, **kwargs) -> InputError:
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        run_ingest(path, out, **kwargs)
    err = info.value
    assert contains in str(err), str(err)
    assert str(path) in str(err)
    if field is not None:
        assert err.field is not None and field in err.field, str(err)
    if row is not None:
        assert err.row == row, str(err)
    # nothing half-written: no output folder, no staging leftovers
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if ".partial" in p.name]
    return err


def test_label_rule(tmp_path):
    rows = [
        person(1, diabetes="1"),                            # condition -> unhealthy
        person(2),                                          # all no, medication none -> healthy
        person(3, cancer="-1"),                             # do not know -> unknown
        person(4, cancer="-1", diabetes="1"),               # a yes beats a don't know
        person(5, med_w=("4", "")),                         # HRT is not for a condition
        person(6, med_w=("2", "4")),                        # blood pressure -> unhealthy
        person(7, med_w=("-3", "")),                        # prefer not to answer -> unknown
        person(8, sex="1", med_w=("", ""), med_m=("1",)),   # men answer 6177
        person(9, sex="1", med_w=("", ""), med_m=("-7",)),
        person(10, sex="1", med_w=("", ""), med_m=("",)),   # no answer at all -> unknown
    ]
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    result = ingest(path)
    labels = dict(zip(result.baseline["eid"], result.baseline["label"], strict=True))
    assert labels == {1: "unhealthy", 2: "apparently_healthy", 3: "unknown", 4: "unhealthy",
                      5: "apparently_healthy", 6: "unhealthy", 7: "unknown", 8: "unhealthy",
                      9: "apparently_healthy", 10: "unknown"}
    b = result.baseline
    assert b.filter(pl.col("eid") == 6)["blood_pressure_medication"].item() is True
    assert b.filter(pl.col("eid") == 8)["cholesterol_medication"].item() is True
    assert b.filter(pl.col("eid") == 2)["cholesterol_medication"].item() is False
    # predictors absent from the export: counted warnings, empty columns
    assert any("hdl" in w for w in result.report["warnings"])
    assert b["hdl"].null_count() == b.height


def test_empty_file(tmp_path):
    path = tmp_path / "ukb.csv"
    path.write_text("")
    expect_error(path, tmp_path, contains="empty file", row=0)


def test_header_only(tmp_path):
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, [])
    expect_error(path, tmp_path, contains="no participants", row=1)


def test_unknown_header_style(tmp_path):
    path = write_csv(tmp_path / "ukb.csv", ["id", "sex", "age"], [["1", "0", "50"]])
    expect_error(path, tmp_path, contains="unknown header style", row=0)


def test_mixed_header_styles(tmp_path):
    header = [*BASE_COLUMNS[:-1], "p30690_i0"]
    path = write_csv(tmp_path / "ukb.csv", header, good_rows())
    expect_error(path, tmp_path, contains="mixes column naming styles", row=0)


def test_missing_required_field(tmp_path):
    header = [c for c in BASE_COLUMNS if c != "31-0.0"]
    rows = [r[:1] + r[2:] for r in good_rows()]
    path = write_csv(tmp_path / "ukb.csv", header, rows)
    expect_error(path, tmp_path, contains="required field 31 (Sex) missing", field="31-0.0",
                 row=0)


def test_mixed_instances(tmp_path):
    header = [*BASE_COLUMNS[:-1], "30690-1.0"]
    path = write_csv(tmp_path / "ukb.csv", header, good_rows())
    expect_error(path, tmp_path, contains="no instance 0", field="30690-0.0", row=0)


def test_duplicate_eids(tmp_path):
    rows = good_rows(6)
    rows[4][0] = rows[1][0]
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    expect_error(path, tmp_path, contains="appears more than once", field="eid", row=5)


def test_non_numeric_value(tmp_path):
    rows = good_rows(6)
    rows[3][-1] = "5,2"
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    expect_error(path, tmp_path, contains="non-numeric value '5,2'",
                 field="30690-0.0 (cholesterol)", row=4)


@pytest.mark.parametrize(("row", "col", "value", "contains", "field"), [
    (2, 4, "7", "unknown code '7'", "2443-0.0 (diabetes)"),
    (5, 5, "Maybe", "unknown label 'Maybe'", "2453-0.0 (cancer)"),
    (1, 2, "02/01/2008", "is not a date", "53-0.0"),
], ids=["unknown_code", "unknown_label", "bad_date"])
def test_bad_cell_names_field_and_row(tmp_path, row, col, value, contains, field):
    rows = good_rows(6)
    rows[row][col] = value
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    expect_error(path, tmp_path, contains=contains, field=field, row=row + 1)


def test_text_labels_are_accepted(tmp_path):
    rows = good_rows(4)
    rows[0][4], rows[1][5], rows[2][6] = "Yes", "Do not know", "no"
    rows[0][1], rows[1][1] = "Female", "Male"
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    b = ingest(path).baseline
    assert b["diabetes"].to_list()[0] == 1 and b["cancer"].to_list()[1] is None
    assert b["sex"].to_list()[:2] == [0, 1]


def test_ragged_row(tmp_path):
    rows = good_rows(6)
    rows[2] = rows[2][:-1]
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    expect_error(path, tmp_path, contains="fewer than the header's 11", row=3)


def test_truncated_last_line(tmp_path, ukb_export):
    data = ukb_export.read_bytes()
    cut = tmp_path / "ukb.csv"
    cut.write_bytes(data[: len(data) - 700])  # the last row loses its tail
    err = expect_error(cut, tmp_path, contains="cut off", row=2_000)
    assert "--drop-truncated-last-row" in str(err)
    result = ingest(cut, drop_truncated_last_row=True)
    assert result.baseline.height == 1_999
    assert any("dropped the cut-off last row 2000" in w for w in result.report["warnings"])


def test_failed_ingest_keeps_earlier_outputs(tmp_path, ukb_export):
    out = tmp_path / "out"
    run_ingest(ukb_export, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = write_csv(tmp_path / "bad.csv", BASE_COLUMNS, [])
    with pytest.raises(InputError):
        run_ingest(bad, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_cli_reports_errors(tmp_path, capsys):
    from sphr.cli import main

    path = tmp_path / "ukb.csv"
    path.write_text("")
    assert main(["ingest", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "empty file" in capsys.readouterr().err


# ---- bytes that are not UTF-8: an error naming file, field and data row ----------

AGE, CHOL = 3, 10  # positions in person()'s row


def with_raw_cell(path: Path, out: Path, row: int, column: str, raw: bytes) -> Path:
    """A copy of the quoted CSV at ``path`` whose cell (data ``row``, ``column``) is ``raw``."""
    lines = path.read_bytes().split(b"\n")
    header = next(csv.reader([lines[0].decode()]))
    cells = next(csv.reader([lines[row].decode()]))
    cells[header.index(column)] = "@@CELL@@"
    line = ",".join(f'"{c}"' for c in cells).encode()
    lines[row] = line.replace(b"@@CELL@@", raw)
    out.write_bytes(b"\n".join(lines))
    return out


@pytest.mark.parametrize(("row", "column", "raw", "shown", "field"), [
    (4, "30690-0.0", b"5\xe9", "'5\\xe9' holds byte 0xe9", "30690-0.0 (cholesterol)"),
    (2, "eid", b"10\xff1", "'10\\xff1' holds byte 0xff", "eid"),
    (6, "2443-0.0", b"Oui\xe9", "'Oui\\xe9' holds byte 0xe9", "2443-0.0 (diabetes)"),  # coded
    (3, "53-0.0", b"2008\xa0-01-02", "'2008\\xa0-01-02' holds byte 0xa0",
     "53-0.0 (assessment_date)"),
], ids=["number", "eid", "code", "date"])
def test_non_utf8_byte_names_file_field_and_row(tmp_path, row, column, raw, shown, field):
    clean = write_csv(tmp_path / "clean.csv", BASE_COLUMNS, good_rows(6))
    path = with_raw_cell(clean, tmp_path / "ukb.csv", row, column, raw)
    err = expect_error(path, tmp_path, contains="not UTF-8 text", field=field, row=row)
    assert f"value {shown}, which is not UTF-8 text" in str(err)
    assert "\n" not in str(err)  # one line


def test_non_utf8_byte_deep_in_a_large_export(tmp_path, ukb_export):
    # 4.7 MB: the row is in the reader's second 4 MB block, so the row count must carry over
    path = with_raw_cell(ukb_export, tmp_path / "ukb.csv", 1_950, "21003-0.0", b"6\xe91")
    err = expect_error(path, tmp_path, contains="byte 0xe9, which is not UTF-8 text",
                       field="21003-0.0 (age)", row=1_950)
    assert "value '6\\xe91'" in str(err)


def test_non_utf8_byte_in_a_linked_record_column(tmp_path, ukb_export):
    import polars as pl

    codes = pl.read_csv(ukb_export, columns=["41270-0.0"], infer_schema=False)["41270-0.0"]
    row = int(codes.is_not_null().arg_true()[3]) + 1  # a participant with a hospital record
    path = with_raw_cell(ukb_export, tmp_path / "ukb.csv", row, "41270-0.0", b"E11\xe9")
    expect_error(path, tmp_path, contains="not UTF-8 text", field="41270-0.0 (hospital_icd10)",
                 row=row)


def test_non_utf8_byte_in_a_column_never_read_is_ignored(tmp_path):
    # 20001 (cancer code) is in the export but not read by ingest: its bytes reach no output
    header = [*BASE_COLUMNS, "20001-0.0"]
    clean = write_csv(tmp_path / "clean.csv", header, [[*r, "1001"] for r in good_rows(4)])
    path = with_raw_cell(clean, tmp_path / "ukb.csv", 2, "20001-0.0", b"Z\xfcrich")
    assert ingest(path).baseline.equals(ingest(clean).baseline)


# ---- values no person can have: set missing, counted per field, logged ----------------------


def ingest_with(tmp_path: Path, cells: dict[tuple[int, int], str]) -> tuple[pl.DataFrame, dict]:
    """run_ingest of good_rows(6) with ``cells`` ((row index, position) -> text) replaced."""
    rows = good_rows(6)
    for (i, j), value in cells.items():
        rows[i][j] = value
    path = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, rows)
    run_ingest(path, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "ingest_report.json").read_text())
    return pl.read_parquet(tmp_path / "out" / "baseline.parquet"), report


@pytest.mark.parametrize(("pos", "value", "name", "shown", "rule"), [
    (AGE, "-5", "age", "-5.0", "finite, 18-110 years"),
    (AGE, "200", "age", "200.0", "finite, 18-110 years"),
    (CHOL, "1e309", "cholesterol", "inf", "finite, >= 0 mmol/L"),
    (CHOL, "inf", "cholesterol", "inf", "finite, >= 0 mmol/L"),
    (CHOL, "-inf", "cholesterol", "-inf", "finite, >= 0 mmol/L"),
    (CHOL, "NaN", "cholesterol", "nan", "finite, >= 0 mmol/L"),
    (CHOL, "-2.5", "cholesterol", "-2.5", "finite, >= 0 mmol/L"),
], ids=["negative_age", "age_200", "1e309", "inf", "minus_inf", "nan", "negative_concentration"])
def test_implausible_value_is_missing_and_counted(tmp_path, caplog, pos, value, name, shown, rule):
    column = BASE_COLUMNS[pos]
    with caplog.at_level("WARNING", logger="sphr.data.ingest"):
        base, report = ingest_with(tmp_path, {(2, pos): value})
    assert report["implausible_values"] == {name: {
        "column": column, "rule": rule, "count": 1, "first_rows": [3], "first_eids": [1002],
        "first_values": [shown]}}
    values = dict(zip(base["eid"], base[name], strict=True))
    assert values.pop(1002) is None  # missing, not NaN: the completeness filter sees it
    assert set(values.values()) == ({55.0} if name == "age" else {5.1})
    assert report["completeness"][name] == round(5 / 6, 4)
    warning = next(w for w in report["warnings"] if f"{column} ({name})" in w)
    assert f"1 value(s) outside the plausible range ({rule})" in warning
    assert "row 3 (eid 1002" in warning
    assert any(warning in r.getMessage() for r in caplog.records)


def test_implausible_values_are_all_counted(tmp_path):
    bad = {(i, AGE): str(v) for i, v in zip(range(6), [-5, 17, 18, 110, 111, 200], strict=True)}
    base, report = ingest_with(tmp_path, bad)
    hit = report["implausible_values"]["age"]
    assert hit["count"] == 4 and hit["first_rows"] == [1, 2, 5, 6]  # 18 and 110 are plausible
    assert hit["first_eids"] == [1000, 1001, 1004, 1005]
    assert base["age"].to_list() == [None, None, 18.0, 110.0, None, None]


def test_special_codes_are_not_implausible(tmp_path):
    # -1 in a lab column is UKB's "do not know", counted as a special code, not an implausible value
    base, report = ingest_with(tmp_path, {(1, CHOL): "-1"})
    assert report["implausible_values"] == {}
    assert report["special_codes"]["30690-0.0 (cholesterol)"] == {"-1": 1}
    assert base["cholesterol"][1] is None


def test_parquet_nan_is_missing_not_implausible(tmp_path):
    # pandas writes a missing number to parquet as NaN: missing, not an implausible value
    clean = write_csv(tmp_path / "ukb.csv", BASE_COLUMNS, good_rows(4))
    frame = pl.read_csv(clean, infer_schema=False, null_values=[""]).with_columns(
        pl.Series("30690-0.0", [5.1, float("nan"), 4.0, float("inf")]))
    frame.write_parquet(tmp_path / "ukb.parquet")
    result = ingest(tmp_path / "ukb.parquet")
    assert result.baseline["cholesterol"].to_list() == [5.1, None, 4.0, None]
    assert result.report["implausible_values"]["cholesterol"]["first_rows"] == [4]


def test_every_numeric_predictor_has_a_plausible_range():
    from sphr.data.fields import FASTING_TIME, PREDICTORS

    for f in (*PREDICTORS, FASTING_TIME):
        assert f.min_value is not None and f.min_value >= 0, f.name
        assert f.max_value is None or f.max_value > f.min_value, f.name
        if f.unit == "%":
            assert f.max_value == 100, f.name


# The clean export's baseline is checked on values in tests/test_reproducible.py.


def test_the_funpack_comparison_counts_what_the_plausibility_rule_explains_apart():
    """benchmarks/ingest.py: a cell we set missing because FUNPACK's value is one no person
    can have is the rule at work (docs/INGEST.md), any other difference a disagreement."""

    import numpy as np

    from sphr.data.fields import ASSESSMENT_DATE, BY_ID

    bench = load_benchmark("ingest")
    ours = pl.Series([5.1, None, None, 2.0, None, None], dtype=pl.Float64)
    theirs = pl.Series(["5.1", "-0.4", "3.2", "2.5", None, "inf"])
    differing, explained = bench._column_differences(ours, theirs, BY_ID[30670],
                                                     np.ones(6, bool))
    assert explained.tolist() == [False, True, False, False, False, True]
    assert differing.tolist() == [False, False, True, True, False, False]
    # a participant on one side only is a disagreement, whatever the value
    differing, explained = bench._column_differences(ours, theirs, BY_ID[30670],
                                                     np.array([1, 0, 1, 1, 1, 1], bool))
    assert explained.tolist() == [False, False, False, False, False, True]
    assert differing.tolist() == [False, True, True, True, False, False]
    # dates have no plausibility rule: a date we lack is a disagreement
    dates = pl.Series([None, None], dtype=pl.Date)
    differing, explained = bench._column_differences(
        dates, pl.Series(["2008-01-02", None]), ASSESSMENT_DATE, np.ones(2, bool))
    assert differing.tolist() == [True, False] and not explained.any()
