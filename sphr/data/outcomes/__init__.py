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

The package's parts: the outcome table (:mod:`.definitions`), the censoring dates
(:mod:`.censoring`), the run's configuration and its JSON override (:mod:`.config`), which
linked columns an export has (:mod:`.plan`), the cells of those columns (:mod:`.cells`), one
reader per source (:mod:`.sources`: hospital ICD-10 / ICD-9, cancer registry, First
Occurrences, category 42, death registry), the reader's side hook (:mod:`.collector`), each
participant's follow-up (:mod:`.followup`) and ``outcomes.parquet`` (:mod:`.build`).
"""

from sphr.data.outcomes.build import (
    OUTCOME_COLUMNS,
    build_outcomes,
    empty_outcomes,
    no_outcomes_report,
)
from sphr.data.outcomes.censoring import CENSORING, CensoringDate
from sphr.data.outcomes.collector import LinkedCollector
from sphr.data.outcomes.config import OutcomeConfig, load_outcome_config
from sphr.data.outcomes.definitions import (
    CODINGS,
    COUNTRIES,
    DAYS_PER_YEAR,
    OUTCOMES,
    SOURCES,
    SPECIAL_DATES,
    Outcome,
)
from sphr.data.outcomes.plan import LinkedPlan, plan_linked

__all__ = [
    "CENSORING", "CODINGS", "COUNTRIES", "DAYS_PER_YEAR", "OUTCOMES", "OUTCOME_COLUMNS",
    "SOURCES", "SPECIAL_DATES", "CensoringDate", "LinkedCollector", "LinkedPlan", "Outcome",
    "OutcomeConfig", "build_outcomes", "empty_outcomes", "load_outcome_config",
    "no_outcomes_report", "plan_linked",
]
