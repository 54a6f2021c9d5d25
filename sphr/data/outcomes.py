"""Outcomes from linked health records and UK Biobank's derived outcome fields.

UK Biobank links every participant to national records, and derives outcome fields from them.
Five sources reach a main-dataset export as Showcase fields (``sphr.data.fields.LINKED``):

* **hospital** (``hospital``): ICD-10 diagnoses of any inpatient episode, 41270 (array), with
  the date each code was first recorded, 41280 (array, aligned by index with 41270); the same
  in ICD-9 for the records before ICD-10, 41271 with 41281;
* **cancer registry** (``cancer_registry``): one registration per instance, 40006 (ICD-10) with
  its diagnosis date 40005 (same instance);
* **death registry** (``death``): date of death 40000, underlying cause 40001 and contributory
  causes 40002 (ICD-10; a cause counts as recorded on the date of death);
* **First Occurrences** (``first_occurrence``, category 1712): per 3-character ICD-10 code, the
  date it was first reported in any source, and which (:data:`~sphr.data.fields.FIRST_OCCURRENCE`
  gives the fields by code; an override adds more);
* **algorithmically-defined outcomes** (``algorithmic``, category 42): dates of myocardial
  infarction, stroke and others (:data:`~sphr.data.fields.ALGORITHMIC`).

:data:`OUTCOMES` maps ICD-10 and ICD-9 code sets (and category 42 outcomes) to outcomes, as
data (docs/OUTCOMES.md gives the reasons and sources); users change or add outcomes, the
censoring dates and First Occurrence fields with a JSON override
(:meth:`OutcomeConfig.from_overrides`). For every participant and outcome the first record of
a matching code in one of the outcome's sources is its **first event**:

* on or before the baseline assessment (53-0.0): ``prevalent`` (excluded from incidence
  analyses of that outcome; ``event`` 1, ``time_years`` 0);
* after baseline and no later than the participant's follow-up end: an incident event;
* otherwise the participant is censored at the follow-up end: the earliest of the outcome's
  sources' censoring dates for the participant's country (from the baseline assessment centre,
  54; ascertainment is complete in every source up to then), the date of death and the date
  lost to follow-up (191).

A code outside every outcome set is ignored and counted, so is a code without a usable date.
UK Biobank's placeholder dates (:data:`SPECIAL_DATES`) are missing dates (counted); any other
unreadable date, a value that is not an ICD-10 (ICD-9) code or an unknown assessment centre
stops the ingest with one :class:`~sphr.errors.InputError` naming the file, the column and the
row.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sphr.data.fields import (
    ALGORITHMIC,
    ASSESSMENT_CENTRE,
    CANCER_DATE,
    CANCER_TYPE,
    CENTRE_COUNTRY,
    DEATH_CONTRIBUTORY,
    DEATH_DATE,
    DEATH_UNDERLYING,
    FIRST_OCCURRENCE,
    HOSPITAL_DATES,
    HOSPITAL_DIAGNOSES,
    HOSPITAL_ICD9,
    HOSPITAL_ICD9_DATES,
    LOST_TO_FOLLOW_UP,
    Field,
    algorithmic_fields,
    first_occurrence_fields,
)
from sphr.data.headers import ColumnKey, ListCellError, is_list_cell, split_list_cells
from sphr.errors import ConfigError, InputError

if TYPE_CHECKING:  # the CLI parser imports this module; polars and pyarrow load on use
    import polars as pl
    import pyarrow as pa

    from sphr.data.reader import ExportLayout

log = logging.getLogger(__name__)

#: data sources, in the order that breaks a same-day tie for "which record came first": a
#: registry's record is the more specific one, and a record beats a field derived from records
#: (First Occurrences, category 42)
SOURCES: tuple[str, ...] = ("cancer_registry", "hospital", "death", "first_occurrence",
                            "algorithmic")
SOURCE_FIELDS: dict[str, tuple[Field, ...]] = {
    "hospital": (HOSPITAL_DIAGNOSES, HOSPITAL_DATES, HOSPITAL_ICD9, HOSPITAL_ICD9_DATES),
    "cancer_registry": (CANCER_TYPE, CANCER_DATE),
    "death": (DEATH_DATE, DEATH_UNDERLYING, DEATH_CONTRIBUTORY),
}
#: the countries whose providers' censoring dates differ, from the assessment centre (54)
COUNTRIES: tuple[str, ...] = ("england", "scotland", "wales")
#: codings of a record's code: ICD-10, ICD-9 (hospital records before ~1995-1997) or the name
#: of an algorithmically-defined outcome (category 42)
CODINGS: tuple[str, ...] = ("icd10", "icd9", "algorithm")
#: UK Biobank's placeholder dates (Showcase, "Dates" in the data dictionary): never real dates
SPECIAL_DATES: dict[dt.date, str] = {
    dt.date(1900, 1, 1): "date is unknown",
    dt.date(1901, 1, 1): "date given was before the participant's birth",
    dt.date(1902, 2, 2): "date given matches the participant's date of birth",
    dt.date(1903, 3, 3): "date given matches the participant's year of birth",
    dt.date(2037, 7, 7): "placeholder for a date in the future",
}
DAYS_PER_YEAR = 365.25
#: ICD-10 as UK Biobank writes it (coding 19): letter, two digits, up to three more characters
_ICD10 = r"^[A-Z][0-9]{2}[0-9A-Z]{0,3}$"
_ICD10_RE = re.compile(_ICD10)
#: ICD-9 as UK Biobank writes it (coding 87): three digits, V and two digits or E and three
#: digits, then up to two more characters
_ICD9 = r"^(?:[0-9]{3}|V[0-9]{2}|E[0-9]{3})[0-9A-Z]{0,2}$"
_ICD9_RE = re.compile(_ICD9)
_PATTERN = {"icd10": (_ICD10, "an ICD-10 code (expected e.g. 'E119', 'E11.9' or 'E11.9 <title>')"),
            "icd9": (_ICD9, "an ICD-9 code (expected e.g. '4109', '410.9' or '4109 <title>')")}
_UKB_DATES = "https://biobank.ndph.ox.ac.uk/showcase/exinfo.cgi?src=Data_providers_and_dates"


# --------------------------------------------------------------------------- the outcome table
@dataclass(frozen=True)
class Outcome:
    """One outcome: the ICD-10 codes that mean it and the sources that may record it.

    ``codes`` are categories with all their subcodes (``"E11"`` = E11, E11.0 ... E11.9), a
    subcode (``"I63.6"``) or an inclusive range of categories (``"C00-C97"``); ``exclude``
    takes the same forms. ``icd9`` and ``icd9_exclude`` do the same in ICD-9 (``"410-414"``),
    for the hospital records coded before ICD-10; ``algorithmic`` names UK Biobank's
    algorithmically-defined outcomes (category 42) that count. No codes of any kind: any record
    of the sources counts (all-cause death). A First Occurrence field is one 3-character code:
    it counts when the code set holds that whole category.
    """

    name: str
    title: str
    codes: tuple[str, ...]
    sources: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    why: str = ""
    reference: str = ""
    icd9: tuple[str, ...] = ()
    icd9_exclude: tuple[str, ...] = ()
    algorithmic: tuple[str, ...] = ()

    @property
    def has_codes(self) -> bool:
        return bool(self.codes or self.icd9 or self.algorithmic)

    def matches(self, code: str, coding: str = "icd10") -> bool:
        """Whether a normalized code (``E119``, no dot; ``4109`` in ICD-9; an algorithmic
        outcome's name) is in the set."""
        if coding == "algorithm":
            return code in self.algorithmic
        codes, exclude = ((self.icd9, self.icd9_exclude) if coding == "icd9"
                          else (self.codes, self.exclude))
        hit = any(_in_spec(code, s) for s in codes)
        return hit and not any(_in_spec(code, s) for s in exclude)


OUTCOMES: tuple[Outcome, ...] = (
    Outcome(
        "type2_diabetes", "Type 2 diabetes", ("E11",), ("hospital", "first_occurrence", "death"),
        why="E11 'Non-insulin-dependent diabetes mellitus' is the type-specific code; E10 (type "
        "1), E13/E14 (other, unspecified) and O24 (pregnancy) are left out, as in UK Biobank's "
        "diabetes algorithms, which count only type-specific codes as incident type 2 diabetes. "
        "No ICD-9 code: 250 (diabetes mellitus) does not tell the types apart in the 4-digit "
        "ICD-9 of UK hospital records.",
        reference="ICD-10 chapter IV; Eastwood et al. 2016, PLoS One 11:e0162388 (UK Biobank "
        "diabetes algorithms)"),
    Outcome(
        "cancer", "Cancer (malignant, excluding non-melanoma skin cancer)", ("C00-C97",),
        ("cancer_registry", "hospital", "death"), exclude=("C44",),
        icd9=("140-208",), icd9_exclude=("173",),
        why="C00-C97 are the malignant neoplasms; C44 (non-melanoma skin cancer) is excluded "
        "because it is common, rarely serious and inconsistently registered, as in UK Biobank's "
        "own cancer reports; in situ (D00-D09) and benign (D10-D36) neoplasms are not cancer. "
        "In ICD-9 the same: 140-208 without 173 (other malignant neoplasm of skin). The First "
        "Occurrences have no neoplasm fields (cancer comes from the registry).",
        reference="UK Biobank Cancer Summary Report (ICD-10 C00-C97 excluding C44); "
        "Fry et al. 2017, Am J Epidemiol 186:1026"),
    Outcome(
        "cardiovascular", "Coronary heart disease and stroke", ("I20-I25", "I60-I64"),
        ("hospital", "first_occurrence", "algorithmic", "death"),
        icd9=("410-414", "430-431", "434", "436"),
        algorithmic=("myocardial_infarction", "stroke"),
        why="I20-I25 ischaemic heart disease (angina, acute and subsequent myocardial "
        "infarction, chronic ischaemic heart disease) and I60-I64 stroke (subarachnoid, "
        "intracerebral and other non-traumatic intracranial haemorrhage, cerebral infarction, "
        "stroke not specified): the atherosclerotic events that the metabolic and lipid "
        "markers predict. Heart failure (I50), atrial fibrillation (I48), hypertension "
        "(I10-I15), TIA (G45) and sequelae (I69) are not included: they are not first "
        "atherosclerotic events, or are coded mainly as comorbidities. ICD-9: 410-414 "
        "(ischaemic heart disease) and the stroke codes of UK Biobank's stroke algorithm, 430, "
        "431, 434 and 436; UK Biobank's algorithmically-defined myocardial infarction and "
        "stroke (42000, 42006) are subsets of the set.",
        reference="ICD-10 chapter IX blocks I20-I25 and I60-I69; UK Biobank outcome "
        "adjudication definitions of myocardial infarction and stroke (2017)"),
    Outcome(
        "death", "Death from any cause", (), ("death",),
        why="all-cause mortality: the date of death (40000) from the death registry",
        reference="UK Biobank death registry (category 100093)"),
)


@dataclass(frozen=True)
class CensoringDate:
    """The date up to which a source's records are taken to be complete, per country of the
    participant's assessment centre (one date for all: the same date three times)."""

    source: str
    dates: dict[str, dt.date]
    provider: str = ""
    reference: str = ""

    @property
    def date(self) -> dt.date:
        """England's date (a participant without a centre gets it too)."""
        return self.dates["england"]


def _by_country(england: str, scotland: str, wales: str) -> dict[str, dt.date]:
    return {"england": dt.date.fromisoformat(england), "scotland": dt.date.fromisoformat(scotland),
            "wales": dt.date.fromisoformat(wales)}


_HOSPITAL_DATES = _by_country("2022-10-31", "2021-07-31", "2018-02-28")
#: UK Biobank's censoring dates per country ("Data providers and dates of data availability",
#: as listed for the 2023 data refresh; docs/OUTCOMES.md, "Censoring", gives the sources).
#: UK Biobank updates them with each refresh and does not apply them to the data: set the ones
#: of your release (override "censoring"). The First Occurrences and the algorithmically-defined
#: outcomes draw on hospital, death and (until 2016-2017) primary care records: they take the
#: hospital records' dates.
CENSORING: dict[str, CensoringDate] = {
    "hospital": CensoringDate(
        "hospital", _HOSPITAL_DATES, "Hospital Episode Statistics (England), Scottish Morbidity "
        "Records (Scotland), Patient Episode Database for Wales", _UKB_DATES),
    "cancer_registry": CensoringDate(
        "cancer_registry", _by_country("2020-12-31", "2021-11-30", "2020-12-31"),
        "National Cancer Registration, NHS England (England; Wales as England), NHS Central "
        "Register (Scotland)", _UKB_DATES),
    "first_occurrence": CensoringDate(
        "first_occurrence", dict(_HOSPITAL_DATES), "First Occurrences (category 1712): the "
        "hospital records' dates", _UKB_DATES),
    "algorithmic": CensoringDate(
        "algorithmic", dict(_HOSPITAL_DATES), "algorithmically-defined outcomes (category "
        "42): the hospital records' dates", _UKB_DATES),
    "death": CensoringDate(
        "death", _by_country("2022-11-30", "2022-11-30", "2022-11-30"),
        "NHS England death registrations (England and Wales), NHS Central Register "
        "(Scotland)", _UKB_DATES),
}


def _normalize_spec(spec: str) -> str:
    return spec.strip().upper().replace(".", "")


def _in_spec(code: str, spec: str) -> bool:
    lo, _, hi = spec.partition("-")
    hi = hi or lo
    return lo <= code[: len(lo)] <= hi


def _check_spec(spec: Any, where: str, coding: str = "icd10") -> str:
    kind = "ICD-10" if coding == "icd10" else "ICD-9"
    example = "'E11', 'I63.6', 'C00-C97'" if coding == "icd10" else "'410', '410.9', '410-414'"
    if not isinstance(spec, str):
        raise ConfigError(f"{where}: an {kind} code must be text, got {spec!r}")
    norm = _normalize_spec(spec)
    lo, dash, hi = norm.partition("-")
    parts = [lo, hi] if dash else [lo]
    pattern = _ICD10_RE if coding == "icd10" else _ICD9_RE
    if not all(pattern.match(p) for p in parts) or (dash and (len(lo) != len(hi) or lo > hi)):
        raise ConfigError(f"{where}: {spec!r} is not an {kind} code or range (e.g. {example})")
    return norm


def _as_date(value: Any, where: str) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not a date (YYYY-MM-DD)") from None


#: an outcome's keys in the override, and the coding of its code lists
_CODE_KEYS: dict[str, str] = {"codes": "icd10", "exclude": "icd10", "icd9": "icd9",
                              "icd9_exclude": "icd9"}
_OUTCOME_KEYS = frozenset({*_CODE_KEYS, "title", "sources", "algorithmic", "why", "reference"})
_OVERRIDE_KEYS = ("outcomes", "censoring", "first_occurrence_fields")


def _outcome_change(name: str, spec: dict) -> dict[str, Any]:
    """The fields an override of outcome ``name`` sets, checked."""
    bad = set(spec) - _OUTCOME_KEYS
    if bad:
        raise ConfigError(f"outcome {name!r}: unknown keys {sorted(bad)}; known: "
                          f"{sorted(_OUTCOME_KEYS)}")
    change: dict[str, Any] = {}
    for key in (*_CODE_KEYS, "sources", "algorithmic"):
        if key not in spec:
            continue
        values = spec[key]
        if not isinstance(values, list):
            raise ConfigError(f"outcome {name!r}: {key!r} must be a list")
        if key in _CODE_KEYS:
            change[key] = tuple(_check_spec(v, f"outcome {name!r} {key}", _CODE_KEYS[key])
                                for v in values)
        else:
            change[key] = tuple(str(v) for v in values)
    for key in ("title", "why", "reference"):
        if key in spec:
            change[key] = str(spec[key])
    return change


def _censoring_override(source: Any, value: Any) -> CensoringDate:
    """One source's censoring override: a date for every country, or ``{"england": ...,
    "scotland": ..., "wales": ...}`` (a country left out keeps its default)."""
    if source not in SOURCES:
        raise ConfigError(f"censoring: unknown source {source!r}; known: {', '.join(SOURCES)}")
    dates = dict(CENSORING[source].dates)
    if isinstance(value, dict):
        bad = set(value) - set(COUNTRIES)
        if bad:
            raise ConfigError(f"censoring {source}: unknown countries {sorted(bad)}; known: "
                              f"{', '.join(COUNTRIES)}")
        dates.update({c: _as_date(v, f"censoring {source} {c}") for c, v in value.items()})
    else:
        dates = dict.fromkeys(COUNTRIES, _as_date(value, f"censoring {source}"))
    return CensoringDate(source, dates, "user override", "user override")


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
        unknown = set(overrides) - set(_OVERRIDE_KEYS)
        if unknown:
            raise ConfigError(f"outcome override has unknown keys {sorted(unknown)}; "
                              f"expected {', '.join(repr(k) for k in _OVERRIDE_KEYS)}")
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
            censoring[source] = _censoring_override(source, value)
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


# --------------------------------------------------------------------------- what the export has
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


# --------------------------------------------------------------------------- reading the records
#: blocks are gathered up to this many cells (rows x columns) before they are processed: a
#: real export's blocks are a few hundred rows wide with hundreds of linked columns, and each
#: pass has a fixed cost. A pass unpivots every cell before dropping the empty ones (~40 bytes
#: a cell), so 2 million cells (~80 MB) bound it: 10 million raised the peak of a 500,000-row
#: ingest by ~350 MB
_BUFFER_CELLS = 2_000_000


class LinkedCollector:
    """The reader's side hook: turns blocks of linked columns into first records.

    Per block it keeps only, per participant, outcome and source, the first dated record (and
    per source the first record of any code, and the date of death), so memory stays small
    however many array columns the export has. Call :meth:`flush` after the last block.
    """

    def __init__(self, layout: ExportLayout, plan: LinkedPlan, config: OutcomeConfig) -> None:
        self.layout, self.plan, self.config = layout, plan, config
        self._buffer: list[pa.Table] = []
        self._buffer_first_row = 1
        self.events: list[pl.DataFrame] = []
        self.any_records: list[pl.DataFrame] = []
        self.deaths: list[pl.DataFrame] = []
        self.codes_read: Counter[str] = Counter()
        self.codes_outside: Counter[str] = Counter()
        self.outside_categories: Counter[str] = Counter()
        self.undated: Counter[str] = Counter()
        self.special_dates: dict[str, Counter[str]] = {}
        self.reported_by: dict[str, Counter[str]] = {}
        self.countries: list[pl.DataFrame] = []
        self.lost: list[pl.DataFrame] = []
        self._membership: dict[tuple[str, str], tuple[str, ...]] = {}

    # ---- helpers
    def _error(self, message: str, col: str, f: Field, row: int) -> InputError:
        return InputError(message, file=self.layout.path, field=f"{col} ({f.name})", row=row)

    def _long(self, df: pl.DataFrame, cols: dict[str, int], f: Field, first_row: int, *,
              aligned: bool) -> pl.DataFrame:
        """(row, pos, col, text): one row per non-empty value.

        A cell may hold several values (RAP puts a whole array in one column: ``E119|I10`` or
        ``["E119","I10"]``). ``aligned`` fields (41270/41280) pair codes and dates by array
        index, so a list must be the field's only column and its positions are the indices; an
        empty slot in a list keeps its position. Otherwise ``pos`` is the column's instance.
        """
        import polars as pl

        schema = {"row": pl.UInt32, "pos": pl.Int32, "col": pl.String, "text": pl.String}
        if not cols:
            return pl.DataFrame(schema=schema)
        long = (df.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"), *cols)
                .unpivot(index="row", variable_name="col", value_name="text")
                .with_columns(pl.col("text").str.strip_chars())
                .filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
                .with_columns(pos=pl.col("col").replace_strict(cols, return_dtype=pl.Int32)))
        is_list = is_list_cell(pl.col("text"))
        lists = long.filter(is_list)
        if lists.is_empty():
            return long.select(list(schema))
        lists = lists.sort("row")
        if aligned and len(cols) > 1:
            bad = lists.row(0, named=True)
            raise self._error(
                f"{bad['text'][:60]!r} holds several values in one array column; expected one "
                f"value per column ({f.id}-0.0, {f.id}-0.1, ...) or the whole array in a single "
                f"column (p{f.id})", bad["col"], f, first_row + bad["row"])
        items = self._split_lists(lists, f, first_row)
        items = (items.with_columns(idx=pl.int_ranges(0, pl.col("items").list.len(),
                                                      dtype=pl.Int32))
                 .explode(["items", "idx"])
                 .with_columns(text=pl.col("items").str.strip_chars().str.strip_chars("\"'")))
        if aligned:
            items = items.with_columns(pos=pl.col("pos") + pl.col("idx"))
        items = items.filter(pl.col("text").is_not_null() & (pl.col("text") != ""))
        return pl.concat([long.filter(~is_list).select(list(schema)),
                          items.select(list(schema))])

    def _split_lists(self, lists: pl.DataFrame, f: Field, first_row: int) -> pl.DataFrame:
        try:
            return lists.with_columns(items=split_list_cells(lists["text"]))
        except ListCellError as exc:
            r = lists.row(exc.index, named=True)
            raise self._error(str(exc), r["col"], f, first_row + r["row"]) from None

    def _codes(self, long: pl.DataFrame, f: Field, first_row: int,
               coding: str = "icd10") -> pl.DataFrame:
        """Add ``code``: the ICD-10 (or ICD-9) code (text before the first space, no dot, upper
        case)."""
        import polars as pl

        pattern, expected = _PATTERN[coding]
        long = long.with_columns(code=pl.col("text").str.split(" ").list.first()
                                 .str.replace_all(".", "", literal=True).str.to_uppercase())
        bad = long.filter(~pl.col("code").str.contains(pattern))
        if not bad.is_empty():
            r = bad.sort("row").row(0, named=True)
            raise self._error(f"{r['text'][:60]!r} is not {expected}", r["col"], f,
                              first_row + r["row"])
        return long

    def _dates(self, long: pl.DataFrame, f: Field, first_row: int) -> pl.DataFrame:
        """Add ``date`` (null for UKB's placeholder dates, which are counted)."""
        import polars as pl

        long = long.with_columns(date=pl.col("text").str.slice(0, 10)
                                 .str.to_date("%Y-%m-%d", strict=False))
        bad = long.filter(pl.col("date").is_null())
        if not bad.is_empty():
            r = bad.sort("row").row(0, named=True)
            raise self._error(f"{r['text']!r} is not a date (YYYY-MM-DD)", r["col"], f,
                              first_row + r["row"])
        special = pl.col("date").is_in(list(SPECIAL_DATES))
        hits = long.filter(special)
        if not hits.is_empty():
            tally = self.special_dates.setdefault(f"{f.id} ({f.name})", Counter())
            for value, n in hits["date"].value_counts().iter_rows():
                tally[value.isoformat()] += n
            long = long.with_columns(date=pl.when(~special).then(pl.col("date")))
        return long

    def _outcomes_of(self, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], tuple[str, ...]]:
        """(coding, code) -> the outcomes whose sets hold it."""
        for pair in pairs:
            if pair not in self._membership:
                coding, code = pair
                self._membership[pair] = tuple(o.name for o in self.config.outcomes
                                               if o.has_codes and o.matches(code, coding))
        return {p: self._membership[p] for p in pairs}

    # ---- blocks
    def __call__(self, table: pa.Table, first_row: int) -> None:
        if not self._buffer:
            self._buffer_first_row = first_row
        self._buffer.append(table)
        if sum(t.num_rows for t in self._buffer) * table.num_columns >= _BUFFER_CELLS:
            self.flush()

    def flush(self) -> None:
        """Process the gathered blocks."""
        import pyarrow as pa

        if self._buffer:
            table = pa.concat_tables(self._buffer)
            self._buffer = []
            self._process(table, self._buffer_first_row)

    def _process(self, table: pa.Table, first_row: int) -> None:
        import polars as pl

        df = pl.from_arrow(table)
        assert isinstance(df, pl.DataFrame)
        eid = df[self.layout.eid_column].cast(pl.Int64, strict=False)
        rows = pl.DataFrame({"row": pl.int_range(0, df.height, dtype=pl.UInt32, eager=True),
                             "eid": eid})
        self._follow_up_fields(df, rows, first_row)
        for col, (tag, _) in self.plan.reported_by.items():
            counts = df[col].str.strip_chars().drop_nulls().value_counts()
            tally = self.reported_by.setdefault(tag, Counter())
            for value, n in counts.iter_rows():
                tally[value] += n if value else 0
        records = []  # row, source, coding, code, date
        plan = self.plan
        if plan.hospital_codes and plan.hospital_dates:
            records.append(self._coded_and_dated(
                df, first_row, "hospital", plan.hospital_codes, HOSPITAL_DIAGNOSES,
                plan.hospital_dates, HOSPITAL_DATES, aligned_codes=True))
        if plan.icd9_codes and plan.icd9_dates:
            records.append(self._coded_and_dated(
                df, first_row, "hospital", plan.icd9_codes, HOSPITAL_ICD9,
                plan.icd9_dates, HOSPITAL_ICD9_DATES, aligned_codes=True, coding="icd9"))
        if "cancer_registry" in plan.sources:
            records.append(self._coded_and_dated(
                df, first_row, "cancer_registry", plan.cancer_codes, CANCER_TYPE,
                plan.cancer_dates, CANCER_DATE, aligned_codes=False))
        records += self._dated_fields(df, first_row, "first_occurrence", "icd10",
                                      plan.first_occurrence)
        records += self._dated_fields(df, first_row, "algorithmic", "algorithm",
                                      plan.algorithmic)
        if "death" in plan.sources:
            records.extend(self._death_records(df, rows, first_row))
        if not records:
            return
        record_schema = {"row": pl.UInt32, "source": pl.String, "coding": pl.String,
                         "code": pl.String, "date": pl.Date}
        rec = pl.concat([r.select(list(record_schema)).cast(record_schema) for r in records])
        pairs = rec.select("coding", "code").unique().rows()
        member = self._outcomes_of([(c, k) for c, k in pairs])
        self._keep(self._tally(rec, member), rows, member)

    def _dated_fields(self, df: pl.DataFrame, first_row: int, source: str, coding: str,
                      cols: dict[str, tuple[str, Field]]) -> list[pl.DataFrame]:
        """(row, source, coding, code, date) of fields that are one date each: a First
        Occurrence (its code is the field's ICD-10 category) or an algorithmically-defined
        outcome (its code is the outcome's name)."""
        import polars as pl

        out = []
        for col, (code, f) in cols.items():
            dates = self._dates(self._long(df, {col: 0}, f, first_row, aligned=True), f,
                                first_row)
            out.append(dates.select("row", source=pl.lit(source), coding=pl.lit(coding),
                                    code=pl.lit(code), date=pl.col("date")))
        return out

    def _follow_up_fields(self, df: pl.DataFrame, rows: pl.DataFrame, first_row: int) -> None:
        """Each participant's country (from the assessment centre, 54-0.0) and date lost to
        follow-up (191), kept for :func:`build_outcomes`."""
        import polars as pl

        if self.plan.lost is not None:
            lost = self._dates(self._long(df, {self.plan.lost: 0}, LOST_TO_FOLLOW_UP, first_row,
                                          aligned=True), LOST_TO_FOLLOW_UP, first_row)
            self.lost.append(lost.filter(pl.col("date").is_not_null()).join(rows, on="row")
                             .select("eid", pl.col("date").alias("lost_date")))
        col = self.plan.centre
        if col is None:
            return
        labels = {v.lower(): k for k, v in (ASSESSMENT_CENTRE.coding or {}).items()}
        text = pl.col("text").str.strip_chars()
        code = pl.coalesce(text.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False),
                           text.str.to_lowercase().replace_strict(labels, default=None,
                                                                  return_dtype=pl.Int64))
        centres = (df.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
                             pl.col(col).alias("text"))
                   .filter(text.is_not_null() & (text != ""))
                   .with_columns(country=code.replace_strict(CENTRE_COUNTRY, default=None,
                                                             return_dtype=pl.String)))
        bad = centres.filter(pl.col("country").is_null())
        if not bad.is_empty():
            r = bad.row(0, named=True)
            raise self._error(f"{r['text'][:60]!r} is not a UK Biobank assessment centre "
                              "(coding 10, e.g. 11010 or 'Leeds')", col, ASSESSMENT_CENTRE,
                              first_row + r["row"])
        self.countries.append(centres.join(rows, on="row").select("eid", "country"))

    def _coded_and_dated(self, df: pl.DataFrame, first_row: int, source: str,
                         code_cols: dict[str, int], code_field: Field, date_cols: dict[str, int],
                         date_field: Field, *, aligned_codes: bool,
                         coding: str = "icd10") -> pl.DataFrame:
        """(row, source, coding, code, date) of a source whose codes and dates are separate
        fields, paired by array index (hospital: 41270/41280, 41271/41281; cancer registry:
        40006/40005)."""
        import polars as pl

        codes = self._codes(self._long(df, code_cols, code_field, first_row,
                                       aligned=aligned_codes), code_field, first_row, coding)
        dates = self._dates(self._long(df, date_cols, date_field, first_row, aligned=True),
                            date_field, first_row)
        # (row, pos) is unique: one date column per array index, or one list column
        paired = codes.join(dates.select("row", "pos", "date"), on=["row", "pos"], how="left")
        return paired.select("row", pl.lit(source).alias("source"),
                             pl.lit(coding).alias("coding"), "code", "date")

    def _death_records(self, df: pl.DataFrame, rows: pl.DataFrame, first_row: int
                       ) -> list[pl.DataFrame]:
        """The death registry's causes as records (row, source, code, date); each participant's
        date of death goes to :attr:`deaths` and, as a record of any code, to
        :attr:`any_records`."""
        import polars as pl

        plan = self.plan
        dates = self._dates(self._long(df, plan.death_dates, DEATH_DATE, first_row,
                                       aligned=True), DEATH_DATE, first_row)
        per_instance = dates.select("row", "pos", "date")
        # a death registered twice (instances 0 and 1) is one death: its first date
        death = per_instance.group_by("row").agg(death_date=pl.col("date").min())
        self.deaths.append(death.join(rows, on="row").filter(pl.col("death_date")
                                                             .is_not_null())
                           .select("eid", "death_date"))
        records = []
        for f, cols in ((DEATH_UNDERLYING, plan.death_underlying),
                        (DEATH_CONTRIBUTORY, plan.death_contributory)):
            if not cols:
                continue
            causes = self._codes(self._long(df, cols, f, first_row, aligned=False), f,
                                 first_row)
            # a cause is recorded on the date of death of its registration (instance)
            causes = (causes.join(per_instance, on=["row", "pos"], how="left")
                      .join(death, on="row", how="left")
                      .with_columns(date=pl.coalesce("date", "death_date")))
            records.append(causes.select("row", pl.lit("death").alias("source"),
                                         pl.lit("icd10").alias("coding"), "code", "date"))
        self.any_records.append(death.join(rows, on="row").select(
            "eid", pl.lit("death").alias("source"), pl.col("death_date").alias("date"))
            .filter(pl.col("date").is_not_null()))
        return records

    def _tally(self, rec: pl.DataFrame,
               member: dict[tuple[str, str], tuple[str, ...]]) -> pl.DataFrame:
        """Count the codes read, outside every outcome and undated (the ingest report's
        check that the outcome table matches the export's coding); ``rec`` with the flags."""
        import polars as pl

        flags = pl.DataFrame([(c, k, not m) for (c, k), m in member.items()],
                             schema={"coding": pl.String, "code": pl.String,
                                     "outside": pl.Boolean}, orient="row")
        rec = (rec.join(flags, on=["coding", "code"], how="left")
               .with_columns(undated=pl.col("date").is_null()))
        for source, is_outside, undated, count in (
                rec.group_by("source", "outside", "undated").len().iter_rows()):
            self.codes_read[source] += count
            self.codes_outside[source] += count if is_outside else 0
            self.undated[source] += count if undated else 0
        outside = rec.filter(pl.col("outside") & (pl.col("coding") != "algorithm"))
        for category, count in outside["code"].str.slice(0, 3).value_counts().iter_rows():
            self.outside_categories[category] += count
        return rec

    def _keep(self, rec: pl.DataFrame, rows: pl.DataFrame,
              member: dict[tuple[str, str], tuple[str, ...]]) -> None:
        """Keep only each participant's first dated record per source and per outcome: the
        blocks' records are not held, so memory follows participants, not records."""
        import polars as pl

        dated = rec.filter(~pl.col("undated")).join(rows, on="row")
        # first record of any code per source (death's is its date, kept above)
        first = (dated.filter(pl.col("source") != "death").group_by("eid", "source")
                 .agg(pl.col("date").min()))
        if not first.is_empty():
            self.any_records.append(first)
        rows_ = [(c, k, o.name, s) for o in self.config.outcomes for s in o.sources
                 for (c, k), m in member.items() if o.name in m]
        if not rows_:
            return
        mapping = pl.DataFrame(rows_, schema={"coding": pl.String, "code": pl.String,
                                              "outcome": pl.String, "source": pl.String},
                               orient="row")
        self.events.append(dated.join(mapping, on=["coding", "code", "source"])
                           .group_by("eid", "outcome", "source").agg(pl.col("date").min()))


