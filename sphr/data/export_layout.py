"""What an export's header says (:func:`inspect_export`): its form (CSV, TSV or parquet), its
column naming style (ukbconv, R .tab, RAP) and where each catalog field's columns are; and the
type each field's column is read as."""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from sphr.data.fields import BY_ID, Field
from sphr.data.headers import ColumnKey, Style, parse_column
from sphr.errors import InputError

_ID_NAMES = {"eid", "f.eid", "participant.eid"}
#: the text of an empty cell in a CSV or TSV export
NULLS = ["", "NA"]

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
        return sorted(k.array for k in self.columns
                      if k.field == field_id and k.instance == instance)

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
        raise InputError(f"header mixes column naming styles ({examples}); export with one "
                         "style", file=path, row=0)
    if eid_col is None:
        raise InputError("no participant id column (eid, f.eid or participant.eid) in the "
                         "header", file=path, field="eid", row=0)
    style = next(iter(styles))
    return ExportLayout(path, fmt, style, delimiter, header, eid_col, columns, ignored)


def arrow_type(f: Field) -> pa.DataType:
    # Coded fields arrive as numbers or as text labels ("Yes", "Do not know"): read as text.
    if f.value_type in ("date", "text"):
        return pa.string()
    if f.coding is not None or f.special_codes:
        return pa.string()
    return pa.float64()


def field_label(name: str) -> str:
    """A column as errors name it: ``30690-0.0 (cholesterol)``, or the bare name."""
    parsed = parse_column(name)
    key = parsed[1] if parsed else None
    if key is not None and key.field in BY_ID:
        return f"{name} ({BY_ID[key.field].name})"
    return name
