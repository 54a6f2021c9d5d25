"""The assets' run configuration, generated from the library's dataclasses.

Each asset's ``dg.Config`` has one field per key of its stage's settings table
(:func:`sphr.settings.stage_types`: the stage dataclass's fields, less the ones the run
sets, such as the device), with the default profile's value as its default and the field's
``#:`` comment as its description, so the launchpad shows every setting and the value a
plain launch gets. A field added to a library dataclass shows up here with no edit.
``python -m sphr_dagster config FILE`` prints the run config of a settings file.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
import pydantic

from sphr import settings as lib
from sphr.profiles import DEFAULT_PROFILE

#: the run tag naming the profile a run's settings came from (reports show it)
PROFILE_TAG = "sphr/profile"


def _dagster_type(tp: Any) -> Any:
    """The config type Dagster can show for a dataclass field's type: lists for tuples,
    nested Config classes for nested dataclasses, ``Any`` where it has none."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [_dagster_type(a) for a in args if a is not type(None)]
        if len(inner) != 1:
            return Any
        return inner[0] | None if type(None) in args else inner[0]
    if origin in (tuple, list):
        items = {_dagster_type(a) for a in args if a is not Ellipsis} or {Any}
        return list[items.pop()] if len(items) == 1 else list[Any]
    if origin is dict or tp is dict:
        return dict[str, _dagster_type(args[1]) if args else Any]
    if dataclasses.is_dataclass(tp):
        return _nested(tp)
    return tp if tp in (bool, int, float, str) else Any


@functools.cache
def _nested(cls: type) -> type[dg.Config]:
    hints = typing.get_type_hints(cls)
    defaults = cls()
    return _model(cls.__name__ + "Settings", cls.__doc__ or "",
                  {f.name: hints[f.name] for f in dataclasses.fields(cls)},
                  {f.name: getattr(defaults, f.name) for f in dataclasses.fields(cls)},
                  lib.field_docs(cls))


def _default(value: Any, annotation: Any) -> Any:
    """A dataclass value as the Config field's default (tuples as lists, nested models)."""
    if dataclasses.is_dataclass(value) and isinstance(annotation, type) \
            and issubclass(annotation, dg.Config):
        return annotation(**{k: _default(v, annotation.model_fields[k].annotation)
                             for k, v in dataclasses.asdict(value).items()})
    return lib.plain(value)


def _model(name: str, doc: str, types_: Mapping[str, Any], defaults: Mapping[str, Any],
           docs: Mapping[str, str], module: str = __name__) -> type[dg.Config]:
    fields = {}
    for key, tp in types_.items():
        annotation = _dagster_type(tp)
        fields[key] = (annotation, pydantic.Field(default=_default(defaults[key], annotation),
                                                  description=docs.get(key)))
    return pydantic.create_model(name, __base__=dg.Config, __doc__=doc, __module__=module,
                                 **fields)


#: each generated Config class -> its ``extra`` fields: the asset's own, not its stage's keys
_ASSET_FIELDS: dict[type, tuple[str, ...]] = {}


def stage_config(stage: str, name: str, doc: str, *, drop: Sequence[str] = (),
                 extra: Mapping[str, tuple[Any, Any, str]] | None = None,
                 module: str = __name__) -> type[dg.Config]:
    """A ``dg.Config`` with a field per key of ``[stage]`` (less ``drop``) and ``extra``
    fields (name -> (type, default, description)); defaults: the default profile's."""
    types_ = {k: v for k, v in lib.stage_types(stage).items() if k not in drop}
    defaults = lib.stage_defaults(stage, DEFAULT_PROFILE)
    docs = lib.stage_docs(stage)
    for key, (tp, default, description) in (extra or {}).items():
        types_[key], defaults[key], docs[key] = tp, default, description
    config = _model(name, doc, types_, defaults, docs, module)
    _ASSET_FIELDS[config] = tuple(extra or ())
    return config


def stage_values(config: dg.Config) -> dict[str, Any]:
    """A Config's values as plain data (nested Configs as dicts), for the library."""
    return config.model_dump()


def from_settings(cls: type[dg.Config], values: Mapping[str, Any], **extra: Any) -> dg.Config:
    """``cls`` with every field set from a stage's resolved settings (and ``extra``)."""
    given = {**{k: v for k, v in values.items() if k in cls.model_fields}, **extra}
    return cls(**{k: _default(v, cls.model_fields[k].annotation) for k, v in given.items()})


def library_config(stage: str, config: dg.Config, **runtime: Any) -> Any:
    """The stage's library dataclass from an asset's Config and the run's fields
    (``device=``, ``sexes=``): the library checks the values as it checks a file's. The
    Config's own fields (``stage_config``'s ``extra``) are the asset's to read, not the
    library's; every other key goes to the library, which refuses one it does not know."""
    own = _ASSET_FIELDS.get(type(config), ())
    return lib.library_config(stage, {k: v for k, v in stage_values(config).items()
                                      if k not in own}, **runtime)
