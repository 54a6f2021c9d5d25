"""The outcome table: which ICD-10 / ICD-9 codes (and category 42 outcomes) mean which outcome,
the sources that may record each, and UK Biobank's coding patterns and placeholder dates
(docs/OUTCOMES.md gives the reasons and sources)."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from sphr.data.fields import (
    CANCER_DATE,
    CANCER_TYPE,
    DEATH_CONTRIBUTORY,
    DEATH_DATE,
    DEATH_UNDERLYING,
    HOSPITAL_DATES,
    HOSPITAL_DIAGNOSES,
    HOSPITAL_ICD9,
    HOSPITAL_ICD9_DATES,
    Field,
)
from sphr.errors import ConfigError

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
PATTERN = {"icd10": (_ICD10, "an ICD-10 code (expected e.g. 'E119', 'E11.9' or 'E11.9 <title>')"),
            "icd9": (_ICD9, "an ICD-9 code (expected e.g. '4109', '410.9' or '4109 <title>')")}


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


def _normalize_spec(spec: str) -> str:
    return spec.strip().upper().replace(".", "")


def _in_spec(code: str, spec: str) -> bool:
    lo, _, hi = spec.partition("-")
    hi = hi or lo
    return lo <= code[: len(lo)] <= hi


def check_spec(spec: Any, where: str, coding: str = "icd10") -> str:
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
