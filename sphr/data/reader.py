"""Read the catalog's columns out of a UK Biobank export of any form, and nothing else.

A real main dataset is 10+ GB with thousands of columns. We read the header,
pick the columns we need, and stream the file in blocks with pyarrow's CSV
reader, which parses only the included columns and converts numbers in C++.
pyarrow counts fields properly inside quotes, so a row with too few or too
many fields is caught (polars pads or drops them silently). A last line cut
off mid-row is caught by looking at the file's tail before parsing.

Bytes that are not UTF-8 in a column we read stop the read with one error naming
the file, field and data row. We do not fall back to Latin-1: a UK Biobank export
is UTF-8, so such a byte means a corrupted or re-encoded file, and guessing its
encoding would hide that. pyarrow already validates every text column it converts
and fails to parse a number holding such a byte, so the happy path pays nothing;
only after a failure is the one column pyarrow names streamed again, as raw bytes,
to find the row. Columns we never read are never decoded, so their bytes cannot
reach an output and are not checked (checking them would mean validating every
byte of a 10+ GB file that pyarrow otherwise only splits into fields).
"""

from __future__ import annotations

import csv
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from sphr.data.fields import BY_ID, Field
from sphr.data.headers import ColumnKey, Style, parse_column
from sphr.errors import InputError
from sphr.progress import progress

log = logging.getLogger(__name__)

_ID_NAMES = {"eid", "f.eid", "participant.eid"}
_NULLS = ["", "NA"]
_TAIL_BYTES = 1 << 20
#: 4 MB blocks: at 500,000 rows x 1,000 columns, 16 MB blocks kept ~350 MB more resident
#: during the read (parse buffers in flight) for no measurable speed gain
_BLOCK_BYTES = 4 << 20
_PARQUET_BATCH_ROWS = 65_536

#: ``hook(table, first_row)``: a block of side columns (eid + the side keys, named as in the
#: file, all text) and the 1-based data row of its first row
BatchHook = Callable[[pa.Table, int], None]


@dataclass
class ExportLayout:
    """What the header of an export says: its form and where each field column is."""

    path: Path
    format: str  # csv | tsv | parquet
    style: Style
    delimiter: str | None
    header: list[str]
    eid_column: str
    columns: dict[ColumnKey, str]
    ignored: list[str] = field(default_factory=list)

    def instances(self, field_id: int) -> list[int]:
        return sorted({k.instance for k in self.columns if k.field == field_id})

    def arrays(self, field_id: int, instance: int) -> list[int]:
        return sorted(k.array for k in self.columns if k.field == field_id and k.instance == instance)

    def describe(self) -> str:
        kind = {"legacy": "legacy ukbconv", "tab": "R .tab", "rap": "RAP"}[self.style]
        return f"{kind} {self.format}"


def _read_header_line(path: Path) -> str:
    with open(path, "rb") as fh:
        first = fh.readline()
    if not first.strip():
        raise InputError("empty file: no header line", file=path, row=0)
    try:
        return first.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InputError(f"header is not UTF-8 text ({exc.reason})", file=path, row=0) from None


