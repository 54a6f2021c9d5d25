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
    #: the settings table the command's ``--set KEY=VALUE`` items belong to (None: no --set)
    stage: str | None = None
    #: other tables the command's ``--set`` may name (the loss comparison's ``train``)
    also: tuple[str, ...] = ()

    def values(self, args: argparse.Namespace) -> dict[str, Any]:
        """The fields the parsed options set (an option left at None sets nothing: the
        profile's or the dataclass's value stays), then the ``--set`` items of the command's
        own table, each checked as the settings file's key would be."""
        out = {}
        for a in self.added:
            value = getattr(args, a.dest)
            if value is not None:
                out[a.field] = a.read(value) if a.read is not None else value
        if self.stage is not None:
            out.update(self.overrides(args, self.stage, self.cls))
        return out

    def overrides(self, args: argparse.Namespace, stage: str, cls: type) -> dict[str, Any]:
        """The ``--set`` items naming ``stage``, as fields of ``cls`` checked by the settings
        file's check (:func:`sphr.values.check_table`): an unknown key or a value of the
        wrong type is a ConfigError naming the item. An item of a table the command does not
        set is refused too, so no override is dropped unread."""
        from sphr.errors import ConfigError, check_keys
        from sphr.values import check_value, field_types

        items = list(getattr(args, "overrides", None) or ())
        foreign = sorted({o.stage for o in items} - {self.stage, *self.also})
        if foreign:
            raise ConfigError(f"--set {foreign[0]}.*: this command sets "
                              + " and ".join(f"[{t}]" for t in (self.stage, *self.also)))
        table = override_tables([o for o in items if o.stage == stage]).get(stage, {})
        types_ = field_types(cls)
        check_keys(table, types_, f"--set {stage}.KEY")
        return {k: check_value(v, types_[k], f"--set {stage}.{k}") for k, v in table.items()}

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
                 skip: Sequence[str] = (), options: Mapping[str, Option] | None = None,
                 stage: str | None = None, also: Sequence[str] = ()) -> SettingOptions:
    """One option per field of dataclass ``cls`` (less ``skip``), its help the field's ``#:``
    doc. ``defaults``: an instance whose values the options default to (a list for a tuple);
    None: every option defaults to None, so only what is given changes the profile's
    config (a flag then defaults to None too). ``options``: where an option differs.
    ``stage``: the settings table ``cls`` is; the command then takes the project's one
    override syntax, ``--set STAGE.KEY=VALUE`` (:func:`parse_override`), for its fields and
    for the tables in ``also``."""
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
    if stage is not None:
        tables = ", ".join(f"[{t}]" for t in (stage, *also))
        add_set_option(parser, f"set any key of {tables} as the settings file would "
                       f"(KEY=VALUE for [{stage}]; a value reads as in TOML, null for unset); "
                       "after the options above", stage)
    return SettingOptions(cls, tuple(added), stage, tuple(also))


#: what ``null`` / ``none`` in an override means: the setting's "unset" (TOML has no null)
NULL_WORDS = frozenset({"null", "none"})


def parse_value(text: str) -> Any:
    """A command-line value, the project's one reading of one: true / false (also yes / no,
    on / off), null / none for unset, else a TOML value where it reads as one (``200``,
    ``0.5``, ``[[40, 50], [51, 73]]``, ``{high = 6.0}``, ``"a b"``, ``2023-03-31``), else the
    text itself (``severity``), so a settings file's value and an override's read alike."""
    low = text.strip().lower()
    if low in {"true", "yes", "on"}:
        return True
    if low in {"false", "no", "off"}:
        return False
    if low in NULL_WORDS:
        return None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: JSON reads the numbers, lists and strings
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return text.strip()
    try:
        return tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


@dataclass(frozen=True)
class Override:
    """One ``--set STAGE.KEY=VALUE`` item: the stage's table, the key's path within it (a
    nested key such as ``cohorts.ranges.glucose.high`` has several parts) and the value."""

    stage: str
    path: tuple[str, ...]
    value: Any

    @property
    def key(self) -> str:
        return self.path[0]

    def as_table(self) -> dict[str, Any]:
        """The override as the settings file's table would hold it: ``{key: {sub: value}}``."""
        value: Any = self.value
        for part in reversed(self.path[1:]):
            value = {part: value}
        return {self.path[0]: value}


#: the metavar every command shows for its ``--set``
OVERRIDE_METAVAR = "STAGE.KEY=VALUE"


def add_set_option(parser: argparse.ArgumentParser, help: str, stage: str | None = None
                   ) -> None:
    """The one ``--set STAGE.KEY=VALUE`` option (repeatable; ``stage``: the table a bare
    ``KEY=VALUE`` belongs to), collected in ``args.overrides``."""
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar=OVERRIDE_METAVAR, type=lambda text: parse_override(text, stage),
                        help=help)


def add_set_alias(parser: argparse.ArgumentParser, flag: str, stage: str, help: str) -> None:
    """An older option kept as a spelling of ``--set STAGE.KEY=VALUE`` (after ``--set``, into
    the same ``args.overrides``), so recorded commands still run."""
    parser.add_argument(flag, dest="overrides", action="append", metavar="KEY=VALUE",
                        type=lambda text: parse_override(f"{stage}.{text}"), help=help)


def parse_override(text: str, stage: str | None = None) -> Override:
    """``STAGE.KEY=VALUE`` (or a bare ``KEY=VALUE`` for the command's own ``stage``) as an
    :class:`Override`, its value read by :func:`parse_value`. The argparse ``type`` of every
    ``--set``: a malformed item is refused when the arguments are read, naming it."""
    name, eq, raw = text.partition("=")
    parts = tuple(p.strip() for p in name.split("."))
    if not eq or not all(parts):
        raise argparse.ArgumentTypeError(f"expected {OVERRIDE_METAVAR}, got {text!r}")
    if stage is not None and len(parts) == 1:  # a nested key always names its table
        parts = (stage, *parts)
    if len(parts) < 2:
        raise argparse.ArgumentTypeError(
            f"{text!r} names no stage: write {OVERRIDE_METAVAR} (e.g. train.epochs=200)")
    return Override(parts[0], parts[1:], parse_value(raw))


def override_tables(overrides: Sequence[Override],
                    base: Mapping[str, Mapping[str, Any]] | None = None
                    ) -> dict[str, dict[str, Any]]:
    """Overrides as a settings file's tables, over ``base`` (a file's tables, not changed)
    and later items winning; a nested key changes the keys it names and keeps the others."""
    tables: dict[str, dict[str, Any]] = json_copy(base or {})
    for o in overrides:
        _deep_set(tables.setdefault(o.stage, {}), o.as_table())
    return tables


def json_copy(tables: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of nested tables (dicts copied, other values shared)."""
    return {k: json_copy(v) if isinstance(v, Mapping) else v for k, v in tables.items()}


def _deep_set(into: dict[str, Any], table: Mapping[str, Any]) -> None:
    for key, value in table.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_set(into[key], value)
        else:
            into[key] = value
