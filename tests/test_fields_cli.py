"""``sphr fields``: every catalog field once, RAP names the reader maps back to the same
column, and a RAP extract of exactly those names ingests like the legacy export."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from sphr.cli import main
from sphr.data.catalog_view import PHENOAGE_MARKERS, RAP_ARRAY_IN_ONE_COLUMN, field_uses
from sphr.data.fields import (
    BY_ID,
    MEDICATION_MEN,
    MEDICATION_WOMEN,
    P0_MARKERS,
    SPECIAL_CODES,
    Field,
)
from sphr.data.headers import ColumnKey, parse_column
from sphr.errors import InputError


def run_fields(capsys, *args: str) -> str:
    assert main(["fields", *args]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def records():
    return {u.id: u for u in field_uses()}


def test_table_lists_every_catalog_field_once(capsys):
    lines = run_fields(capsys).splitlines()
    assert lines[0].split()[:3] == ["field", "name", "title"]
    ids = Counter(int(line.split()[0]) for line in lines[1:])
    assert set(ids) == set(BY_ID) and set(ids.values()) == {1}
    row = next(line for line in lines if line.startswith("30710 "))
    assert "P0 range" in row and "PhenoAge marker" in row and "mg/L" in row


def test_json_lists_every_field_once_with_what_the_ingest_needs(capsys):
    from sphr.data.ingest import AGE, REQUIRED

    out = json.loads(run_fields(capsys, "--format", "json"))
    by_id = {r["id"]: r for r in out}
    assert len(out) == len(by_id) == len(BY_ID)
    # "required" is what makes the ingest stop, derived from the ingest's own plan
    # the P0 markers too: without one the run's pre-flight stops (nobody can be BFH)
    from sphr.data.fields import BY_NAME

    p0 = {BY_NAME[m].id for m in P0_MARKERS}
    assert {i for i, r in by_id.items() if r["required"]} == {f.id for f in (*REQUIRED, AGE)} | p0
    assert all("bona fide healthy" in by_id[i]["if_missing"] for i in p0)
    assert by_id[53]["required_columns"] == ["p53_i0"]
    assert by_id[53]["rap_columns"] == ["p53_i0", "p53_i1", "p53_i2", "p53_i3"]
    assert by_id[31]["if_missing"].startswith("the ingest stops")
    assert "label 'unknown'" in by_id[6177]["if_missing"]
    assert "completeness filter" in by_id[30000]["if_missing"]
    assert "41280" in by_id[41270]["if_missing"]  # codes without their dates are not used
    assert {i for i, r in by_id.items() if not r["rap_columns"]} == {20001, 20002, 20003}
    for r in by_id.values():
        if r["role"] == "predictor":
            assert r["read_instances"] == [0] and "risk" in r["stages"]
            assert ("P0 range" in r["use"]) == (r["name"] in P0_MARKERS)
            assert ("PhenoAge marker" in r["use"]) == (r["name"] in PHENOAGE_MARKERS)


def test_table_and_json_show_the_plausibility_rule_the_ingest_applies(capsys):
    by_id = {r["id"]: r for r in json.loads(run_fields(capsys, "--format", "json"))}
    lines = run_fields(capsys).splitlines()
    # the table's columns are aligned under its header: cut the plausible column out by offset
    start = lines[0].index("plausible")
    end = lines[0].index("reads")
    shown = {int(line.split()[0]): line[start:end].strip() for line in lines[1:]}
    expected = {21003: ("finite, 18-110 years", "18-110"), 30030: ("finite, 0-100 %", "0-100"),
                30280: ("finite, 0-1 ratio", "0-1"), 1160: ("finite, 0-24 hours/day", "0-24"),
                30710: ("finite, >= 0 mg/L", ">=0"), 74: ("finite, >= 0 hours", ">=0")}
    for fid, (rule, short) in expected.items():
        assert by_id[fid]["plausible"] == rule == BY_ID[fid].plausible_rule
        assert shown[fid] == short
        assert (by_id[fid]["min_value"], by_id[fid]["max_value"]) == (
            BY_ID[fid].min_value, BY_ID[fid].max_value)
    for fid, r in by_id.items():
        checked = BY_ID[fid].value_type in ("continuous", "integer")
        assert (r["plausible"] is not None) == checked == (shown[fid] != "-"), fid
        if r["role"] == "predictor":
            assert r["plausible"] == BY_ID[fid].plausible_rule
    for fid in (31, 53, 2443, 6177, 41270, 41280):  # codes, dates, text: no range
        assert by_id[fid]["plausible"] is by_id[fid]["min_value"] is None


def test_a_value_outside_the_shown_rule_is_what_the_ingest_sets_missing(tmp_path, legacy):
    """The rule shown is the one applied: an age just outside its shown bounds is made
    missing and reported under that rule, one just inside is kept."""
    from sphr.data.ingest import ingest

    frame, _ = legacy
    age = next(u for u in field_uses() if u.id == 21003)
    edges = [age.min_value - 1, age.max_value + 1, age.min_value, age.max_value]
    row = pl.int_range(pl.len())
    value = pl.col("21003-0.0").cast(pl.Float64)
    for i, edge in enumerate(edges):
        value = pl.when(row == i).then(pl.lit(edge)).otherwise(value)
    frame = frame.with_columns(value.alias("21003-0.0"))
    frame.write_csv(tmp_path / "ukb.csv")
    result = ingest(tmp_path / "ukb.csv")
    assert result.baseline["age"].head(4).to_list() == [None, None, age.min_value,
                                                        age.max_value]
    hit = result.report["implausible_values"]["age"]
    assert hit["rule"] == age.plausible and hit["count"] == 2


def test_phenoage_markers_are_the_risk_stages():
    from sphr.risk.phenoage import MARKERS

    assert PHENOAGE_MARKERS == MARKERS


def _keys_read(records) -> set[tuple[int, int, int]]:
    """(field, instance, array) of every column read; a whole-array RAP column is array 0."""
    return {(u.id, i, 0 if u.id in RAP_ARRAY_IN_ONE_COLUMN else a)
            for u in records.values() for i in u.read_instances for a in u.read_arrays}


def test_rap_names_parse_back_to_the_columns_read(capsys, records):
    names = run_fields(capsys, "--rap").splitlines()
    assert names[0] == "eid" and parse_column("eid") == ("legacy", None)
    assert len(names) == len(set(names))
    keys = []
    for name in names[1:]:
        style, key = parse_column(name)
        assert style == "rap" and key.field in records, name
        u = records[key.field]
        assert key.instance in u.read_instances and key.array in u.read_arrays, name
        assert ("_a" in name) == (u.arrays > 1 and u.id not in RAP_ARRAY_IN_ONE_COLUMN), name
        keys.append((key.field, key.instance, key.array))
    assert set(keys) == _keys_read(records) and len(keys) == len(set(keys))
    for expected in ("p31", "p21003_i0", "p30750_i0", "p41270", "p41280_a258", "p6177_i0",
                     "p40002_i1_a14", "p40006_i21"):
        assert expected in names
    assert not any(n.startswith(("p20001", "p20002", "p20003")) for n in names)


def test_entity_prefix_is_the_dx_extract_dataset_form(capsys):
    bare = run_fields(capsys, "--rap").splitlines()
    dotted = run_fields(capsys, "--rap", "--entity", "participant").splitlines()
    assert dotted == [f"participant.{n}" for n in bare]
    for a, b in zip(bare, dotted, strict=True):
        assert parse_column(a)[1] == parse_column(b)[1]
    assert parse_column("participant.eid") == ("rap", None)


def test_bad_option_combinations_are_refused(capsys):
    assert main(["fields", "--entity", "participant"]) == 2
    assert main(["fields", "--rap", "--format", "json"]) == 2
    assert main(["fields", "--rap", "--entity", "participant."]) == 2
    assert "--entity" in capsys.readouterr().err


# ----------------------------------------------------------------- a RAP extract, end to end
@pytest.fixture(scope="module")
def legacy(tmp_path_factory):
    """A 400-participant legacy export (linked records included), its frame and its ingest."""
    from sphr.data.ingest import ingest
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import build_export_frame, write_export

    cohort = generate_cohort(400, seed=29)
    path = write_export(cohort, tmp_path_factory.mktemp("legacy") / "ukb.csv", "ukbconv",
                        decoys=5, seed=29)
    return build_export_frame(cohort, "ukbconv", decoys=0, seed=29), ingest(path)


def _array_cell(frame: pl.DataFrame, f: Field, instance: int) -> pl.Expr:
    """The whole array in one cell, as dx extract_dataset writes a Python list
    (``[1, 2]``, ``['E119', 'I10']``); empty when the participant has no value."""
    cols = [c for a in range(f.arrays) if (c := f"{f.id}-{instance}.{a}") in frame.columns]
    if not cols:  # a field the synthetic export does not write (41271, ICD-9)
        return pl.lit(None, pl.String)
    items = pl.concat_list([pl.col(c).cast(pl.String) for c in cols]).list.drop_nulls()
    quote = "'" if f.value_type == "text" else ""
    cell = (pl.lit("[" + quote) + items.list.join(f"{quote}, {quote}") + pl.lit(quote + "]"))
    return pl.when(items.list.len() > 0).then(cell)


def rap_extract(frame: pl.DataFrame, names: list[str], *, medication_per_index: bool
                ) -> pl.DataFrame:
    """The legacy frame as a RAP extract with exactly ``names`` as its header (a column the
    synthetic export lacks, e.g. the 259th hospital date, is empty, as on the RAP).

    ``medication_per_index`` writes 6177/6153 one column per array index (p6177_i0_a0, as
    sphr synth --format rap does) instead of the RAP's one array column."""
    out = []
    for name in names:
        key = parse_column(name)[1]
        if key is None:
            out.append(pl.col("eid").alias(name))
            continue
        f = BY_ID[key.field]
        if f.id in RAP_ARRAY_IN_ONE_COLUMN and medication_per_index and f.role == "medication":
            out += [pl.col(f"{f.id}-{key.instance}.{a}").alias(f"{name}_a{a}")
                    for a in range(f.arrays)]
        elif f.id in RAP_ARRAY_IN_ONE_COLUMN:
            out.append(_array_cell(frame, f, key.instance).alias(name))
        else:
            legacy_name = f"{key.field}-{key.instance}.{key.array}"
            out.append((pl.col(legacy_name) if legacy_name in frame.columns
                        else pl.lit(None, pl.String)).alias(name))
    return frame.select(out)


