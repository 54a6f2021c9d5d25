"""A whole run's settings: one TOML file, one table per stage, checked against the stages' dataclasses.

``python -m sphr_dagster run --config run.toml`` reads it; the Dagster side only turns the
checked settings into run config (``python -m sphr_dagster config run.toml`` prints that as
launchpad YAML). A table per stage, whose keys are the fields of the stage's own
dataclass (the one source of every default), and ``[run]`` for the command's own options::

    [run]
    export = "/data/ukb672345.csv"      # relative paths: from this file's folder
    profile = "paper"                   # default: paper with an export, demo without
    losses = false                      # the 7-loss comparison (default: on only without an export)

    [ingest.censoring]                  # your release's censoring dates (docs/OUTCOMES.md)
    hospital = 2023-03-31

    [cohorts]
    seed = 3
    [cohorts.ranges.glucose]            # P0 clinical range overrides (docs/METHODS.md)
    high = 6.0

    [train]
    epochs = 200

An unknown table or key, or a value of the wrong type, is a :class:`~sphr.errors.ConfigError`
naming the file and the key. Precedence, lowest first: the dataclass's defaults, the
profile's (``CohortConfig.profile``, ``TrainConfig.profile``), the file, the command line.

Outside the stage order (like ``sphr.cli``): it reads every stage's config class, and
imports them only when asked, so a command's parser stays light.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sphr.errors import ConfigError
from sphr.layout import DEFAULT_RUN_DIR
from sphr.profiles import DEFAULT_PROFILE, PROFILES
from sphr.train.config import COMPARISON_LOSSES

#: a run on a real export takes the paper's settings unless asked otherwise: the demo
#: profile's 8-epoch model is sized for the synthetic demo, not for a result
EXPORT_PROFILE = "paper"
#: where ``python -m sphr_dagster run`` records what it ran (:func:`write_run_settings`)
RUN_SETTINGS_FILE = "run_settings.json"


def _default_censoring() -> dict[str, str]:
    from sphr.data.outcomes import CENSORING

    return {source: c.date.isoformat() for source, c in CENSORING.items()}


@dataclass(frozen=True)
class IngestSettings:
    """The ingest step's settings: what ``sphr ingest --outcomes`` and
    ``--drop-truncated-last-row`` set (the outcome table itself: :mod:`sphr.data.outcomes`)."""

    #: changes to the outcome table by outcome name, e.g. {"copd": {"codes": ["J44"],
    #: "sources": ["hospital", "death"]}} (docs/OUTCOMES.md); null removes one (JSON only)
    outcomes: dict[str, Any] = field(default_factory=dict)
    #: the date up to which each source's records are complete, one date or one per country
    #: ({"england": ..., "scotland": ..., "wales": ...}); shown here: England's dates of UK
    #: Biobank's 2023 refresh (Scotland's and Wales's defaults apply unless set): set your
    #: release's (docs/OUTCOMES.md)
    censoring: dict[str, str | dict[str, str]] = field(default_factory=_default_censoring)
    #: First Occurrence fields beyond the built-in ones, by 3-character ICD-10 code: the id of
    #: "Date <code> first reported" (docs/OUTCOMES.md), e.g. {"J44": 131492}
    first_occurrence_fields: dict[str, int] = field(default_factory=dict)
    #: go on (with a warning) when the export's last line is cut off
    drop_truncated_last_row: bool = False

    def outcome_config(self) -> Any:
        """The :class:`~sphr.data.outcomes.OutcomeConfig` these settings ask for."""
        from sphr.data.outcomes import CENSORING, OutcomeConfig

        # only the dates that differ: an unchanged source keeps its provider and reference
        changed = {s: d for s, d in self.censoring.items()
                   if s not in CENSORING or CENSORING[s].date.isoformat() != d}
        return OutcomeConfig.from_overrides({
            "outcomes": dict(self.outcomes), "censoring": changed,
            "first_occurrence_fields": dict(self.first_occurrence_fields)})


@dataclass(frozen=True)
class ComparisonSettings:
    """Keys of ``[train]`` beyond ``TrainConfig``: the loss comparison's losses."""

    #: the loss comparison's losses (Table 3 / A2), trained as one stack with [train]'s
    #: settings; the evaluation's loss table shows them
    comparison_losses: tuple[str, ...] = COMPARISON_LOSSES


