"""Where a CSV export's read failed: the row of a ragged line, and the row and column of a
value that is not UTF-8 or, in a numeric field, not a number. Error path only: the happy path
never comes here (docs/INGEST.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from sphr.data.export_layout import NULLS, ExportLayout, arrow_type, field_label
from sphr.data.fields import BY_ID
from sphr.data.headers import parse_column
from sphr.errors import InputError


def _find_row(path: Path, text: str) -> int | None:
    """The data row (1-based) whose line starts with ``text`` (error path only)."""
    needle = text.rstrip("\r\n")[:200]
    with open(path, encoding="utf-8", errors="replace") as fh:
        next(fh, None)
        for i, line in enumerate(fh, start=1):
            if line.startswith(needle):
                return i
    return None


def raise_on_ragged_row(layout: ExportLayout, invalid: list, truncated_row: int | None
                        ) -> None:
    """Stop on the first row with too few or too many fields, other than the cut-off last."""
    ragged = invalid[: len(invalid) - (truncated_row is not None)] if invalid else []
    if ragged:
        bad = ragged[0]
        row = _find_row(layout.path, bad.text)
        more = "fewer" if bad.actual_columns < bad.expected_columns else "more"
        raise InputError(
            f"row has {bad.actual_columns} fields, {more} than the header's "
            f"{bad.expected_columns} (a stray delimiter or a broken line?)",
            file=layout.path, row=row)


def conversion_error(layout: ExportLayout, message: str, block_bytes: int) -> InputError:
    """pyarrow names the column that failed to convert, not the row: find the row."""
    import re

    col = re.search(r"column #(\d+)", message)
    if col is None:
        return InputError(f"could not read the file: {message}", file=layout.path)
    name = layout.header[int(col[1])]
    try:
        located = _locate_bad_cell(layout, name, block_bytes)
    except pa.ArrowInvalid:  # a file pyarrow cannot even split into fields: say what it said
        located = None
    return located or InputError(f"could not read the file: {message}", file=layout.path,
                                 field=field_label(name))


def _locate_bad_cell(layout: ExportLayout, name: str, block_bytes: int) -> InputError | None:
    """Stream one CSV column again as raw bytes; an error for its first cell that is not
    UTF-8 or, in a numeric field, not a number (error path only).

    Streamed rather than read whole: the bad cell is often early, and one text column of a
    500,000-row export need not be held to find it.
    """
    import polars as pl
    import pyarrow.csv as pc

    parsed = parse_column(name)
    f = BY_ID.get(parsed[1].field) if parsed and parsed[1] is not None else None
    numeric = f is not None and arrow_type(f) == pa.float64()
    reader = pc.open_csv(
        layout.path,
        read_options=pc.ReadOptions(block_size=block_bytes),
        parse_options=pc.ParseOptions(delimiter=layout.delimiter,
                                      invalid_row_handler=lambda r: "skip"),
        convert_options=pc.ConvertOptions(include_columns=[name],
                                          column_types={name: pa.binary()},
                                          null_values=NULLS, strings_can_be_null=True,
                                          quoted_strings_can_be_null=True))
    first = 1
    for batch in reader:
        values = batch.column(0)
        bad_text = _first_not_utf8(values)
        if bad_text is not None:
            at, raw, byte = bad_text
            return InputError(
                f"value {repr(raw)[1:]} holds byte 0x{byte:02x}, which is not UTF-8 text; a UK "
                "Biobank export is UTF-8, so the file was corrupted or re-encoded: re-export "
                "it (or convert it, e.g. iconv -f latin1 -t utf-8, if you know its encoding)",
                file=layout.path, field=field_label(name), row=first + at)
        if numeric:
            text = pl.from_arrow(values.cast(pa.string())).str.strip_chars()
            bad = (text.is_not_null() & text.cast(pl.Float64, strict=False).is_null()).arg_true()
            if len(bad):
                return InputError(f"non-numeric value {text[int(bad[0])]!r} in a numeric field",
                                  file=layout.path, field=field_label(name),
                                  row=first + int(bad[0]))
        first += batch.num_rows
    return None


def _first_not_utf8(values: pa.Array) -> tuple[int, bytes, int] | None:
    """The first value that is not UTF-8: its index, its bytes and the first bad byte (None
    if all are UTF-8). Arrow validates the whole block in C++; only a block known to hold
    such a value is searched value by value."""
    try:
        values.cast(pa.string())
        return None
    except pa.ArrowInvalid:
        pass
    for i, value in enumerate(values.to_pylist()):
        if value is not None:
            try:
                value.decode("utf-8")
            except UnicodeDecodeError as exc:
                return i, value, value[exc.start]
    return None
