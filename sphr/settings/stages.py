"""The stages of a run's settings: each stage's table, its dataclass, its keys and defaults.

A table per stage (``[cohorts]``, ``[train]``, ...) whose keys are the fields of the stage's
own dataclass (the one source of every default; imported only when asked, so a command's
parser stays light), less the fields the run sets (``runtime``: the device, a partition's
sex), plus the keys of an ``extra`` dataclass; and ``[run]``, the command's own options.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sphr.layout import DEFAULT_RUN_DIR
from sphr.options import field_docs
from sphr.profiles import DEFAULT_PROFILE
from sphr.settings.values import _types, check_table
from sphr.train.config import COMPARISON_LOSSES

#: a run on a real export takes the paper's settings unless asked otherwise: the demo
#: profile's 8-epoch model is sized for the synthetic demo, not for a result
EXPORT_PROFILE = "paper"


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
    "ingest": _Stage("sphr.settings.stages:IngestSettings"),
    "cohorts": _Stage("sphr.cohorts.config:CohortConfig", runtime=("sexes",)),
    # its run-set fields are marked in the dataclass (``set_by_run``: runtime_fields)
    "train": _Stage("sphr.train.config:TrainConfig",
                    extra="sphr.settings.stages:ComparisonSettings"),
    "baselines": _Stage("sphr.baselines.config:BaselinesConfig", runtime=("device",)),
    "evaluate": _Stage("sphr.evaluate.config:EvalConfig", runtime=("device",)),
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


def runtime_fields(stage: str) -> tuple[str, ...]:
    """The fields of ``stage``'s dataclass that the run sets, not a table: its ``runtime`` and
    those whose field metadata says ``set_by_run``."""
    marked = [f.name for f in dataclasses.fields(stage_class(stage))
              if f.metadata.get("set_by_run")]
    return tuple(dict.fromkeys((*STAGES[stage].runtime, *marked)))


def stage_types(stage: str) -> dict[str, Any]:
    """Every key of ``[stage]`` with its type: the dataclass's fields (not the run's) and extras."""
    spec = STAGES[stage]
    types_ = _types(stage_class(stage), runtime_fields(stage))
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


def stage_docs(stage: str) -> dict[str, str]:
    spec = STAGES[stage]
    docs = field_docs(stage_class(stage))
    if spec.extra:
        docs.update(field_docs(_load(spec.extra)))
    return docs


def library_config(stage: str, values: Mapping[str, Any], **runtime: Any) -> Any:
    """The stage's dataclass from a table's (or a Dagster config's) values and the run's
    ``runtime`` fields (``device=``, ``sexes=``); the dataclass checks what it checks."""
    cls = stage_class(stage)
    types_ = _types(cls)
    checked = check_table({k: v for k, v in values.items() if k in types_},
                          types_, f"[{stage}]")
    return cls(**{**checked, **runtime})