@dataclass(frozen=True)
class RunOptions:
    """``[run]``: the command's own options (``python -m sphr_dagster run --help``)."""

    #: demo or paper; default: paper with an export, demo without
    profile: str | None = None
    #: the UK Biobank export; none: the synthetic cohort of [synth]
    export: str | None = None
    #: a JSON override of the outcome table and censoring dates, applied on top of [ingest]
    outcomes: str | None = None
    #: a JSON override of the P0 clinical ranges, applied on top of [cohorts] ranges
    ranges: str | None = None
    run_dir: str = DEFAULT_RUN_DIR
    #: auto (CUDA when present), cpu or cuda
    device: str = "auto"
    #: how many of the per-sex runs and the retrieval comparison run at the same time
    jobs: int = 3
    #: the 7-loss comparison; default: on without an export, off with one
    losses: bool | None = None
    #: the image-retrieval comparison; default: on without an export, off with one
    retrieval: bool | None = None
    #: Dagster's console log level (DEBUG: every event)
    log_level: str = "INFO"


@dataclass(frozen=True)
class _Stage:
    #: "module:Class" of the stage's dataclass (imported on use)
    config: str
    #: fields the run sets (the device, a partition's sex), not a table's key
    runtime: tuple[str, ...] = ()
    #: "module:Class" of keys beyond the dataclass
    extra: str | None = None


STAGES: dict[str, _Stage] = {
    "synth": _Stage("sphr.synth.config:SynthConfig"),
    "ingest": _Stage("sphr.settings:IngestSettings"),
    "cohorts": _Stage("sphr.cohorts.config:CohortConfig", runtime=("sexes",)),
    "train": _Stage("sphr.train.config:TrainConfig", runtime=("device", "threads"),
                    extra="sphr.settings:ComparisonSettings"),
    "baselines": _Stage("sphr.baselines.config:BaselinesConfig", runtime=("device",)),
    "evaluate": _Stage("sphr.evaluate.protocol:EvalConfig", runtime=("device",)),
    "risk": _Stage("sphr.risk.config:RiskConfig", runtime=("device", "sexes")),
    "retrieval": _Stage("sphr.retrieval.profiles:ComparisonConfig", runtime=("device",)),
}
RUN_TABLE = "run"


def _load(spec: str) -> type:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def stage_class(stage: str) -> type:
    """The library dataclass of ``stage`` (``cohorts`` -> ``CohortConfig``)."""
    return _load(STAGES[stage].config)


def _types(cls: type, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.name not in skip}


def stage_types(stage: str) -> dict[str, Any]:
    """Every key of ``[stage]`` with its type: the dataclass's fields (not the run's) and extras."""
    spec = STAGES[stage]
    types_ = _types(stage_class(stage), spec.runtime)
    if spec.extra:
        types_.update(_types(_load(spec.extra)))
    return types_


def _base(stage: str, profile: str) -> Any:
    cls = stage_class(stage)
    if stage == "retrieval":  # the pipeline's own comparison: the quick budget, one seed
        from sphr.retrieval.profiles import PIPELINE_COMPARISON

        return PIPELINE_COMPARISON
    return cls.profile(profile) if hasattr(cls, "profile") else cls()


def stage_defaults(stage: str, profile: str = DEFAULT_PROFILE) -> dict[str, Any]:
    """Every key of ``[stage]`` with its value under ``profile`` (the library's defaults)."""
    base = _base(stage, profile)
    values = {k: getattr(base, k) for k in stage_types(stage) if hasattr(base, k)}
    extra = STAGES[stage].extra
    if extra:
        defaults = _load(extra)()
        values.update({f.name: getattr(defaults, f.name) for f in dataclasses.fields(defaults)})
    return values


def field_docs(cls: type) -> dict[str, str]:
    """The ``#:`` comment above each field of a dataclass (the Dagster launchpad shows them)."""
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


def stage_docs(stage: str) -> dict[str, str]:
    spec = STAGES[stage]
    docs = field_docs(stage_class(stage))
    if spec.extra:
        docs.update(field_docs(_load(spec.extra)))
    return docs


# --------------------------------------------------------------------------- checking values
def type_name(tp: Any) -> str:
    """``tuple[str, ...]`` -> "a list of strings", for the error messages."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args if a is not type(None))
    if origin in (tuple, list):
        return f"a list of {type_name(args[0])}s" if args else "a list"
    if origin is dict or tp is dict:
        return f"a table of {type_name(args[1])}s" if args else "a table"
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
        return tp(**check_table(value, _types(tp), where))
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
                runtime: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every key of ``table`` checked against ``types_``; an unknown key names the valid ones."""
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table, got {table!r}")
    out = {}
    for key, value in table.items():
        if key not in types_:
            why = (f"{key} is set for the whole run ([run] / the command line), not per stage"
                   if key in runtime else f"no key {key!r}")
            raise ConfigError(f"{where}: {why}; valid keys: {', '.join(types_)}")
        out[key] = check_value(value, types_[key], f"{where} {key}")
    return out