# --------------------------------------------------------------------------- outcomes.parquet
OUTCOME_COLUMNS: tuple[str, ...] = (
    "eid", "outcome", "event", "time_years", "prevalent", "source", "event_date",
)


def empty_outcomes() -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(schema={"eid": pl.Int64, "outcome": pl.String, "event": pl.Int8,
                                "time_years": pl.Float64, "prevalent": pl.Boolean,
                                "source": pl.String, "event_date": pl.Date})


def _gathered(collector: LinkedCollector) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(events, first records of any code) over every block the collector read."""
    import polars as pl

    date_schema = {"eid": pl.Int64, "source": pl.String, "date": pl.Date}
    events = (pl.concat(collector.events) if collector.events else
              pl.DataFrame(schema={"eid": pl.Int64, "outcome": pl.String, **date_schema}))
    any_records = (pl.concat(collector.any_records) if collector.any_records
                   else pl.DataFrame(schema=date_schema))
    return events, any_records


#: an outcome as built: its definition, the sources the export has, the censoring date per
#: country (the earliest of those sources' dates)
Built = tuple[Outcome, list[str], dict[str, dt.date]]


def _first_records(built: list[Built], events: pl.DataFrame,
                   any_records: pl.DataFrame) -> pl.DataFrame:
    """(eid, outcome, first_source, first_date): each participant's first record per outcome,
    from the outcome's sources only; on one day, the source earlier in :data:`SOURCES`."""
    import polars as pl

    # every outcome's candidate records in one frame, then each participant's first per outcome
    allowed = pl.DataFrame([(o.name, s) for o, used, _ in built for s in used],
                           schema={"outcome": pl.String, "source": pl.String}, orient="row")
    coded = [o.name for o, _, _ in built if o.has_codes]
    any_of = pl.DataFrame([(o.name, s) for o, used, _ in built if not o.has_codes
                           for s in used],
                          schema={"outcome": pl.String, "source": pl.String}, orient="row")
    cand = pl.concat([
        events.filter(pl.col("outcome").is_in(coded)).join(allowed, on=["outcome", "source"]),
        any_records.join(any_of, on="source").select("eid", "outcome", "source", "date"),
    ])
    priority = {s: i for i, s in enumerate(SOURCES)}
    return (cand.with_columns(prio=pl.col("source").replace_strict(priority,
                                                                   return_dtype=pl.Int8))
            .sort("outcome", "eid", "date", "prio")
            .unique(["outcome", "eid"], keep="first", maintain_order=True)
            .select("eid", "outcome", pl.col("source").alias("first_source"),
                    pl.col("date").alias("first_date")))