def write_extract(tmp_path, capsys, legacy, entity: str, *, medication_per_index: bool):
    """The RAP extract of the names ``sphr fields --rap [--entity ENTITY]`` prints, as CSV."""
    args = ["--rap", "--entity", entity] if entity else ["--rap"]
    names = run_fields(capsys, *args).splitlines()
    extract = rap_extract(legacy[0], names, medication_per_index=medication_per_index)
    extract.write_csv(tmp_path / "rap.csv")
    return tmp_path / "rap.csv", extract


@pytest.mark.parametrize("entity", ["participant", ""], ids=["dx-extract-dataset", "bare"])
def test_a_rap_extract_of_the_listed_columns_ingests_like_the_legacy_export(
        tmp_path, capsys, legacy, entity):
    from sphr.data.ingest import ingest

    path, extract = write_extract(tmp_path, capsys, legacy, entity, medication_per_index=True)
    result, reference = ingest(path), legacy[1]
    assert result.report["format"] == "RAP csv"
    # every column of the extract is read: the list asks for nothing the pipeline ignores
    assert result.report["columns_read"] == result.report["columns_in_file"] == extract.width
    assert result.baseline.equals(reference.baseline)
    assert result.followup.equals(reference.followup)
    assert reference.outcomes is not None and result.outcomes.equals(reference.outcomes)
    hospital = f"{entity}.p41270" if entity else "p41270"
    assert extract[hospital].drop_nulls().str.starts_with("['").all()


