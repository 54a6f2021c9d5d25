"""Errors a user sees: each names the file, the field and the row it is about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

#: the exit codes of every command (the sphr commands and the main command alike): bad input
#: or settings, and anything else
EXIT_BAD_INPUT, EXIT_INTERNAL = 2, 1


class SphrError(Exception):
    """Base class of every error this library raises on purpose."""


class InputError(SphrError):
    """Bad input data: one clear message naming where the problem is.

    ``row`` is the 1-based data row (the header is row 0), as a person counts
    rows in a spreadsheet without its header.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        field: str | None = None,
        row: int | None = None,
    ) -> None:
        self.message = message
        self.file = None if file is None else str(file)
        self.field = field
        self.row = row
        super().__init__(str(self))

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(self.file)
        if self.field is not None:
            where.append(f"field {self.field}")
        if self.row is not None:
            where.append(f"row {self.row}")
        return f"{': '.join([', '.join(where), self.message]) if where else self.message}"


class ConfigError(SphrError):
    """A setting that cannot work (unknown option, impossible bound)."""


def check_keys(given: Iterable[str], known: Iterable[str], where: str,
               why_not: Mapping[str, str] | None = None) -> None:
    """A :class:`ConfigError` naming the first key of ``given`` that is not in ``known``, and
    the known ones: a setting is never dropped unread (the one check of every settings table
    and saved config). ``why_not``: key -> why it is no key here ("was removed: ...", "is set
    for the whole run ..."), said in place of "no key"."""
    known = list(known)
    for key in given:
        if key not in known:
            why = f"{key} {why_not[key]}" if why_not and key in why_not else f"no key {key!r}"
            raise ConfigError(f"{where}: {why}; valid keys: {', '.join(known)}")
