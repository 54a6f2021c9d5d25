"""Raw export columns to typed ``field-instance.array`` columns (:func:`decode`).

Dates are parsed, coded fields' numbers and text labels become integer codes (an unknown one
stops the ingest, naming the file, field and row), a RAP list cell becomes the per-index
columns, UK Biobank's special negative codes are counted and then missing, and a number no
person can have (outside its field's plausible range, or not finite) is counted and then
missing (:func:`plausibility`; docs/INGEST.md).
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from sphr.data.export_layout import ExportLayout
from sphr.data.fields import BY_ID, SPECIAL_CODES, Field
from sphr.data.headers import ColumnKey, ListCellError, is_list_cell, split_list_cells
from sphr.errors import InputError

#: rows and eids of implausible values kept per field in the report (the count has them all)
FIRST_SHOWN = 5
#: -7 "none of the above" answers a multiple-choice question; the other special codes do not
ANSWERED_NONE = -7
#: value types whose numbers must be plausible (:func:`plausibility`)
_CHECKED = ("continuous", "integer")


def column_name(key: ColumnKey) -> str:
    """A decoded column's name: ``field-instance.array``, whatever the export's style."""
    return f"{key.field}-{key.instance}.{key.array}"


def _decode_coded(layout: ExportLayout, column: pl.Series, key: ColumnKey, f: Field, *,
                  rows: pl.Series | None = None, cells: pl.Series | None = None) -> pl.Series:
    """Numbers or text labels to integer codes; an unknown label or code is an error.

    ``rows`` (1-based data rows) and ``cells`` (the whole list cells) are given when
    ``column`` holds the values of list cells, one per value, so that an error names the
    participant's row and cell rather than the value's position.
    """
    name = layout.columns[key]
    text = column.str.strip_chars()
    number = text.cast(pl.Float64, strict=False)
    lookup = f.label_to_code
    label = text.str.to_lowercase().replace_strict(lookup, default=None, return_dtype=pl.Int64)
    code = pl.select(pl.coalesce(number.round(0).cast(pl.Int64), label)).to_series()
    unreadable = text.is_not_null() & code.is_null()
    fractional = number.is_not_null() & (number != number.round(0))
    valid = set(f.coding or {}) | set(f.special_codes)
    unknown = code.is_not_null() & ~code.is_in(sorted(valid))
    if f.value_type == "integer":  # any count is fine; only negative codes must be known
        unknown = unknown & (code < 0)
    bad = unreadable | fractional | unknown
    if bad.any():
        row = int(bad.arg_true()[0])
        shown = "; ".join(f"{c} {lbl}" for c, lbl in {**(f.coding or {}),
                          **{c: SPECIAL_CODES[c] for c in f.special_codes}}.items())
        kind = "label" if number[row] is None else "code"
        where = f" in {cells[row]!r}" if cells is not None else ""
        raise InputError(
            f"unknown {kind} {text[row]!r}{where} for {f.title} (known: {shown})",
            file=layout.path, field=f"{name} ({f.name})",
            row=int(rows[row]) if rows is not None else row + 1)
    return code.alias(column_name(key))


def _holds_lists(column: pl.Series, f: Field) -> bool:
    """Whether a multi-select field's text column has a cell holding a whole list."""
    return (f.value_type == "categorical_multiple" and column.dtype == pl.Utf8
            and bool(column.to_frame("c").select(is_list_cell(pl.col("c")).any()).item()))


def _decode_list(layout: ExportLayout, column: pl.Series, key: ColumnKey, f: Field
                 ) -> list[pl.Series]:
    """A column whose cells hold a whole array (the RAP's ``p6177_i0`` = ``[1, 2]``) as the
    columns ``field-instance.0``, ``.1``, ... of the per-index layout, codes decoded."""
    name = layout.columns[key]
    if len(layout.arrays(f.id, key.instance)) > 1:
        # a list beside per-index columns: which index each value stands for is unknowable
        lists = column.to_frame("c").select(is_list_cell(pl.col("c"))).to_series()
        row = int(lists.fill_null(False).arg_true()[0])
        raise InputError(
            f"{column[row][:60]!r} holds several values in one array column; expected one "
            f"value per column ({f.id}-{key.instance}.0, {f.id}-{key.instance}.1, ...) or the "
            f"whole list in a single column (p{f.id}_i{key.instance})",
            file=layout.path, field=f"{name} ({f.name})", row=row + 1)
    try:
        lists = split_list_cells(column)
    except ListCellError as exc:
        raise InputError(str(exc), file=layout.path, field=f"{name} ({f.name})",
                         row=exc.index + 1) from None
    n = len(column)
    long = (pl.DataFrame({"row": pl.int_range(1, n + 1, eager=True, dtype=pl.UInt32),
                          "cell": column, "item": lists})
            .with_columns(pos=pl.int_ranges(0, pl.col("item").list.len(), dtype=pl.UInt32))
            .explode(["item", "pos"])
            .filter(pl.col("item").is_not_null() & (pl.col("item") != "")))
    codes = _decode_coded(layout, long["item"], key, f, rows=long["row"], cells=long["cell"])
    long = long.select("row", "pos", code=codes)
    width = int(long["pos"].max()) + 1 if long.height else 1
    out = []
    for a in range(width):
        at = long.filter(pl.col("pos") == a)
        values = pl.repeat(None, n, dtype=pl.Int64, eager=True)
        if at.height:
            values = values.scatter(at["row"] - 1, at["code"])
        out.append(values.alias(column_name(ColumnKey(f.id, key.instance, a))))
    return out