def _follow_up(base: pl.DataFrame, built: list[Built], first: pl.DataFrame) -> pl.DataFrame:
    """Every participant x outcome with ``prevalent``, ``event`` (incident, before censoring,
    loss to follow-up and death), ``end`` and ``time_years``. ``base``: eid, baseline_date,
    country, death_date, lost_date."""
    import polars as pl

    table = pl.DataFrame(
        [(o.name, i, country, censor[country]) for i, (o, _, censor) in enumerate(built)
         for country in COUNTRIES],
        schema={"outcome": pl.String, "_order": pl.Int16, "country": pl.String,
                "censor": pl.Date}, orient="row")
    f = base.join(table, on="country").join(first, on=["eid", "outcome"], how="left")
    has = pl.col("first_date").is_not_null()
    prevalent = has & (pl.col("first_date") <= pl.col("baseline_date"))
    end = pl.min_horizontal("censor", "death_date", "lost_date")
    f = f.with_columns(prevalent=prevalent, end=end)
    event = has & ~pl.col("prevalent") & (pl.col("first_date") <= pl.col("end"))
    days = (pl.when(pl.col("prevalent")).then(pl.lit(0))
            .when(pl.col("event")).then((pl.col("first_date") - pl.col("baseline_date"))
                                        .dt.total_days())
            .otherwise((pl.col("end") - pl.col("baseline_date")).dt.total_days()))
    return f.with_columns(event=event).with_columns(
        time_years=pl.max_horizontal(days, 0).cast(pl.Float64) / DAYS_PER_YEAR)


