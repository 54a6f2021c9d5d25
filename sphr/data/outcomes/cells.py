"""Linked-record cells as long tables: one row per value, lists split, codes and dates parsed.

Every source's reader (:mod:`sphr.data.outcomes.sources`) goes through :class:`LinkedCells`,
so a bad value stops the ingest with the same error naming the file, the column and the row
whichever source it is in.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from sphr.data.fields import Field
from sphr.data.headers import ListCellError, is_list_cell, split_list_cells
from sphr.data.outcomes.definitions import PATTERN, SPECIAL_DATES
from sphr.errors import InputError

if TYPE_CHECKING:  # polars loads on use
    import polars as pl

    from sphr.data.export_layout import ExportLayout


class LinkedCells:
    """Parses one block's linked cells; counts UK Biobank's placeholder dates as it goes
    (:attr:`special_dates`, for the ingest report)."""

    def __init__(self, layout: ExportLayout) -> None:
        self.layout = layout
        #: "field (name)" -> placeholder date -> how many cells held it
        self.special_dates: dict[str, Counter[str]] = {}

    def error(self, message: str, col: str, f: Field, row: int) -> InputError:
        return InputError(message, file=self.layout.path, field=f"{col} ({f.name})", row=row)

    def long(self, df: pl.DataFrame, cols: dict[str, int], f: Field, first_row: int, *,
              aligned: bool) -> pl.DataFrame:
        """(row, pos, col, text): one row per non-empty value.

        A cell may hold several values (RAP puts a whole array in one column: ``E119|I10`` or
        ``["E119","I10"]``). ``aligned`` fields (41270/41280) pair codes and dates by array
        index, so a list must be the field's only column and its positions are the indices; an
        empty slot in a list keeps its position. Otherwise ``pos`` is the column's instance.
        """
        import polars as pl

        schema = {"row": pl.UInt32, "pos": pl.Int32, "col": pl.String, "text": pl.String}
        if not cols:
            return pl.DataFrame(schema=schema)
        long = (df.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"), *cols)
                .unpivot(index="row", variable_name="col", value_name="text")
                .with_columns(pl.col("text").str.strip_chars())
                .filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
                .with_columns(pos=pl.col("col").replace_strict(cols, return_dtype=pl.Int32)))
        is_list = is_list_cell(pl.col("text"))
        lists = long.filter(is_list)
        if lists.is_empty():
            return long.select(list(schema))
        lists = lists.sort("row")
        if aligned and len(cols) > 1:
            bad = lists.row(0, named=True)
            raise self.error(
                f"{bad['text'][:60]!r} holds several values in one array column; expected one "
                f"value per column ({f.id}-0.0, {f.id}-0.1, ...) or the whole array in a single "
                f"column (p{f.id})", bad["col"], f, first_row + bad["row"])
        items = self._split_lists(lists, f, first_row)
        items = (items.with_columns(idx=pl.int_ranges(0, pl.col("items").list.len(),
                                                      dtype=pl.Int32))
                 .explode(["items", "idx"])
                 .with_columns(text=pl.col("items").str.strip_chars().str.strip_chars("\"'")))
        if aligned:
            items = items.with_columns(pos=pl.col("pos") + pl.col("idx"))
        items = items.filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
        return pl.concat([long.filter(~is_list).select(list(schema)),
                          items.select(list(schema))])

    def _split_lists(self, lists: pl.DataFrame, f: Field, first_row: int) -> pl.DataFrame:
        try:
            return lists.with_columns(items=split_list_cells(lists["text"]))
        except ListCellError as exc:
            r = lists.row(exc.index, named=True)
            raise self.error(str(exc), r["col"], f, first_row + r["row"]) from None

    def codes(self, long: pl.DataFrame, f: Field, first_row: int,
               coding: str = "icd10") -> pl.DataFrame:
        """Add ``code``: the ICD-10 (or ICD-9) code (text before the first space, no dot, upper
        case)."""
        import polars as pl

        pattern, expected = PATTERN[coding]
        long = long.with_columns(code=pl.col("text").str.split(" ").list.first()
                                 .str.replace_all(".", "", literal=True).str.to_uppercase())
        bad = long.filter(~pl.col("code").str.contains(pattern))
        if not bad.is_empty():
            r = bad.sort("row").row(0, named=True)
            raise self.error(f"{r['text'][:60]!r} is not {expected}", r["col"], f,
                              first_row + r["row"])
        return long

    def dates(self, long: pl.DataFrame, f: Field, first_row: int) -> pl.DataFrame:
        """Add ``date`` (null for UKB's placeholder dates, which are counted)."""
        import polars as pl

        long = long.with_columns(date=pl.col("text").str.slice(0, 10)
                                 .str.to_date("%Y-%m-%d", strict=False))
        bad = long.filter(pl.col("date").is_null())
        if not bad.is_empty():
            r = bad.sort("row").row(0, named=True)
            raise self.error(f"{r['text']!r} is not a date (YYYY-MM-DD)", r["col"], f,
                              first_row + r["row"])
        special = pl.col("date").is_in(list(SPECIAL_DATES))
        hits = long.filter(special)
        if not hits.is_empty():
            tally = self.special_dates.setdefault(f"{f.id} ({f.name})", Counter())
            for value, n in hits["date"].value_counts().iter_rows():
                tally[value.isoformat()] += n
            long = long.with_columns(date=pl.when(~special).then(pl.col("date")))
        return long