def inspect_export(path: str | Path) -> ExportLayout:
    """Detect the export's form from its header; raise a clear error if it is not UKB's."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", file=path)
    if path.stat().st_size == 0:
        raise InputError("empty file: no header line", file=path, row=0)
    with open(path, "rb") as fh:
        is_parquet = fh.read(4) == b"PAR1"
    if is_parquet:
        import pyarrow.parquet as pq

        header = pq.read_schema(path).names
        fmt, delimiter = "parquet", None
    else:
        line = _read_header_line(path)
        delimiter = "\t" if line.count("\t") > line.count(",") else ","
        header = next(csv.reader([line], delimiter=delimiter))
        fmt = "tsv" if delimiter == "\t" else "csv"

    styles: dict[str, list[str]] = {}
    columns: dict[ColumnKey, str] = {}
    eid_col, ignored = None, []
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(f"column {name!r} appears twice in the header", file=path,
                             field=name, row=0)
        seen.add(name)
        if name in _ID_NAMES:
            eid_col = name
            continue
        parsed = parse_column(name)
        if parsed is None or parsed[1] is None:
            ignored.append(name)
            continue
        style, key = parsed
        styles.setdefault(style, []).append(name)
        columns[key] = name
    if not styles:
        shown = ", ".join(repr(h) for h in header[:4])
        raise InputError(
            f"unknown header style (first columns {shown}): expected UK Biobank names such as "
            "'21003-0.0' (ukbconv), 'f.21003.0.0' (R .tab) or 'p21003_i0' (RAP)",
            file=path, row=0)
    if len(styles) > 1:
        examples = "; ".join(f"{s}: {v[0]!r}" for s, v in styles.items())
        raise InputError(f"header mixes column naming styles ({examples}); export with one style",
                         file=path, row=0)
    if eid_col is None:
        raise InputError("no participant id column (eid, f.eid or participant.eid) in the header",
                         file=path, field="eid", row=0)
    style = next(iter(styles))
    return ExportLayout(path, fmt, style, delimiter, header, eid_col, columns, ignored)


def _arrow_type(f: Field) -> pa.DataType:
    # Coded fields arrive as numbers or as text labels ("Yes", "Do not know"): read as text.
    if f.value_type in ("date", "text"):
        return pa.string()
    if f.coding is not None or f.special_codes:
        return pa.string()
    return pa.float64()


def _count_lines(path: Path) -> int:
    count = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(64 << 20):
            count += chunk.count(b"\n")
    return count


def check_tail(layout: ExportLayout) -> int | None:
    """The data row number of a last line cut off mid-row, or None if the file ends cleanly."""
    path = layout.path
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - _TAIL_BYTES))
        tail = fh.read()
    if tail.endswith(b"\n"):
        return None
    last = tail.rsplit(b"\n", 1)[-1].decode("utf-8", errors="replace")
    try:
        fields = next(csv.reader(io.StringIO(last), delimiter=layout.delimiter or ",", strict=True))
        complete = len(fields) == len(layout.header) and last.count('"') % 2 == 0
    except (csv.Error, StopIteration):
        complete = False
    if complete:
        return None
    return _count_lines(path)  # lines before the cut one = header + data rows, so its data row number


def _find_row(path: Path, text: str) -> int | None:
    """The data row (1-based) whose line starts with ``text`` (error path only)."""
    needle = text.rstrip("\r\n")[:200]
    with open(path, encoding="utf-8", errors="replace") as fh:
        next(fh, None)
        for i, line in enumerate(fh, start=1):
            if line.startswith(needle):
                return i
    return None


def read_columns(layout: ExportLayout, keys: list[ColumnKey], *, drop_truncated_last_row: bool = False,
                 warnings: list[str] | None = None, side_keys: list[ColumnKey] | None = None,
                 side_hook: BatchHook | None = None) -> pa.Table:
    """Stream the export and return eid plus the requested columns (named as in the file).

    Numeric fields are float64, dates and coded fields text (decoded by the caller).

    ``side_keys`` are read in the same pass but never kept whole: each block of rows goes to
    ``side_hook`` as text and is dropped. A real export has hundreds of sparse linked-record
    columns (41270 alone has 259 arrays); holding them all for 500,000 rows would cost
    gigabytes, and a second pass over a 10+ GB file would double the ingest time.
    """
    warnings = warnings if warnings is not None else []
    side_keys = list(side_keys or [])
    if side_keys and side_hook is None:
        raise ValueError("side_keys need a side_hook")
    names = [layout.eid_column] + [layout.columns[k] for k in keys]
    side_names = [layout.columns[k] for k in side_keys]
    types = {layout.eid_column: pa.string()}
    for k in keys:
        types[layout.columns[k]] = _arrow_type(BY_ID[k.field])
    for name in side_names:
        types[name] = pa.string()
    if layout.format == "parquet":
        if side_names:
            _stream_parquet_side(layout, [layout.eid_column, *side_names], side_hook)
        return _read_parquet(layout, names, types)

    truncated_row = check_tail(layout)
    if truncated_row is not None and not drop_truncated_last_row:
        raise InputError(
            "the last line is cut off mid-row (an incomplete download or copy?); re-export the "
            "file, or pass --drop-truncated-last-row to ingest without that participant",
            file=layout.path, row=truncated_row)

    invalid: list = []
    reader = _open_csv(layout, names + side_names, types, invalid)
    side = (_SideBlocks(side_hook, [layout.eid_column, *side_names]) if side_names and side_hook
            else None)
    batches = _read_batches(reader, layout, names, side, invalid, truncated_row)
    schema = pa.schema([reader.schema.field(n) for n in names])
    table = pa.Table.from_batches(batches, schema=schema)
    _raise_on_ragged_row(layout, invalid, truncated_row)
    if truncated_row is not None:
        if not invalid:  # the cut line still had every field (cut inside the last value)
            table = table.slice(0, table.num_rows - 1)
            if side is not None:
                side.drop_last_row()
        warnings.append(f"dropped the cut-off last row {truncated_row} (--drop-truncated-last-row)")
    if side is not None:
        side.finish()
    # the parse buffers are free now; hand them back to the OS rather than keep them pooled
    pa.default_memory_pool().release_unused()
    return table


def _open_csv(layout: ExportLayout, columns: list[str], types: dict[str, pa.DataType],
              invalid: list) -> pa.RecordBatchReader:
    """A streaming reader of ``columns``; rows with the wrong number of fields are skipped and
    collected in ``invalid``, so the caller can name the row rather than pyarrow's block."""
    import pyarrow.csv as pc

    def on_invalid(row) -> str:
        invalid.append(row)
        return "skip"

    try:
        return pc.open_csv(
            layout.path,
            read_options=pc.ReadOptions(block_size=_BLOCK_BYTES, use_threads=True),
            parse_options=pc.ParseOptions(delimiter=layout.delimiter,
                                          invalid_row_handler=on_invalid),
            convert_options=pc.ConvertOptions(include_columns=columns,
                                              column_types=types, null_values=_NULLS,
                                              strings_can_be_null=True,
                                              quoted_strings_can_be_null=True),
        )
    except pa.ArrowInvalid as exc:  # the first block is parsed on open
        raise _conversion_error(layout, str(exc)) from None