def _follow_up_stats(f: pl.DataFrame) -> tuple[dict[str, dict], dict[str, dict[str, int]]]:
    """(counts per outcome, events per outcome and first source): what the report says about
    each outcome's censoring, so a wrong censoring date shows."""
    import polars as pl

    has = pl.col("first_date").is_not_null()
    incident = has & ~pl.col("prevalent")
    censored = ~pl.col("event") & ~pl.col("prevalent")
    stats = f.group_by("outcome").agg(
        participants=pl.len(), prevalent=pl.col("prevalent").sum(), events=pl.col("event").sum(),
        after_censoring=(incident & (pl.col("first_date") > pl.col("censor"))).sum(),
        censored_at_death=(censored & (pl.col("end") == pl.col("death_date"))
                           & (pl.col("death_date") < pl.col("censor"))).sum(),
        after_death=(incident & (pl.col("first_date") > pl.col("death_date"))).sum(),
        censored_lost_to_follow_up=(censored & (pl.col("end") == pl.col("lost_date"))
                                    & (pl.col("lost_date") < pl.col("censor"))).sum(),
        after_lost_to_follow_up=(incident & (pl.col("first_date") > pl.col("lost_date"))).sum(),
        censoring_before_baseline=(~pl.col("prevalent")
                                   & (pl.col("end") < pl.col("baseline_date"))).sum(),
    )
    stats = {r.pop("outcome"): r for r in stats.iter_rows(named=True)}
    sources = (f.filter(pl.col("event")).group_by("outcome", "first_source").len()
               .iter_rows())
    first_source: dict[str, dict[str, int]] = {}
    for name, source, count in sources:
        first_source.setdefault(name, {})[source] = int(count)
    return stats, first_source


