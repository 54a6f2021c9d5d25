"""Bad input: one clear error naming file, field and row, and nothing half-written."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest

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
