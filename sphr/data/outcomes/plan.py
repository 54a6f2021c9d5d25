"""Which linked-record columns an export has (:func:`plan_linked`): hospital, registry, First
Occurrence and category 42 fields, and the two fields that set each participant's follow-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sphr.data.fields import (
    ALGORITHMIC,
    ASSESSMENT_CENTRE,
    CANCER_DATE,
    CANCER_TYPE,
    DEATH_CONTRIBUTORY,
    DEATH_DATE,
    DEATH_UNDERLYING,
    HOSPITAL_DATES,
    HOSPITAL_DIAGNOSES,
    HOSPITAL_ICD9,
    HOSPITAL_ICD9_DATES,
    LOST_TO_FOLLOW_UP,
    Field,
    algorithmic_fields,
    first_occurrence_fields,
)
from sphr.data.headers import ColumnKey
from sphr.data.outcomes.config import OutcomeConfig
from sphr.data.outcomes.definitions import SOURCES

if TYPE_CHECKING:
    from sphr.data.export_layout import ExportLayout


@dataclass
class LinkedPlan:
    """The linked-record columns of an export: column name -> array index (hospital),
    instance (registries) or code (First Occurrences: the ICD-10 category; category 42: the
    outcome's name); and the two columns that set each participant's follow-up."""

    hospital_codes: dict[str, int] = field(default_factory=dict)
    hospital_dates: dict[str, int] = field(default_factory=dict)
    icd9_codes: dict[str, int] = field(default_factory=dict)
    icd9_dates: dict[str, int] = field(default_factory=dict)
    cancer_codes: dict[str, int] = field(default_factory=dict)
    cancer_dates: dict[str, int] = field(default_factory=dict)
    death_dates: dict[str, int] = field(default_factory=dict)
    death_underlying: dict[str, int] = field(default_factory=dict)
    death_contributory: dict[str, int] = field(default_factory=dict)
    first_occurrence: dict[str, tuple[str, Field]] = field(default_factory=dict)
    algorithmic: dict[str, tuple[str, Field]] = field(default_factory=dict)
    #: the "source of report" fields of both: column -> (code or name, field); their values
    #: are counted in the report (which kinds of record a first date came from)
    reported_by: dict[str, tuple[str, Field]] = field(default_factory=dict)
    #: 54-0.0 (the baseline assessment centre) and 191-0.0 (date lost to follow-up)
    centre: str | None = None
    lost: str | None = None
    keys: list[ColumnKey] = field(default_factory=list)

    @property
    def sources(self) -> tuple[str, ...]:
        present = {"hospital": bool(self.hospital_codes and self.hospital_dates)
                   or bool(self.icd9_codes and self.icd9_dates),
                   "cancer_registry": bool(self.cancer_codes and self.cancer_dates),
                   "first_occurrence": bool(self.first_occurrence),
                   "algorithmic": bool(self.algorithmic),
                   "death": bool(self.death_dates)}
        return tuple(s for s in SOURCES if present[s])


def _warn_unpaired(plan: LinkedPlan, warnings: list[str]) -> None:
    pairs = ((plan.hospital_codes, plan.hospital_dates, HOSPITAL_DIAGNOSES, HOSPITAL_DATES),
             (plan.icd9_codes, plan.icd9_dates, HOSPITAL_ICD9, HOSPITAL_ICD9_DATES),
             (plan.cancer_codes, plan.cancer_dates, CANCER_TYPE, CANCER_DATE))
    for codes, dates, fc, fd in pairs:
        if bool(codes) != bool(dates):
            have, lack = (fc, fd) if codes else (fd, fc)
            warnings.append(f"linked field {have.id} ({have.title}) is in the export but "
                            f"{lack.id} ({lack.title}) is not: those records are not used")
    if (plan.death_underlying or plan.death_contributory) and not plan.death_dates:
        warnings.append(f"causes of death (40001/40002) are in the export but the date of death "
                        f"({DEATH_DATE.id}) is not: deaths are not used")


def plan_linked(layout: ExportLayout, warnings: list[str],
                config: OutcomeConfig | None = None) -> LinkedPlan:
    """Which linked fields the export has; a field that cannot be used alone is a warning.
    First Occurrence fields are those of ``config`` (the built-in ones by default)."""
    config = config or OutcomeConfig()
    plan = LinkedPlan()
    by_field: dict[int, list[ColumnKey]] = {}
    for key in layout.columns:
        by_field.setdefault(key.field, []).append(key)

    def cols(f: Field, axis: str) -> dict[str, int]:
        keys = sorted(by_field.get(f.id, []))
        plan.keys.extend(keys)
        return {layout.columns[k]: (k.array if axis == "array" else k.instance) for k in keys}

    def one(f: Field, tag: str) -> dict[str, tuple[str, Field]]:
        # a single-valued field: its instance 0, array 0 (UK Biobank has no other)
        key = ColumnKey(f.id, 0, 0)
        if key not in layout.columns:
            return {}
        plan.keys.append(key)
        return {layout.columns[key]: (tag, f)}

    plan.hospital_codes = cols(HOSPITAL_DIAGNOSES, "array")
    plan.hospital_dates = cols(HOSPITAL_DATES, "array")
    plan.icd9_codes = cols(HOSPITAL_ICD9, "array")
    plan.icd9_dates = cols(HOSPITAL_ICD9_DATES, "array")
    plan.cancer_codes = cols(CANCER_TYPE, "instance")
    plan.cancer_dates = cols(CANCER_DATE, "instance")
    plan.death_dates = cols(DEATH_DATE, "instance")
    plan.death_underlying = cols(DEATH_UNDERLYING, "instance")
    plan.death_contributory = cols(DEATH_CONTRIBUTORY, "instance")
    for code, fid in config.first_occurrence_fields.items():
        date, source = first_occurrence_fields(code, fid)
        plan.first_occurrence.update(one(date, code))
        plan.reported_by.update(one(source, code))
    for name, (fid, title) in ALGORITHMIC.items():
        date, source = algorithmic_fields(title, fid)
        plan.algorithmic.update(one(date, name))
        plan.reported_by.update(one(source, name))
    plan.centre = next(iter(one(ASSESSMENT_CENTRE, "centre")), None)
    plan.lost = next(iter(one(LOST_TO_FOLLOW_UP, "lost")), None)
    _warn_unpaired(plan, warnings)
    if not plan.sources:
        plan.keys = []
    return plan