def _participants(baseline: pl.DataFrame, collector: LinkedCollector
                  ) -> tuple[pl.DataFrame, dict[str, Any]]:
    """eid, baseline_date, country, death_date, lost_date of every participant with a baseline
    date, and what the report says about them (country, centre, loss to follow-up)."""
    import polars as pl

    deaths = (pl.concat(collector.deaths).group_by("eid").agg(pl.col("death_date").min())
              if collector.deaths else pl.DataFrame(schema={"eid": pl.Int64,
                                                            "death_date": pl.Date}))
    lost = (pl.concat(collector.lost).group_by("eid").agg(pl.col("lost_date").min())
            if collector.lost else pl.DataFrame(schema={"eid": pl.Int64, "lost_date": pl.Date}))
    countries = (pl.concat(collector.countries).unique("eid", keep="first")
                 if collector.countries else pl.DataFrame(schema={"eid": pl.Int64,
                                                                  "country": pl.String}))
    base = baseline.select("eid", pl.col("assessment_date").alias("baseline_date"))
    no_date = int(base["baseline_date"].null_count())
    base = (base.filter(pl.col("baseline_date").is_not_null())
            .join(deaths, on="eid", how="left").join(lost, on="eid", how="left")
            .join(countries, on="eid", how="left"))
    without = int(base["country"].null_count())
    # a participant without a centre is followed as in England, the country of most
    base = base.with_columns(pl.col("country").fill_null("england"))
    report = {
        "participants_without_baseline_date": no_date,
        "deaths": int(base["death_date"].is_not_null().sum()),
        "assessment_centre_read": collector.plan.centre is not None,
        "participants_by_country": {c: int((base["country"] == c).sum()) for c in COUNTRIES},
        "participants_without_centre": without,
        "lost_to_follow_up_read": collector.plan.lost is not None,
        "lost_to_follow_up": int(base["lost_date"].is_not_null().sum()),
    }
    return base, report