class _SideBlocks:
    """The side columns' blocks on their way to the hook.

    A block goes to the hook only once the next one has been read cleanly: a ragged row must
    be reported as such (not as whatever the hook finds in a shifted row), and the cut-off
    last row, if any, is only known to be the last at the end.
    """

    def __init__(self, hook: BatchHook, columns: list[str]) -> None:
        self.hook, self.columns = hook, columns
        self.pending: pa.RecordBatch | None = None
        self.rows = 0

    def push(self, batch: pa.RecordBatch) -> None:
        if self.pending is not None:
            self._flush(self.pending)
        self.pending = batch

    def drop_last_row(self) -> None:
        if self.pending is not None:
            self.pending = self.pending.slice(0, self.pending.num_rows - 1)

    def finish(self) -> None:
        if self.pending is not None:
            self._flush(self.pending)
            self.pending = None

    def _flush(self, batch: pa.RecordBatch) -> None:
        self.hook(pa.Table.from_batches([batch]).select(self.columns), self.rows + 1)
        self.rows += batch.num_rows


def _read_batches(reader: pa.RecordBatchReader, layout: ExportLayout,
                  names: list[str], side: _SideBlocks | None, invalid: list,
                  truncated_row: int | None) -> list[pa.RecordBatch]:
    """The kept columns' blocks; the side columns' go to ``side``. Stops at the block after a
    ragged row (the caller reports it)."""
    batches = []
    size = layout.path.stat().st_size
    bar = progress(desc=f"reading {layout.path.name}", total=size, unit="B", unit_scale=True)
    try:
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            except pa.ArrowInvalid as exc:
                raise _conversion_error(layout, str(exc)) from None
            bar.update(min(_BLOCK_BYTES, size - bar.n))
            # the cut-off last line is the one ragged row we may meet (and skip) at the end
            if len(invalid) > (truncated_row is not None):
                batches.append(batch.select(names))
                break
            if side is not None:
                side.push(batch)
            batches.append(batch.select(names) if side is not None else batch)
    finally:
        bar.close()
    return batches


def _raise_on_ragged_row(layout: ExportLayout, invalid: list, truncated_row: int | None) -> None:
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


def _stream_parquet_side(layout: ExportLayout, names: list[str], hook: BatchHook) -> None:
    """Side columns of a parquet export, in row batches, as text (see :func:`read_columns`)."""
    import pyarrow.parquet as pq

    first = 1
    for batch in pq.ParquetFile(layout.path).iter_batches(batch_size=_PARQUET_BATCH_ROWS,
                                                          columns=names):
        cols = [_as_text(batch.column(i)) for i in range(batch.num_columns)]
        hook(pa.table(cols, names=names), first)
        first += batch.num_rows


def _as_text(col: pa.Array) -> pa.Array:
    """Any parquet column as text: dates as YYYY-MM-DD, lists joined with '|', codes as digits."""
    import pyarrow.compute as pc

    if pa.types.is_string(col.type):
        return col
    if pa.types.is_large_string(col.type):
        return pc.cast(col, pa.string())
    if pa.types.is_date(col.type) or pa.types.is_timestamp(col.type):
        return pc.strftime(col, format="%Y-%m-%d")
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        # one column holding every array value (RAP's form of 41270): a null inside the list
        # stays an empty slot, so the positions (and the dates aligned with them) are kept
        items = _as_text(pa.array([v for row in col.to_pylist() for v in (row or [])],
                                  col.type.value_type)).to_pylist()
        out, at = [], 0
        for row in col.to_pylist():
            if row is None:
                out.append(None)
                continue
            out.append("|".join("" if v is None else v for v in items[at:at + len(row)]))
            at += len(row)
        return pa.array(out, pa.string())
    if pa.types.is_floating(col.type):
        col = pc.if_else(pc.is_nan(col), pa.scalar(None, col.type), col)
        return pc.cast(pc.cast(col, pa.int64(), safe=False), pa.string())
    return pc.cast(col, pa.string())