def library_config(stage: str, values: Mapping[str, Any], **runtime: Any) -> Any:
    """The stage's dataclass from a table's (or a Dagster config's) values and the run's
    ``runtime`` fields (``device=``, ``sexes=``); the dataclass checks what it checks."""
    cls = stage_class(stage)
    types_ = _types(cls)
    checked = check_table({k: v for k, v in values.items() if k in types_},
                          types_, f"[{stage}]")
    return cls(**{**checked, **runtime})


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


# --------------------------------------------------------------------------- the file
def read_settings_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """The TOML file's tables as written, each checked against its stage first (an unknown
    table or key, or a wrong type, is an error naming the file and the key)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        raise ConfigError(f"{path}: reading a settings file needs Python 3.11 (tomllib)") from None
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such settings file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    tables = (RUN_TABLE, *STAGES)
    out: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        if name not in tables:
            raise ConfigError(f"{path}: unknown table [{name}]; the tables are "
                              + ", ".join(f"[{t}]" for t in tables))
        if name == RUN_TABLE:
            check_table(table, _types(RunOptions), f"{path}: [{name}]")
        else:
            check_table(table, stage_types(name), f"{path}: [{name}]", STAGES[name].runtime)
        out[name] = dict(table)
    return out


def _json_file(path: str | Path, what: str) -> dict:
    try:
        value = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what} file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: the {what} override must be a JSON object")
    return value


def _over(default: Any, value: Any, tp: Any, where: str) -> Any:
    """A table's ``value`` over the profile's ``default``: a table (censoring dates, a nested
    config) changes the keys it names and keeps the others."""
    if dataclasses.is_dataclass(default) and isinstance(value, dict):
        return dataclasses.replace(default, **check_table(value, _types(type(default)), where))
    value = check_value(value, tp, where)
    if isinstance(default, dict) and isinstance(value, dict):
        return {**default, **value}
    return value


def _merge(base: Mapping[str, Any] | None, over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, one level of tables deep (a marker's or an outcome's keys)."""
    out = dict(base or {})
    for key, value in over.items():
        both = isinstance(out.get(key), dict) and isinstance(value, dict)
        out[key] = {**out[key], **value} if both else value
    return out


@dataclass(frozen=True)
class RunSettings:
    """Everything a run needs, resolved: the command's options and every stage's settings
    (``stages[stage]``: each key of the stage's table, see :func:`stage_types`)."""

    profile: str
    export: str | None
    outcomes: str | None
    ranges: str | None
    config_file: str | None
    losses: bool
    retrieval: bool
    device: str
    run_dir: str
    jobs: int
    log_level: str
    stages: dict[str, dict[str, Any]]

    def config(self, stage: str, **runtime: Any) -> Any:
        """The stage's library dataclass (``device=`` and the other run fields as given)."""
        return library_config(stage, self.stages[stage], **runtime)

    def summary(self) -> str:
        """One line: which profile and settings run (the first line ``run`` prints)."""
        def on(flag: bool) -> str:
            return "on" if flag else "off"

        parts = [f"profile {self.profile}", f"export {self.export or 'synthetic'}",
                 f"outcomes {self.outcomes or 'default'}", f"ranges {self.ranges or 'P0'}",
                 f"config {self.config_file or 'none'}", f"losses {on(self.losses)}",
                 f"retrieval {on(self.retrieval)}", f"device {self.device}",
                 f"run dir {self.run_dir}"]
        return "settings: " + " | ".join(parts)

    def to_json(self, command: list[str] | None = None) -> dict[str, Any]:
        """The shape of ``RUN/run_settings.json`` (docs/ARCHITECTURE.md)."""
        return {"profile": self.profile, "export": self.export, "outcomes": self.outcomes,
                "ranges": self.ranges, "config_file": self.config_file,
                "losses": self.losses, "retrieval": self.retrieval, "device": self.device,
                "run_dir": self.run_dir, "jobs": self.jobs,
                "stages": {k: plain(v) for k, v in self.stages.items()},
                "written": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                "command": list(command or [])}