def build_outcomes(baseline: pl.DataFrame, collector: LinkedCollector
                   ) -> tuple[pl.DataFrame, dict]:
    """One row per participant (of ``baseline``: eid, assessment_date) and outcome, and the
    outcome part of the ingest report."""

    collector.flush()
    config, plan = collector.config, collector.plan
    present = plan.sources
    events, any_records = _gathered(collector)
    base, people = _participants(baseline, collector)

    built: list[Built] = []
    skipped = {}
    for o in config.outcomes:
        used = [s for s in o.sources if s in present]
        if used:
            built.append((o, used, {c: min(config.censoring_date(s, c) for s in used)
                                    for c in COUNTRIES}))
        else:
            skipped[o.name] = f"none of its sources ({', '.join(o.sources)}) is in the export"
    report: dict[str, Any] = {
        "written": bool(built), "sources_present": list(present),
        "sources_missing": [s for s in SOURCES if s not in present],
        "censoring_dates": _censoring_report(config), **people,
        "first_occurrence_fields_read": {code: f.id for code, f in
                                         plan.first_occurrence.values()},
        "algorithmic_fields_read": {name: f.id for name, f in plan.algorithmic.values()},
        # values of the "source of report" fields as the export writes them (codes or labels)
        "reported_by": {k: dict(v) for k, v in collector.reported_by.items()},
        "codes_read": {s: collector.codes_read[s] for s in present if collector.codes_read[s]},
        "codes_outside_every_outcome": {s: collector.codes_outside[s] for s in present
                                        if collector.codes_outside[s]},
        "most_common_codes_outside": dict(collector.outside_categories.most_common(15)),
        "codes_without_date": {s: collector.undated[s] for s in present
                               if collector.undated[s]},
        "special_dates": {k: dict(v) for k, v in collector.special_dates.items()},
        "by_outcome": {}, "outcomes_not_built": skipped,
    }
    if not built:
        return empty_outcomes(), report
    f = _follow_up(base, built, _first_records(built, events, any_records))
    out = _outcome_rows(f)
    report["by_outcome"] = _by_outcome(f, out, built, present, plan, config)
    return out, report


