"""Checking a settings value against its dataclass field's type, and plain (JSON-ready) data: the
one check of a settings file's table (:mod:`sphr.settings`), a Dagster config and every command's
``--set`` override (:mod:`sphr.options`). Shared: it imports no stage.

A value of the wrong type is a :class:`~sphr.errors.ConfigError` naming where it came from
(the file, the table and the key) and the type it must have.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
import typing
from collections.abc import Mapping
from typing import Any

from sphr.errors import ConfigError, check_keys


def field_types(cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """Each field of dataclass ``cls`` (less ``skip``) with its type."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in skip}


def _plural(name: str) -> str:
    """"integer" -> "integers", "a list of integers" -> "lists of integers"; a choice of
    types ("string or a table of strings") reads as "values each string or ..."."""
    if " or " in name:
        return f"values each {name}"
    for one, many in (("a list", "lists"), ("a table", "tables"), ("any value", "any values"),
                      ("boolean", "booleans")):
        if name.startswith(one):
            return many + name[len(one):]
    return f"{name}s"


def type_name(tp: Any) -> str:
    """``tuple[str, ...]`` -> "a list of strings", for the error messages."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not type(None))
    if origin in (tuple, list):
        return f"a list of {_plural(type_name(args[0]))}" if args else "a list"
    if origin is dict or tp is dict:
        return f"a table of {_plural(type_name(args[1]))}" if args else "a table"
    if dataclasses.is_dataclass(tp):
        return f"a table ({tp.__name__})"
    names = {bool: "boolean (true / false)", int: "integer", float: "number", str: "string"}
    return names.get(tp, "any value") if tp is not Any else "any value"


def check_value(value: Any, tp: Any, where: str) -> Any:
    """``value`` as type ``tp`` (lists become tuples where the dataclass wants tuples), or a
    ConfigError naming ``where`` and the expected type."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    bad = ConfigError(f"{where} must be {type_name(tp)}, got {value!r}")
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return check_value(value, arg, where)
            except ConfigError:
                continue
        raise bad
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise bad
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise bad
            return tuple(check_value(v, a, f"{where}[{i}]")
                         for i, (v, a) in enumerate(zip(value, args, strict=True)))
        item = args[0] if args else Any
        items = [check_value(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise bad
        item = args[1] if args else Any
        return {k: check_value(v, item, f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        if dataclasses.is_dataclass(value):
            return value
        if not isinstance(value, dict):
            raise bad
        return tp(**check_table(value, field_types(tp), where))
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is str and isinstance(value, dt.date):  # a TOML date where a date string is kept
        return value.isoformat()
    if tp is int and isinstance(value, bool):
        raise bad
    if isinstance(tp, type) and not isinstance(value, tp):
        raise bad
    return value


def check_table(table: Mapping[str, Any], types_: Mapping[str, Any], where: str,
                why_not: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Every key of ``table`` checked against ``types_``; an unknown key names the valid ones
    (:func:`sphr.errors.check_keys`; ``why_not``: why a key is not one here)."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table, got {table!r}")
    check_keys(table, types_, where, why_not)
    return {key: check_value(value, types_[key], f"{where} {key}") for key, value in table.items()}


def plain(value: Any) -> Any:
    """JSON-ready: tuples as lists, dataclasses as dicts, dates as ISO strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