def test_medication_as_the_rap_writes_it_ingests_like_the_legacy_export(
        tmp_path, capsys, legacy):
    from sphr.data.ingest import ingest

    path, extract = write_extract(tmp_path, capsys, legacy, "participant",
                                  medication_per_index=False)
    cells = extract["participant.p6177_i0"].drop_nulls()
    assert cells.len() > 0 and cells.str.contains(r"^\[-?\d+(, -?\d+)*\]$").all()
    assert cells.str.contains(", ").any()  # some men take more than one
    result = ingest(path)
    assert result.baseline.equals(legacy[1].baseline)
    assert result.report["columns_read"] == result.report["columns_in_file"] == extract.width
    # the special codes of a list column are counted under it, as many as in the legacy columns
    for f, column in ((MEDICATION_MEN, "participant.p6177_i0"),
                      (MEDICATION_WOMEN, "participant.p6153_i0")):
        counts: Counter[str] = Counter()
        for name, hit in legacy[1].report["special_codes"].items():
            if name.startswith(f"{f.id}-0."):
                counts.update(hit)
        assert {"-7", "-1", "-3"} <= set(counts)
        assert result.report["special_codes"][f"{column} ({f.name})"] == dict(counts)


def _codes_of(frame: pl.DataFrame, f: Field) -> pl.Expr:
    """The participant's instance-0 codes of ``f``, as a list (empty: no answer)."""
    cols = [f"{f.id}-0.{a}" for a in range(f.arrays) if f"{f.id}-0.{a}" in frame.columns]
    return pl.concat_list([pl.col(c) for c in cols]).list.drop_nulls()


