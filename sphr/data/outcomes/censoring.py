"""Censoring: the date up to which each source's records are complete, per country of the
participant's assessment centre (UK Biobank's "Data providers and dates of data availability";
docs/OUTCOMES.md, "Censoring"), and the override that sets the dates of another release."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sphr.data.outcomes.definitions import COUNTRIES, SOURCES
from sphr.errors import ConfigError

_UKB_DATES = "https://biobank.ndph.ox.ac.uk/showcase/exinfo.cgi?src=Data_providers_and_dates"


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


def _as_date(value: Any, where: str) -> dt.date:
    if isinstance(value, dt.date):
        return value
    try:
        return dt.date.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"{where}: {value!r} is not a date (YYYY-MM-DD)") from None


def censoring_override(source: Any, value: Any) -> CensoringDate:
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


def censoring_report(censoring: dict[str, CensoringDate]) -> dict:
    """Each source's censoring dates as the ingest report states them."""
    return {s: {"date": c.date.isoformat(),
                "dates": {country: d.isoformat() for country, d in c.dates.items()},
                "provider": c.provider, "reference": c.reference}
            for s, c in censoring.items()}
