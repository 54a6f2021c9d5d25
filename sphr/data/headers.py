"""UK Biobank column names in the three header styles, parsed and written.

- legacy (ukbconv CSV and TSV): ``21003-0.0`` = field-instance.array, id column ``eid``
- R ``.tab``: ``f.21003.0.0``, id column ``f.eid``
- RAP: ``p21003_i0_a1``; ``_i``/``_a`` are omitted when the field has a single
  instance/array (``p31``, ``p53_i0``); ``dx extract_dataset`` adds a
  ``participant.`` prefix (``participant.eid``).

The RAP keeps some array fields (41270, 6177, 6153) as one column per instance whose cell
holds the whole array: ``[1, 2]``, ``['E119', 'I10']`` or ``1|2``
(:func:`is_list_cell`, :func:`split_list_cells`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # the CLI parser imports this module; polars loads on use
    import polars as pl

Style = Literal["legacy", "tab", "rap"]

_LEGACY = re.compile(r"^(\d+)-(\d+)\.(\d+)$")
_TAB = re.compile(r"^f\.(\d+)\.(\d+)\.(\d+)$")
_RAP = re.compile(r"^p(\d+)(?:_i(\d+))?(?:_a(\d+))?$")
_EID = {"legacy": "eid", "tab": "f.eid", "rap": "eid"}


@dataclass(frozen=True, order=True)
class ColumnKey:
    """One export column: a field at one instance and array index."""

    field: int
    instance: int = 0
    array: int = 0


def parse_column(name: str) -> tuple[Style, ColumnKey] | tuple[Style, None] | None:
    """The style and key of a column name; key None for the id column; None if unknown."""
    bare = name.removeprefix("participant.")
    prefixed = bare != name
    if bare == "eid":
        return ("rap" if prefixed else "legacy", None)
    if bare == "f.eid":
        return ("tab", None)
    if not prefixed and (m := _LEGACY.match(bare)):
        return ("legacy", ColumnKey(int(m[1]), int(m[2]), int(m[3])))
    if not prefixed and (m := _TAB.match(bare)):
        return ("tab", ColumnKey(int(m[1]), int(m[2]), int(m[3])))
    if m := _RAP.match(bare):
        return ("rap", ColumnKey(int(m[1]), int(m[2] or 0), int(m[3] or 0)))
    return None


def format_column(key: ColumnKey, style: Style, *, single_instance: bool = False,
                  single_array: bool = False, prefix: str = "") -> str:
    """The column name of ``key`` in ``style`` (RAP omits suffixes of single-valued axes)."""
    if style == "legacy":
        return f"{key.field}-{key.instance}.{key.array}"
    if style == "tab":
        return f"f.{key.field}.{key.instance}.{key.array}"
    name = f"p{key.field}"
    if not single_instance:
        name += f"_i{key.instance}"
    if not single_array:
        name += f"_a{key.array}"
    return prefix + name


def eid_column(style: Style, prefix: str = "") -> str:
    return prefix + _EID[style]


class ListCellError(ValueError):
    """A cell that looks like a list (``[...``) but is not one; ``index`` is its position in
    the series, for the caller to turn into a data row."""

    def __init__(self, index: int, text: str) -> None:
        super().__init__(f"{text[:60]!r} is not a list of values")
        self.index, self.text = index, text


def is_list_cell(text: pl.Expr) -> pl.Expr:
    """Whether a text cell holds a whole array: ``[...]`` (``dx extract_dataset``, JSON or a
    Python list) or ``a|b`` (the form the reader gives a parquet list column)."""
    return text.str.contains(r"^\s*\[|\|")


def split_list_cells(text: pl.Series) -> pl.Series:
    """Each cell's values, as a list of text stripped of spaces and quotes; a cell that is not
    a list is a one-value list, null stays null, ``[]`` is empty, and an empty slot (``a||b``,
    ``[1, null]``) stays in place as null or ``""``, so positions are array indices.

    Raises :class:`ListCellError` for the first ``[...`` cell that is not a list.
    """
    import polars as pl

    frame = text.str.strip_chars().to_frame("text")
    is_json = pl.col("text").str.starts_with("[")
    # JSON-ish lists from dx extract_dataset; single quotes when a tool wrote Python reprs
    as_json = (pl.when(pl.col("text").str.contains('"', literal=True)).then(pl.col("text"))
               .otherwise(pl.col("text").str.replace_all("'", '"', literal=True)))
    try:
        decoded = frame.select(pl.when(is_json).then(as_json).str.json_decode(
            pl.List(pl.String)).alias("json"), pl.when(~is_json).then(
            pl.col("text").str.split("|")).alias("piped"))
    except pl.exceptions.ComputeError:
        # polars does not say which cell: find it for the message (error path only)
        for i, cell in enumerate(frame["text"].to_list()):
            if cell is None or not cell.startswith("["):
                continue
            try:
                value = json.loads(cell if '"' in cell else cell.replace("'", '"'))
                if not isinstance(value, list) or any(isinstance(v, list | dict) for v in value):
                    raise ValueError
            except ValueError:
                raise ListCellError(i, cell) from None
        raise
    return decoded.select(pl.coalesce("json", "piped").list.eval(
        pl.element().str.strip_chars().str.strip_chars("\"'")).alias(text.name)).to_series()