def _as_labels(codes: pl.Expr, f: Field) -> pl.Expr:
    labels = {**(f.coding or {}), **{c: SPECIAL_CODES[c] for c in f.special_codes}}
    return codes.list.eval(pl.element().replace_strict(labels, return_dtype=pl.String))


#: how a cell of 6177/6153 may hold a participant's list; an empty list when unanswered
LIST_FORMS = {
    "json": lambda codes, f: pl.lit("[") + codes.cast(pl.List(pl.String)).list.join(", ")
    + pl.lit("]"),
    "compact": lambda codes, f: pl.lit("[") + codes.cast(pl.List(pl.String)).list.join(",")
    + pl.lit("]"),
    "piped": lambda codes, f: codes.cast(pl.List(pl.String)).list.join("|"),
    "labels": lambda codes, f: pl.lit('["') + _as_labels(codes, f).list.join('", "')
    + pl.lit('"]'),
    "python-labels": lambda codes, f: pl.lit("['") + _as_labels(codes, f).list.join("', '")
    + pl.lit("']"),
}


def _list_cells(frame: pl.DataFrame, f: Field, form: str) -> pl.Expr:
    """``f``'s instance-0 codes as one cell each in ``form`` (``mixed``: the forms in turn, and
    an unanswered participant's ``[]`` or empty cell in turn)."""
    codes = _codes_of(frame, f)
    if form != "mixed":
        cell = LIST_FORMS[form](codes, f)
        return pl.when(codes.list.len() > 0).then(cell).otherwise(
            pl.lit("[]") if form == "json" else pl.lit(None, pl.String))
    turn = pl.int_range(pl.len()) % len(LIST_FORMS)
    cell = pl.lit(None, pl.String)
    for i, make in enumerate(LIST_FORMS.values()):
        cell = pl.when(turn == i).then(make(codes, f)).otherwise(cell)
    empty = pl.when(turn % 2 == 0).then(pl.lit("[]")).otherwise(pl.lit(None, pl.String))
    return pl.when(codes.list.len() > 0).then(cell).otherwise(empty)


def _medication_extract(tmp_path, capsys, legacy, form: str) -> tuple[Path, pl.DataFrame]:
    """The bare-name RAP extract with p6177_i0 / p6153_i0 written in ``form``."""
    path, extract = write_extract(tmp_path, capsys, legacy, "", medication_per_index=False)
    frame = legacy[0]
    extract = extract.with_columns(
        frame.select(_list_cells(frame, MEDICATION_MEN, form).alias("p6177_i0"),
                     _list_cells(frame, MEDICATION_WOMEN, form).alias("p6153_i0")))
    extract.write_csv(path)
    return path, extract


@pytest.mark.parametrize("form", [*LIST_FORMS, "mixed"])
def test_every_list_form_of_the_medication_columns_ingests_like_the_legacy_layout(
        tmp_path, capsys, legacy, form):
    from sphr.data.ingest import ingest

    path, extract = _medication_extract(tmp_path, capsys, legacy, form)
    cells = extract["p6153_i0"].drop_nulls()
    if form in ("labels", "mixed"):
        assert cells.str.contains('"Blood pressure medication"', literal=True).any()
    if form in ("piped", "mixed"):
        assert cells.str.contains(r"^-?\d+\|-?\d+$").any()
    if form in ("json", "mixed"):
        assert (cells == "[]").any()
    assert ingest(path).baseline.equals(legacy[1].baseline)