def plausibility(f: Field) -> str | None:
    """The plausibility rule the ingest applies to ``f``'s values (``Field.plausible_rule``), or
    None for a field it does not check: dates, codes and text, whose unknown values stop the
    ingest instead."""
    return f.plausible_rule if f.value_type in _CHECKED else None


def implausible_mask(values: pl.Series, f: Field) -> pl.Series | None:
    """Per value, whether the ingest's plausibility rule rejects it: outside ``f``'s plausible
    range, or (a float) not finite; a missing value is not rejected. None when no test applies
    (not numbers, or a field without bounds holding integers)."""
    if not values.dtype.is_numeric():
        return None
    v = pl.col("v")
    tests = [~v.is_finite()] if values.dtype.is_float() else []
    if f.min_value is not None:
        tests.append(v < f.min_value)
    if f.max_value is not None:
        tests.append(v > f.max_value)
    if not tests:
        return None
    return values.to_frame("v").select(pl.any_horizontal(tests).fill_null(False)).to_series()


def _implausible_to_null(values: pl.Series, f: Field, column: str, eid: pl.Series,
                         implausible: dict[str, dict]) -> pl.Series:
    """``values`` with each one outside ``f``'s plausible range, or not finite, set null; each
    field hit gets a count, the rule and its first rows and eids in ``implausible``."""
    bad = implausible_mask(values, f)
    if bad is None or not bad.any():
        return values
    index = bad.arg_true()
    first = index.head(FIRST_SHOWN)
    implausible[f.name] = {
        "column": column, "rule": f.plausible_rule, "count": len(index),
        "first_rows": (first + 1).to_list(), "first_eids": eid.gather(first).to_list(),
        # text, so that inf and NaN survive JSON
        "first_values": [str(v) for v in values.gather(first).to_list()],
    }
    return pl.select(pl.when(~bad).then(values)).to_series().alias(values.name)


def decode(layout: ExportLayout, raw: dict[str, pa.ChunkedArray], keys: list[ColumnKey],
            special_counts: dict[str, dict[str, int]],
            implausible: dict[str, dict] | None = None) -> pl.DataFrame:
    """Typed columns named ``field-instance.array``; special codes counted, then null;
    implausible values (:func:`_implausible_to_null`) counted in ``implausible``, then null.

    ``raw`` (the columns as read, by file name; see :func:`raw_columns`) is emptied column by
    column: each raw column is dropped as soon as it is decoded, so the raw and the decoded
    table never both exist whole.
    """
    # a caller without a report still gets the values an ingest would write
    implausible = {} if implausible is None else implausible

    def take(name: str) -> pl.Series:
        return pl.Series(name, raw.pop(name))

    eid_text = take(layout.eid_column)
    eid = eid_text.cast(pl.Int64, strict=False)
    bad = eid.is_null()
    if bad.any():
        row = int(bad.arg_true()[0])
        raise InputError(f"participant id {eid_text[row]!r} is not an integer", file=layout.path,
                         field=layout.eid_column, row=row + 1)
    out = [eid.alias("eid")]
    for key in keys:
        f, name = BY_ID[key.field], layout.columns[key]
        if f.value_type == "date":
            text = take(name).str.strip_chars()
            date = text.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False)
            bad = text.is_not_null() & date.is_null()
            if bad.any():
                row = int(bad.arg_true()[0])
                raise InputError(f"{text[row]!r} is not a date (YYYY-MM-DD)", file=layout.path,
                                 field=f"{name} ({f.name})", row=row + 1)
            out.append(date.alias(column_name(key)))
            continue
        column = take(name)
        if _holds_lists(column, f):
            decoded = _decode_list(layout, column, key, f)
        elif column.dtype == pl.Utf8:
            decoded = [_decode_coded(layout, column, key, f)]
        else:
            decoded = [column.alias(column_name(key))]
        del column
        for values in decoded:
            values = _null_special(values, f, f"{name} ({f.name})", special_counts)
            if plausibility(f) is not None:
                values = _implausible_to_null(values, f, name, eid, implausible)
            out.append(values)
    pa.default_memory_pool().release_unused()
    return pl.DataFrame(out)


def _null_special(values: pl.Series, f: Field, label: str,
                  special_counts: dict[str, dict[str, int]]) -> pl.Series:
    """``values`` with UKB's special codes counted under ``label``, then null, but for -7
    ("none of the above"), which is an answer."""
    # labs are never negative: UKB's special codes in a numeric column mean "no answer"
    specials = list(f.special_codes) if f.special_codes else list(SPECIAL_CODES)
    hit = values.is_in([values.dtype.to_python()(c) for c in specials])
    if not hit.any():
        return values
    # a list column's values spread over several columns count under the one column read
    counts = special_counts.setdefault(label, {})
    for c, n in values.filter(hit).value_counts().iter_rows():
        counts[str(int(c))] = counts.get(str(int(c)), 0) + int(n)
    no_answer = hit & (values != ANSWERED_NONE)
    return pl.select(pl.when(~no_answer).then(values)).to_series().alias(values.name)


def raw_columns(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """The table's columns by name, for :func:`decode` to consume (drop the table after)."""
    return dict(zip(table.column_names, table.columns, strict=True))
