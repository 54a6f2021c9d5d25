"""The stages of a run's settings: each stage's table, its dataclass, its keys and defaults.

A table per stage (``[cohorts]``, ``[train]``, ...) whose keys are the fields of the stage's
own dataclass, which the stage keeps in its own ``config`` module (the one source of every
default; imported only when asked, so a command's parser stays light), less the fields the
run sets (``runtime``: the device, a partition's sex), plus the keys of an ``extra``
dataclass; and ``[run]``, the command's own options. This package composes the stages'
settings and no stage imports it (tests/test_architecture.py).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sphr.layout import DEFAULT_RUN_DIR
from sphr.options import field_docs
from sphr.profiles import DEFAULT_PROFILE
from sphr.values import check_table, field_types

#: the profile a run on a real export takes unless asked otherwise: the one whose shipped
#: SPHR candidate passed the pre-registered rule by dC on the development cross-fit
#: (docs/METHODS.md, "Higher risk for your age"): ``demo`` with the geometry anchor passed in
#: both sexes; no ``paper`` candidate was measured passing (its cross-fits take hours of a
#: 2-core CPU and wait for a GPU), so ``paper`` is no longer the default
EXPORT_PROFILE = "demo"


#: where a run's training fits can run (``[run] engine``; sphr_dagster.fits launches them)
FIT_ENGINES = ("local", "ray", "slurm", "k8s")


@dataclass(frozen=True)
class RunOptions:
    """``[run]``: the command's own options (``python -m sphr_dagster run --help``)."""

    #: demo or paper; default: demo (the export default is the pre-registered rule's choice)
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
    #: where the training fits run: local, ray (RAY_ADDRESS), slurm (SLURM_CONF) or k8s
    engine: str = "local"
    #: CPUs each fit asks of the engine (its torch threads); 0: one on a cluster, locally all
    fit_cpus: float = 0.0
    #: GPUs each fit asks of the engine: a fraction on Ray (0.2: five fits share one)
    fit_gpus: float = 0.0
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
    #: "module:NAME" of the stage's removed keys (key -> why), so a file that still sets one
    #: is told it was removed, not only that it is unknown
    removed: str | None = None


STAGES: dict[str, _Stage] = {
    "synth": _Stage("sphr.synth.config:SynthConfig"),
    "ingest": _Stage("sphr.data.config:IngestSettings"),
    "cohorts": _Stage("sphr.cohorts.config:CohortConfig", runtime=("sexes",)),
    # its run-set fields are marked in the dataclass (``set_by_run``: runtime_fields)
    "train": _Stage("sphr.train.config:TrainConfig",
                    extra="sphr.train.config:ComparisonSettings"),
    "baselines": _Stage("sphr.baselines.config:BaselinesConfig", runtime=("device",)),
    "evaluate": _Stage("sphr.evaluate.config:EvalConfig", runtime=("device",)),
    "risk": _Stage("sphr.risk.config:RiskConfig", runtime=("device", "sexes"),
                   removed="sphr.risk.config:REMOVED_SETTINGS"),
    "retrieval": _Stage("sphr.retrieval.profiles:ComparisonConfig", runtime=("device",)),
}
RUN_TABLE = "run"
#: tables of a settings file for a command beside the run, "module:Class" of its settings
#: (imported on use): ``sphr score --config FILE`` reads ``[score]``; a run ignores them
COMMAND_TABLES: dict[str, str] = {"score": "sphr.risk.config:ScoreSettings"}


def _load(spec: str) -> type:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def command_class(table: str) -> type:
    """The settings dataclass of a command's table (``score`` -> ``ScoreSettings``)."""
    return _load(COMMAND_TABLES[table])


def stage_class(stage: str) -> type:
    """The library dataclass of ``stage`` (``cohorts`` -> ``CohortConfig``)."""
    return _load(STAGES[stage].config)


def runtime_fields(stage: str) -> tuple[str, ...]:
    """The fields of ``stage``'s dataclass that the run sets, not a table: its ``runtime`` and
    those whose field metadata says ``set_by_run``."""
    marked = [f.name for f in dataclasses.fields(stage_class(stage))
              if f.metadata.get("set_by_run")]
    return tuple(dict.fromkeys((*STAGES[stage].runtime, *marked)))


def not_keys(stage: str) -> dict[str, str]:
    """Key -> why it is no key of ``[stage]``: the fields the run sets and the removed keys."""
    spec = STAGES[stage]
    why = {k: "is set for the whole run ([run] / the command line), not per stage"
           for k in runtime_fields(stage)}
    if spec.removed:
        why.update({k: f"was removed ({reason}); delete it"
                    for k, reason in _load(spec.removed).items()})
    return why


def stage_types(stage: str) -> dict[str, Any]:
    """Every key of ``[stage]`` with its type: the dataclass's fields (not the run's) and extras."""
    spec = STAGES[stage]
    types_ = field_types(stage_class(stage), runtime_fields(stage))
    if spec.extra:
        types_.update(field_types(_load(spec.extra)))
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


def stage_docs(stage: str) -> dict[str, str]:
    spec = STAGES[stage]
    docs = field_docs(stage_class(stage))
    if spec.extra:
        docs.update(field_docs(_load(spec.extra)))
    return docs


def library_config(stage: str, values: Mapping[str, Any], **runtime: Any) -> Any:
    """The stage's dataclass from a table's (or a Dagster config's) values and the run's
    ``runtime`` fields (``device=``, ``sexes=``); the dataclass checks what it checks. Every
    key of ``values`` is one of ``[stage]`` (:func:`stage_types`): the extras' keys (the loss
    comparison's losses) are checked too and left to their own reader."""
    cls = stage_class(stage)
    checked = check_table(values, stage_types(stage), f"[{stage}]", not_keys(stage))
    fields = field_types(cls)
    return cls(**{**{k: v for k, v in checked.items() if k in fields}, **runtime})


