"""A run's settings file (TOML), resolved with the command line into :class:`RunSettings`.

Precedence, lowest first: the dataclasses' defaults, the profile's, the file, the command
line (:func:`resolve`); ``RUN/run_settings.json`` records what a run ran with.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sphr.errors import ConfigError, check_keys
from sphr.options import Override, override_tables
from sphr.profiles import DEFAULT_PROFILE, PROFILES
from sphr.settings.stages import (
    COMMAND_TABLES,
    EXPORT_PROFILE,
    FIT_ENGINES,
    RUN_TABLE,
    STAGES,
    RunOptions,
    command_class,
    library_config,
    not_keys,
    stage_defaults,
    stage_types,
)
from sphr.values import check_table, check_value, field_types, plain

#: where ``python -m sphr_dagster run`` records what it ran (:func:`write_run_settings`)
RUN_SETTINGS_FILE = "run_settings.json"


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
    return check_tables(raw, str(path))


def check_tables(raw: Mapping[str, Any], source: str) -> dict[str, dict[str, Any]]:
    """Settings tables (a file's, or ``--set`` items' as :func:`sphr.options.override_tables`
    builds them) each checked against its stage: the one check of both."""
    tables = (RUN_TABLE, *STAGES, *COMMAND_TABLES)
    out: dict[str, dict[str, Any]] = {}
    for name, table in raw.items():
        if name not in tables:
            raise ConfigError(f"{source}: unknown table [{name}]; the tables are "
                              + ", ".join(f"[{t}]" for t in tables))
        if name == RUN_TABLE:
            check_table(table, field_types(RunOptions), f"{source}: [{name}]")
        elif name in COMMAND_TABLES:
            check_table(table, field_types(command_class(name)), f"{source}: [{name}]")
        else:
            check_table(table, stage_types(name), f"{source}: [{name}]", not_keys(name))
        out[name] = dict(table)
    return out


def command_table(path: str | Path, name: str) -> dict[str, Any]:
    """The ``[name]`` table of a command (:data:`~sphr.settings.stages.COMMAND_TABLES`) in the
    settings file ``path``, its values as the command's settings dataclass takes them (every
    table of the file checked first; an unknown key or a wrong type names the file and the
    key); empty without one."""
    table = read_settings_file(path).get(name, {})
    return check_table(table, field_types(command_class(name)), f"{path}: [{name}]")


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
        return dataclasses.replace(default, **check_table(value, field_types(type(default)), where))
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
    engine: str = "local"
    fit_cpus: float = 0.0
    fit_gpus: float = 0.0

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
        if self.engine != "local":  # where the fits run, when not here
            parts.insert(-1, f"engine {self.engine} ({self.fit_cpus or 1:g} CPU, "
                         f"{self.fit_gpus:g} GPU a fit)")
        return "settings: " + " | ".join(parts)

    def to_json(self, command: list[str] | None = None) -> dict[str, Any]:
        """The shape of ``RUN/run_settings.json`` (docs/ARCHITECTURE.md)."""
        return {"profile": self.profile, "export": self.export, "outcomes": self.outcomes,
                "ranges": self.ranges, "config_file": self.config_file,
                "losses": self.losses, "retrieval": self.retrieval, "device": self.device,
                "run_dir": self.run_dir, "jobs": self.jobs, "engine": self.engine,
                "fit_cpus": self.fit_cpus, "fit_gpus": self.fit_gpus,
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
    if opts["engine"] not in FIT_ENGINES:
        raise ConfigError(f"engine {opts['engine']!r}: choose from {', '.join(FIT_ENGINES)}")
    for key in ("fit_cpus", "fit_gpus"):
        if float(opts[key]) < 0:
            raise ConfigError(f"{key} {opts[key]}: a number of CPUs / GPUs, 0 or more")
    for key in ("losses", "retrieval"):  # the paper's synthetic comparisons: not for an export
        if opts[key] is None:
            opts[key] = not opts["export"]
    return opts


def resolve(config_file: str | Path | None = None, *, world: str | None = None,
            overrides: Sequence[Override] = (), **flags: Any) -> RunSettings:
    """The run's settings: the defaults, the profile's, ``config_file``'s, then ``flags``
    (the ``[run]`` keys as the command line gives them, None: not given; ``world``: [synth]'s)
    and ``overrides`` (``--set STAGE.KEY=VALUE``, over the file's keys, checked as they are).

    With an export the default profile is ``paper`` and both comparisons are off; without
    one (the synthetic demo) ``demo`` and both on."""
    unknown = set(flags) - {f.name for f in dataclasses.fields(RunOptions)}
    if unknown:
        raise TypeError(f"resolve() got unknown option(s) {sorted(unknown)}")
    source = str(config_file) if config_file is not None else "the settings"
    tables = read_settings_file(config_file) if config_file is not None else {}
    if overrides:
        if any(o.stage == RUN_TABLE for o in overrides):
            raise ConfigError(f"--set {RUN_TABLE}.*: the [{RUN_TABLE}] keys are the command's "
                              "own options (--export, --profile, ...)")
        check_tables(override_tables(overrides), "--set")
        tables = override_tables(overrides, tables)
    folder = Path(config_file).resolve().parent if config_file is not None else None
    opts = _run_options(tables.get(RUN_TABLE, {}), folder, flags)
    stages = {s: stage_defaults(s, opts["profile"]) for s in STAGES}
    for stage, values in stages.items():
        types_ = stage_types(stage)
        for key, value in tables.get(stage, {}).items():
            values[key] = _over(values[key], value, types_[key], f"{source}: [{stage}] {key}")
    if world is not None:
        stages["synth"]["world"] = world
    if not opts["export"]:  # the synthetic demo: its own protocol unless the file says
        from sphr.cohorts.config import DEMO_PROTOCOL

        for key, value in DEMO_PROTOCOL.items():
            if key not in tables.get("cohorts", {}):
                stages["cohorts"][key] = value
    if opts["outcomes"]:
        over = _json_file(opts["outcomes"], "outcomes")
        keys = ("outcomes", "censoring", "first_occurrence_fields")
        check_keys(over, keys, f"{opts['outcomes']} (docs/OUTCOMES.md)")
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
        log_level=opts["log_level"], stages=stages, engine=opts["engine"],
        fit_cpus=float(opts["fit_cpus"]), fit_gpus=float(opts["fit_gpus"]))
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
