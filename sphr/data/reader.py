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
from pathlib import Path

import pyarrow as pa

from sphr.data.csv_errors import conversion_error, raise_on_ragged_row
from sphr.data.export_layout import NULLS, BatchHook, ExportLayout, arrow_type
from sphr.data.fields import BY_ID
from sphr.data.headers import ColumnKey
from sphr.data.parquet_export import read_parquet, stream_parquet_side
from sphr.errors import InputError
from sphr.progress import progress

log = logging.getLogger(__name__)

_TAIL_BYTES = 1 << 20
#: 4 MB blocks: at 500,000 rows x 1,000 columns, 16 MB blocks kept ~350 MB more resident
#: during the read (parse buffers in flight) for no measurable speed gain
_BLOCK_BYTES = 4 << 20


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
        fields = next(csv.reader(io.StringIO(last), delimiter=layout.delimiter or ",",
                                 strict=True))
        complete = len(fields) == len(layout.header) and last.count('"') % 2 == 0
    except (csv.Error, StopIteration):
        complete = False
    if complete:
        return None
    # the lines before the cut one are the header and the data rows: the count is its data row
    return _count_lines(path)


def read_columns(layout: ExportLayout, keys: list[ColumnKey], *,
                 drop_truncated_last_row: bool = False,
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
        types[layout.columns[k]] = arrow_type(BY_ID[k.field])
    for name in side_names:
        types[name] = pa.string()
    if layout.format == "parquet":
        if side_names:
            stream_parquet_side(layout, [layout.eid_column, *side_names], side_hook)
        return read_parquet(layout, names, types)

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
    raise_on_ragged_row(layout, invalid, truncated_row)
    if truncated_row is not None:
        if not invalid:  # the cut line still had every field (cut inside the last value)
            table = table.slice(0, table.num_rows - 1)
            if side is not None:
                side.drop_last_row()
        warnings.append(f"dropped the cut-off last row {truncated_row} "
                        "(--drop-truncated-last-row)")
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
                                              column_types=types, null_values=NULLS,
                                              strings_can_be_null=True,
                                              quoted_strings_can_be_null=True),
        )
    except pa.ArrowInvalid as exc:  # the first block is parsed on open
        raise conversion_error(layout, str(exc), _BLOCK_BYTES) from None


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
                raise conversion_error(layout, str(exc), _BLOCK_BYTES) from None
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
