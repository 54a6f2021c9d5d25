"""A stage's settings as command-line options, generated from its settings dataclass.

The same source as the Dagster configs (``sphr_dagster.config``): the dataclass's fields,
their types and defaults, and the ``#:`` comment above each field (:func:`field_docs`), which
is an option's help as it is a launchpad field's description. A setting is written once, as
a field; :func:`add_settings` gives it an option ``--field-name`` typed from its annotation,
and :meth:`SettingOptions.values` reads the parsed options back as the dataclass's fields.
Where an option's name, destination or reading predates the generation, an :class:`Option`
says so; options that are not settings stay hand-written beside the generated ones.

Shared (imports no stage): a command module passes its own dataclass.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: ``Option.default`` when the option's default is generated
GENERATED: Any = object()
#: what turns an ``SPHR_*`` switch off (any case)
SWITCH_OFF = frozenset({"0", "false", "no"})


def env_switch(name: str) -> bool:
    """Whether the environment switch ``name`` (``SPHR_PROGRESS``, ``SPHR_PDF``) is on: unset,
    or anything but 0 / false / no."""
    return os.environ.get(name, "1").lower() not in SWITCH_OFF


def field_docs(cls: type) -> dict[str, str]:
    """The ``#:`` comment above each field of a dataclass (the Dagster launchpad and the
    command line's help show them); a subclass's fields and those it inherits."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    import inspect

    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    docs: dict[str, str] = {}
    comment: list[str] = []
    for line in lines:
        text = line.strip()
        if text.startswith("#:"):
            comment.append(text[2:].strip())
            continue
        name = text.partition(":")[0]
        if comment and name.isidentifier():
            docs[name] = " ".join(comment)
        comment = []
    return docs


@dataclass(frozen=True)
class Option:
    """How one field's option differs from the generated ``--field-name``."""

    #: the option's name (e.g. ``--bfh-fold``); None: ``--`` and the field's name with dashes
    flag: str | None = None
    #: argparse keywords that replace the generated ones (``type``, ``choices``, ``action``,
    #: ``metavar``, ``dest``, ``default``)
    kwargs: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: the parsed value -> the field's value (None: as parsed, lists as the field's tuples)
    read: Callable[[Any], Any] | None = None
    #: what the option sets when it is not the whole field, after the field's doc
    note: str = ""
    #: what a default of None means, for the help
    unset: str = "the profile's"


@dataclass(frozen=True)
class _Added:
    field: str
    dest: str
    read: Callable[[Any], Any] | None


@dataclass(frozen=True)
class SettingOptions:
    """The options :func:`add_settings` added, to read the parsed values back."""

    cls: type
    added: tuple[_Added, ...]

    def values(self, args: argparse.Namespace) -> dict[str, Any]:
        """The fields the parsed options set (an option left at None sets nothing: the
        profile's or the dataclass's value stays)."""
        out = {}
        for a in self.added:
            value = getattr(args, a.dest)
            if value is not None:
                out[a.field] = a.read(value) if a.read is not None else value
        return out

    def dest(self, name: str) -> str:
        """The argparse destination of field ``name``'s option."""
        return next(a.dest for a in self.added if a.field == name)


def csv_list(value: str) -> list[str]:
    """``a,b,c`` -> ["a", "b", "c"] (blanks dropped)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def _plain_type(tp: Any) -> Any:
    """``X | None`` -> X."""
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return inner[0] if len(inner) == 1 else Any
    return tp


def _generated(tp: Any) -> tuple[dict[str, Any], Callable[[Any], Any] | None]:
    """argparse keywords for a field of type ``tp``, and how to read the parsed value back."""
    tp = _plain_type(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is bool:  # --x and --no-x: a setting on by default can be turned off
        return {"action": argparse.BooleanOptionalAction}, None
    if tp in (int, float, str):
        return {"type": tp}, None
    if origin in (tuple, list) and args and args[0] is str and (len(args) == 1
                                                                 or args[1] is Ellipsis):
        return {"type": csv_list, "metavar": "A,B,..."}, tuple if origin is tuple else None
    # tables, nested settings, lists of lists: a JSON value
    return {"type": json.loads, "metavar": "JSON"}, None


def plain_doc(doc: str) -> str:
    """A field doc as plain text: ``:mod:`x``` and ````x```` as x."""
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", doc).replace("``", "")


def _help(doc: str, spec: Option, kwargs: Mapping[str, Any]) -> str:
    text = plain_doc(doc + (f" ({spec.note})" if spec.note else "")).replace("%", "%%")
    default = kwargs["default"]
    if kwargs.get("action") in ("store_true", "store_false"):
        return text
    if default is None:
        return f"{text} (default: {spec.unset})"
    if isinstance(default, list) and kwargs.get("type") is csv_list:
        return f"{text} (default: {','.join(map(str, default))})"
    return text + " (default: %(default)s)"


def add_settings(parser: argparse.ArgumentParser, cls: type, *, defaults: Any = None,
                 skip: Sequence[str] = (), options: Mapping[str, Option] | None = None
                 ) -> SettingOptions:
    """One option per field of dataclass ``cls`` (less ``skip``), its help the field's ``#:``
    doc. ``defaults``: an instance whose values the options default to (a list for a tuple);
    None: every option defaults to None, so only what is given changes the profile's
    config (a flag then defaults to None too). ``options``: where an option differs."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    added = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        spec = (options or {}).get(f.name, Option())
        kwargs, read = _generated(hints[f.name])
        value = getattr(defaults, f.name) if defaults is not None else None
        kwargs["default"] = list(value) if isinstance(value, tuple) else value
        kwargs.update(spec.kwargs)
        flag = spec.flag or "--" + f.name.replace("_", "-")
        doc = docs.get(f.name)
        if not doc:
            raise TypeError(f"{cls.__name__}.{f.name} has no #: doc to be its option's help")
        kwargs["help"] = _help(doc, spec, kwargs)
        action = parser.add_argument(flag, **kwargs)
        added.append(_Added(f.name, action.dest, spec.read if spec.read is not None else read))
    return SettingOptions(cls, tuple(added))


def parse_value(text: str) -> Any:
    """A command-line option value: true / false, int, float, else the string."""
    low = text.strip().lower()
    if low in {"true", "yes", "on"}:
        return True
    if low in {"false", "no", "off"}:
        return False
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()