def _outcome_rows(f: pl.DataFrame) -> pl.DataFrame:
    """outcomes.parquet's rows. ``event`` in ``f`` is an incident event; in the table a
    prevalent row has event 1 (the participant has the disease) and time 0, so it is never
    taken for an event-free one."""
    import polars as pl

    shown = pl.col("event") | pl.col("prevalent")
    return f.sort("eid", "_order").select(
        "eid", "outcome", shown.cast(pl.Int8).alias("event"), "time_years", "prevalent",
        pl.when(shown).then(pl.col("first_source")).alias("source"),
        pl.when(shown).then(pl.col("first_date")).alias("event_date"))


def _by_outcome(f: pl.DataFrame, out: pl.DataFrame, built: list[Built], present: tuple[str, ...],
                plan: LinkedPlan, config: OutcomeConfig) -> dict[str, dict]:
    import polars as pl

    from sphr.survival import km_cumulative

    stats, first_source = _follow_up_stats(f)
    fo_codes = {code for code, _ in plan.first_occurrence.values()}
    result = {}
    for o, used, censor in built:
        rows = out.filter((pl.col("outcome") == o.name) & ~pl.col("prevalent"))
        entry = {
            **{k: int(v or 0) for k, v in stats[o.name].items()},
            "censoring_date": {c: d.isoformat() for c, d in censor.items()},
            "sources_used": used,
            "sources_missing": [s for s in o.sources if s not in present],
            "first_event_source": {s: first_source.get(o.name, {}).get(s, 0) for s in used},
            "cumulative_incidence_10y": round(km_cumulative(
                rows["time_years"].to_numpy(), rows["event"].to_numpy().astype(bool), 10.0), 4),
        }
        if "first_occurrence" in o.sources:
            # the categories of the set that have a known field, read or not
            known = [c for c in config.first_occurrence_fields if o.matches(c)]
            entry["first_occurrence_codes"] = {"read": sorted(c for c in known if c in fo_codes),
                                               "not_in_export": sorted(c for c in known
                                                                       if c not in fo_codes)}
        result[o.name] = entry
    return result


def _censoring_report(config: OutcomeConfig) -> dict:
    return {s: {"date": c.date.isoformat(),
                "dates": {country: d.isoformat() for country, d in c.dates.items()},
                "provider": c.provider, "reference": c.reference}
            for s, c in config.censoring.items()}


def no_outcomes_report(config: OutcomeConfig) -> dict:
    return {
        "written": False,
        "why": "the export has none of the linked fields (hospital 41270 + 41280 or 41271 + "
               "41281, cancer registry 40006 + 40005, death registry 40000 [+ 40001, 40002], "
               "First Occurrences (category 1712), algorithmically-defined outcomes (category "
               "42))",
        "sources_present": [], "sources_missing": list(SOURCES),
        "censoring_dates": _censoring_report(config),
    }
