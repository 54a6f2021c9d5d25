"""The ingest stage's settings: one dataclass, the ``[ingest]`` table of a run's settings
file and the options of ``sphr ingest`` (the outcome table itself: :mod:`sphr.data.outcomes`).
Every stage keeps its settings in its own ``config`` module; :mod:`sphr.settings` only
composes them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
