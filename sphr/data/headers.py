"""UK Biobank column names in the three header styles, parsed and written.

- legacy (ukbconv CSV and TSV): ``21003-0.0`` = field-instance.array, id column ``eid``
- R ``.tab``: ``f.21003.0.0``, id column ``f.eid``
- RAP: ``p21003_i0_a1``; ``_i``/``_a`` are omitted when the field has a single
  instance/array (``p31``, ``p53_i0``); ``dx extract_dataset`` adds a
  ``participant.`` prefix (``participant.eid``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

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
