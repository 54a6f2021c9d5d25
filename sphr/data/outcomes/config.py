"""The outcome configuration a run uses: the outcome table, each source's censoring dates and
the First Occurrence fields known by code, and the JSON override that changes them
(:meth:`OutcomeConfig.from_overrides`)."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sphr.data.fields import ALGORITHMIC, FIRST_OCCURRENCE
from sphr.data.outcomes.censoring import CENSORING, CensoringDate, censoring_override
from sphr.data.outcomes.definitions import OUTCOMES, SOURCES, Outcome, check_spec
from sphr.errors import ConfigError, check_keys

#: an outcome's keys in the override, and the coding of its code lists
_CODE_KEYS: dict[str, str] = {"codes": "icd10", "exclude": "icd10", "icd9": "icd9",
                              "icd9_exclude": "icd9"}
_OUTCOME_KEYS = frozenset({*_CODE_KEYS, "title", "sources", "algorithmic", "why", "reference"})
_OVERRIDE_KEYS = ("outcomes", "censoring", "first_occurrence_fields")


def _outcome_change(name: str, spec: dict) -> dict[str, Any]:
    """The fields an override of outcome ``name`` sets, checked."""
    check_keys(spec, sorted(_OUTCOME_KEYS), f"outcome {name!r}")
    change: dict[str, Any] = {}
    for key in (*_CODE_KEYS, "sources", "algorithmic"):
        if key not in spec:
            continue
        values = spec[key]
        if not isinstance(values, list):
            raise ConfigError(f"outcome {name!r}: {key!r} must be a list")
        if key in _CODE_KEYS:
            change[key] = tuple(check_spec(v, f"outcome {name!r} {key}", _CODE_KEYS[key])
                                for v in values)
        else:
            change[key] = tuple(str(v) for v in values)
    for key in ("title", "why", "reference"):
        if key in spec:
            change[key] = str(spec[key])
    return change


def _first_occurrence_override(value: Any) -> dict[str, int]:
    """Further First Occurrence fields: ``{"J44": 131492}`` (3-character ICD-10 code -> the id of
    "Date <code> first reported", from the Showcase)."""
    if not isinstance(value, dict):
        raise ConfigError("first_occurrence_fields must be an object: {\"J44\": 131492, ...}")
    out = dict(FIRST_OCCURRENCE)
    for code, fid in value.items():
        norm = str(code).strip().upper()
        if not re.fullmatch(r"[A-Z][0-9]{2}", norm):
            raise ConfigError(f"first_occurrence_fields: {code!r} is not a 3-character ICD-10 "
                              "code (the First Occurrences have one field per category)")
        if not isinstance(fid, int) or isinstance(fid, bool) or fid <= 0:
            raise ConfigError(f"first_occurrence_fields {code}: {fid!r} is not a field id")
        out[norm] = fid
    return out


@dataclass(frozen=True)
class OutcomeConfig:
    """The outcome table, the censoring dates of each source and the First Occurrence fields
    known by code."""

    outcomes: tuple[Outcome, ...] = OUTCOMES
    censoring: dict[str, CensoringDate] = field(default_factory=lambda: dict(CENSORING))
    first_occurrence_fields: dict[str, int] = field(default_factory=lambda: dict(FIRST_OCCURRENCE))

    def __post_init__(self) -> None:
        names = [o.name for o in self.outcomes]
        if len(set(names)) != len(names):
            raise ConfigError(f"outcome names must be unique, got {names}")
        for o in self.outcomes:
            if not o.sources:
                raise ConfigError(f"outcome {o.name!r} has no sources")
            bad = [s for s in o.sources if s not in SOURCES]
            if bad:
                raise ConfigError(f"outcome {o.name!r}: unknown source(s) {bad}; known: "
                                  f"{', '.join(SOURCES)}")
            unknown = [a for a in o.algorithmic if a not in ALGORITHMIC]
            if unknown:
                raise ConfigError(f"outcome {o.name!r}: unknown algorithmic outcome(s) "
                                  f"{unknown}; known: {', '.join(ALGORITHMIC)}")
        missing = [s for s in SOURCES if s not in self.censoring]
        if missing:
            raise ConfigError(f"no censoring date for source(s) {missing}")

    def censoring_date(self, source: str, country: str = "england") -> dt.date:
        return self.censoring[source].dates[country]

    @classmethod
    def from_overrides(cls, overrides: dict | None) -> OutcomeConfig:
        """Apply a JSON-style override to the defaults.

        ``{"outcomes": {"cardiovascular": {"codes": ["I20-I25", "I60-I64", "G45"]},
        "copd": {"codes": ["J44"], "sources": ["hospital", "death"]}, "death": null},
        "censoring": {"hospital": {"england": "2022-10-31", "scotland": "2021-07-31"},
        "death": "2022-11-30"}, "first_occurrence_fields": {"J44": 131492}}``: a known
        outcome's keys replace its defaults, a new name adds an outcome (``codes`` and
        ``sources`` required; ``codes`` may be empty for "any record"), ``null`` removes one.
        """
        if not overrides:
            return cls()
        if not isinstance(overrides, dict):
            raise ConfigError("the outcome override must be a JSON object")
        check_keys(overrides, _OVERRIDE_KEYS, "outcome override")
        table = {o.name: o for o in OUTCOMES}
        for name, spec in (overrides.get("outcomes") or {}).items():
            if spec is None:
                if name not in table:
                    raise ConfigError(f"cannot remove unknown outcome {name!r}")
                del table[name]
                continue
            if not isinstance(spec, dict):
                raise ConfigError(f"outcome {name!r}: expected an object or null, got {spec!r}")
            if name not in table and not {"codes", "sources"} <= set(spec):
                raise ConfigError(f"new outcome {name!r} needs 'codes' and 'sources'")
            change = _outcome_change(name, spec)
            if name in table:
                change.setdefault("reference", "user override")
                table[name] = replace(table[name], **change)
            else:
                table[name] = Outcome(name=name, title=change.pop("title", name),
                                      **{"reference": "user override", **change})
        censoring = dict(CENSORING)
        for source, value in (overrides.get("censoring") or {}).items():
            censoring[source] = censoring_override(source, value)
        fo = _first_occurrence_override(overrides.get("first_occurrence_fields") or {})
        return cls(tuple(table.values()), censoring, fo)

    def table(self) -> list[dict]:
        """The outcome table and censoring dates as plain data (reports, docs)."""
        return [{**asdict(o), **{k: list(getattr(o, k)) for k in (*_CODE_KEYS, "sources",
                                                                  "algorithmic")}}
                for o in self.outcomes]


def load_outcome_config(path: str | Path | None) -> OutcomeConfig:
    """The defaults, or the defaults with a JSON override file applied; an error names the
    file."""
    if path is None:
        return OutcomeConfig()
    try:
        return OutcomeConfig.from_overrides(json.loads(Path(path).read_text()))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
