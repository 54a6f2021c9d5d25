"""A parquet export: its kept columns read whole and typed as a CSV's would be, its side
columns streamed in row batches as text (see :func:`sphr.data.reader.read_columns`)."""

from __future__ import annotations

import pyarrow as pa

from sphr.data.export_layout import BatchHook, ExportLayout, field_label
from sphr.errors import InputError

_PARQUET_BATCH_ROWS = 65_536


def stream_parquet_side(layout: ExportLayout, names: list[str], hook: BatchHook) -> None:
    """Side columns of a parquet export, in row batches, as text (see :func:`read_columns`)."""
    import pyarrow.parquet as pq

    first = 1
    for batch in pq.ParquetFile(layout.path).iter_batches(batch_size=_PARQUET_BATCH_ROWS,
                                                          columns=names):
        cols = [as_text(batch.column(i)) for i in range(batch.num_columns)]
        hook(pa.table(cols, names=names), first)
        first += batch.num_rows


def as_text(col: pa.Array) -> pa.Array:
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
        items = as_text(pa.array([v for row in col.to_pylist() for v in (row or [])],
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


def read_parquet(layout: ExportLayout, names: list[str], types: dict[str, pa.DataType]
                 ) -> pa.Table:
    """The columns ``names`` with the types a CSV export's would have (``types``)."""
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
                text = as_text(col.combine_chunks())
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
                      field=field_label(name), row=row)