def test_a_parquet_list_column_ingests_like_the_legacy_layout(tmp_path, capsys, legacy):
    from sphr.data.ingest import ingest

    _, extract = write_extract(tmp_path, capsys, legacy, "", medication_per_index=False)
    frame = legacy[0]
    codes = frame.select(p6177_i0=_codes_of(frame, MEDICATION_MEN),
                         p6153_i0=_codes_of(frame, MEDICATION_WOMEN))
    # an unanswered participant: an empty list for men, a missing one for women
    codes = codes.with_columns(pl.when(pl.col("p6153_i0").list.len() > 0)
                               .then(pl.col("p6153_i0")))
    extract.with_columns(codes).write_parquet(tmp_path / "rap.parquet")
    assert ingest(tmp_path / "rap.parquet").baseline.equals(legacy[1].baseline)


@pytest.mark.parametrize(("cell", "message"), [
    ("[1, 7]", "unknown code '7' in '[1, 7]'"),
    ("1|-5", "unknown code '-5' in '1|-5'"),
    ('["Cholesterol lowering medication", "Aspirin"]', "unknown label 'Aspirin'"),
    ("[1, 2", "'[1, 2' is not a list of values"),
], ids=["code", "piped-code", "label", "not-a-list"])
def test_a_bad_value_inside_a_list_names_file_field_and_row(tmp_path, capsys, legacy, cell,
                                                            message):
    from sphr.data.ingest import ingest

    path, extract = write_extract(tmp_path, capsys, legacy, "participant",
                                  medication_per_index=False)
    row = 37  # 1-based data row
    column = "participant.p6177_i0"
    extract.with_columns(pl.when(pl.int_range(pl.len()) == row - 1).then(pl.lit(cell))
                         .otherwise(pl.col(column)).alias(column)).write_csv(path)
    with pytest.raises(InputError, match=re.escape(message)) as info:
        ingest(path)
    err = info.value
    assert err.file == str(path) and err.row == row
    assert err.field == f"{column} (medication_men)"
    assert str(path) in str(err) and f"row {row}" in str(err) and column in str(err)


def test_a_list_beside_per_index_columns_is_refused(tmp_path, capsys, legacy):
    """With p6153_i0_a0 ... a3 in the file, a list in one of them leaves unknown which index
    each value is: the ingest stops rather than guess."""
    from sphr.data.ingest import ingest

    path, extract = write_extract(tmp_path, capsys, legacy, "", medication_per_index=True)
    extract.with_columns(pl.when(pl.int_range(pl.len()) == 4).then(pl.lit("[1, 2]"))
                         .otherwise(pl.col("p6153_i0_a0")).alias("p6153_i0_a0")
                         ).write_csv(path)
    with pytest.raises(InputError, match="holds several values in one array column") as info:
        ingest(path)
    assert info.value.row == 5 and info.value.field == "p6153_i0_a0 (medication_women)"


def test_the_required_columns_are_exactly_what_the_ingest_cannot_do_without(
        tmp_path, capsys, legacy):
    from sphr.data.ingest import ingest
    from sphr.settings.preflight import check_export_fields

    names = run_fields(capsys, "--rap", "--required-only").splitlines()
    ingest_needs = ["p31", "p53_i0", "p2443_i0", "p2453_i0", "p2473_i0", "p21003_i0"]
    p0 = [n for n in names if n not in ["eid", *ingest_needs]]
    # the seven P0 markers (hdl is one field for both sexes' ranges): the run's pre-flight
    assert len(p0) == 7 and set(names) == {"eid", *ingest_needs, *p0}
    extract = rap_extract(legacy[0], names, medication_per_index=True)
    extract.write_csv(tmp_path / "required.csv")
    assert ingest(tmp_path / "required.csv").baseline.height == legacy[1].baseline.height
    check_export_fields(tmp_path / "required.csv")
    for name in ingest_needs:
        extract.drop(name).write_csv(tmp_path / "less.csv")
        with pytest.raises(InputError, match=f"required field {parse_column(name)[1].field} "):
            ingest(tmp_path / "less.csv")
    for name in p0:
        extract.drop(name).write_csv(tmp_path / "less.csv")
        with pytest.raises(InputError, match=f"P0 marker {parse_column(name)[1].field} "):
            check_export_fields(tmp_path / "less.csv")


def test_a_whole_array_column_is_read_as_array_zero():
    # the reader maps p6177_i0 / p41270 to array 0; the list relies on that (one name each)
    assert parse_column("p41270") == ("rap", ColumnKey(41270, 0, 0))
    assert parse_column("participant.p6177_i0") == ("rap", ColumnKey(6177, 0, 0))