def _conversion_error(layout: ExportLayout, message: str) -> InputError:
    """pyarrow names the column that failed to convert, not the row: find the row."""
    import re

    col = re.search(r"column #(\d+)", message)
    if col is None:
        return InputError(f"could not read the file: {message}", file=layout.path)
    name = layout.header[int(col[1])]
    try:
        located = _locate_bad_cell(layout, name)
    except pa.ArrowInvalid:  # a file pyarrow cannot even split into fields: say what it said
        located = None
    return located or InputError(f"could not read the file: {message}", file=layout.path,
                                 field=_field_label(name))


def _locate_bad_cell(layout: ExportLayout, name: str) -> InputError | None:
    """Stream one CSV column again as raw bytes; an error for its first cell that is not
    UTF-8 or, in a numeric field, not a number (error path only).

    Streamed rather than read whole: the bad cell is often early, and one text column of a
    500,000-row export need not be held to find it.
    """
    import polars as pl
    import pyarrow.csv as pc

    parsed = parse_column(name)
    f = BY_ID.get(parsed[1].field) if parsed and parsed[1] is not None else None
    numeric = f is not None and _arrow_type(f) == pa.float64()
    reader = pc.open_csv(
        layout.path,
        read_options=pc.ReadOptions(block_size=_BLOCK_BYTES),
        parse_options=pc.ParseOptions(delimiter=layout.delimiter,
                                      invalid_row_handler=lambda r: "skip"),
        convert_options=pc.ConvertOptions(include_columns=[name], column_types={name: pa.binary()},
                                          null_values=_NULLS, strings_can_be_null=True,
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
                file=layout.path, field=_field_label(name), row=first + at)
        if numeric:
            text = pl.from_arrow(values.cast(pa.string())).str.strip_chars()
            bad = (text.is_not_null() & text.cast(pl.Float64, strict=False).is_null()).arg_true()
            if len(bad):
                return InputError(f"non-numeric value {text[int(bad[0])]!r} in a numeric field",
                                  file=layout.path, field=_field_label(name),
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


def _field_label(name: str) -> str:
    """A column as errors name it: ``30690-0.0 (cholesterol)``, or the bare name."""
    parsed = parse_column(name)
    key = parsed[1] if parsed else None
    return f"{name} ({BY_ID[key.field].name})" if key is not None and key.field in BY_ID else name


def _read_parquet(layout: ExportLayout, names: list[str], types: dict[str, pa.DataType]) -> pa.Table:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(layout.path, columns=names)
    if table.num_rows == 0:
        return table
    cols = []
    for name in names:
        col = table.column(name)
        want = types[name]
        if pa.types.is_floating(col.type) and want == pa.float64():
            # pandas writes a missing number to parquet as NaN: it is a missing value there,
            # not the implausible NaN that text "NaN" in a CSV is (sphr.data.ingest counts those)
            col = pc.if_else(pc.is_nan(col), pa.scalar(None, col.type), col)
        if col.type != want:
            if want == pa.string() and (pa.types.is_list(col.type)
                                        or pa.types.is_large_list(col.type)):
                # a whole array in one column (the RAP's p6177_i0): '1|2', decoded by the
                # ingest as the CSV form; an empty list is no value, as an empty CSV cell
                text = _as_text(col.combine_chunks())
                col = pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.string()), text)
            elif pa.types.is_date(col.type) or pa.types.is_timestamp(col.type):
                col = pc.strftime(col, format="%Y-%m-%d")
            elif want == pa.string() and (pa.types.is_floating(col.type)):
                # 1.0 -> "1": codes stored as floats decode like their integer text
                as_int = pc.cast(col, pa.int64(), safe=False)
                col = pc.cast(as_int, pa.string())
            else:
                try:
                    col = pc.cast(col, want)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    raise _locate_bad_value(layout, table, name) from None
        cols.append(col)
    return pa.table(cols, names=names)


def _locate_bad_value(layout: ExportLayout, table: pa.Table, name: str) -> InputError:
    import polars as pl

    s = pl.from_arrow(table.column(name)).cast(pl.Utf8).str.strip_chars()
    num = s.cast(pl.Float64, strict=False)
    bad = (s.is_not_null() & num.is_null()).arg_true()
    row = int(bad[0]) + 1 if len(bad) else None
    value = s[row - 1] if row else None
    return InputError(f"non-numeric value {value!r} in a numeric field", file=layout.path,
                      field=_field_label(name), row=row)