def _run_options(file_run: Mapping[str, Any], folder: Path | None,
                 flags: Mapping[str, Any]) -> dict[str, Any]:
    """``[run]`` under the command line; the file's paths are relative to the file."""
    opts = {f.name: f.default for f in dataclasses.fields(RunOptions)}
    for key, value in file_run.items():
        if key in ("export", "outcomes", "ranges", "run_dir") and folder is not None:
            value = str(folder / Path(value).expanduser())
        opts[key] = value
    opts.update({k: v for k, v in flags.items() if v is not None})
    for key in ("export", "outcomes", "ranges", "run_dir"):
        if opts[key] is not None:
            opts[key] = str(Path(opts[key]).expanduser().resolve())
    if opts["profile"] is None:
        opts["profile"] = EXPORT_PROFILE if opts["export"] else DEFAULT_PROFILE
    if opts["profile"] not in PROFILES:
        raise ConfigError(f"unknown profile {opts['profile']!r}: choose from {', '.join(PROFILES)}")
    for key in ("losses", "retrieval"):  # the paper's synthetic comparisons: not for an export
        if opts[key] is None:
            opts[key] = not opts["export"]
    return opts


def resolve(config_file: str | Path | None = None, *, world: str | None = None,
            **flags: Any) -> RunSettings:
    """The run's settings: the defaults, the profile's, ``config_file``'s, then ``flags``
    (the ``[run]`` keys as the command line gives them, None: not given; ``world``: [synth]'s).

    With an export the default profile is ``paper`` and both comparisons are off; without
    one (the synthetic demo) ``demo`` and both on."""
    unknown = set(flags) - {f.name for f in dataclasses.fields(RunOptions)}
    if unknown:
        raise TypeError(f"resolve() got unknown option(s) {sorted(unknown)}")
    source = str(config_file) if config_file is not None else "the settings"
    tables = read_settings_file(config_file) if config_file is not None else {}
    folder = Path(config_file).resolve().parent if config_file is not None else None
    opts = _run_options(tables.get(RUN_TABLE, {}), folder, flags)
    stages = {s: stage_defaults(s, opts["profile"]) for s in STAGES}
    for stage, values in stages.items():
        types_ = stage_types(stage)
        for key, value in tables.get(stage, {}).items():
            values[key] = _over(values[key], value, types_[key], f"{source}: [{stage}] {key}")
    if world is not None:
        stages["synth"]["world"] = world
    if opts["outcomes"]:
        over = _json_file(opts["outcomes"], "outcomes")
        keys = ("outcomes", "censoring", "first_occurrence_fields")
        bad = set(over) - set(keys)
        if bad:
            raise ConfigError(f"{opts['outcomes']}: unknown keys {sorted(bad)}; expected "
                              "'outcomes', 'censoring' and/or 'first_occurrence_fields' "
                              "(docs/OUTCOMES.md)")
        ingest = stages["ingest"]
        for key in keys:
            ingest[key] = check_value(_merge(ingest[key], over.get(key) or {}),
                                      stage_types("ingest")[key], f"{opts['outcomes']}: {key}")
    if opts["ranges"]:
        stages["cohorts"]["ranges"] = _merge(stages["cohorts"]["ranges"],
                                             _json_file(opts["ranges"], "clinical ranges"))
    settings = RunSettings(
        profile=opts["profile"], export=opts["export"], outcomes=opts["outcomes"],
        ranges=opts["ranges"], config_file=str(Path(config_file).resolve()) if config_file
        else None, losses=bool(opts["losses"]), retrieval=bool(opts["retrieval"]),
        device=opts["device"], run_dir=opts["run_dir"], jobs=opts["jobs"],
        log_level=opts["log_level"], stages=stages)
    _check(settings, source)
    return settings


def _check(settings: RunSettings, source: str) -> None:
    """Build every stage's dataclass once, so a bad value fails before anything runs."""
    for stage in STAGES:
        try:
            config = settings.config(stage)
            if hasattr(config, "check"):
                config.check()
            if stage == "cohorts":
                config.clinical_ranges()
            if stage == "ingest":
                config.outcome_config()
        except ConfigError as err:
            raise ConfigError(f"{source}: [{stage}] {err}") from None


def write_run_settings(settings: RunSettings, run_dir: str | Path,
                       command: list[str] | None = None) -> Path:
    """``RUN/run_settings.json``: what this run ran with, written atomically."""
    from sphr.io import write_json

    return write_json(settings.to_json(command), Path(run_dir) / RUN_SETTINGS_FILE)
