"""The synthetic export's follow-up fields: assessment centre, date lost to follow-up, and the
derived outcome fields (First Occurrences, category 1712; algorithmically-defined outcomes,
category 42), so that the demo exercises per-person censoring and every outcome source.

* **assessment centre** (54, instance 0): Scottish centres for ~7% of participants (Edinburgh,
  Glasgow), Welsh for ~4% (Cardiff, Swansea, Wrexham), the English centres for the rest: 11%
  outside England, as in UK Biobank (445,985 of ~502,000 resident in England);
* **date lost to follow-up** (191): 0.26% of participants (UK Biobank: ~1,300 of 502,000),
  uniformly between baseline and the earlier of their death and 2022-10-31;
* **First Occurrences** of the categories the built-in outcomes use (E10-E14, I20-I25,
  I60-I64): the earliest dated hospital or death record of that category, so they agree with
  the hospital and death records (no primary care or self-report here), with a "source of
  report" value (UK Biobank's coding 2171 as we read it: 20 death register only, 40 hospital
  admissions only, 21/41 with another source);
* **algorithmically-defined** myocardial infarction (42000: I21-I23) and stroke (42006: I60, I61,
  I63, I64), the earliest such hospital or death record, source 1.

Everything random comes from a stream of its own (``[seed, FOLLOW_UP_STREAM]``, the cohort's
seed) and is drawn after everything else: every other column of an export is unchanged, except
the decoy assessment centre 54-0.0, whose values this replaces (its other instances stay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from sphr.data.fields import (
    ALGORITHMIC,
    ASSESSMENT_CENTRE,
    CENTRE_CODING,
    CENTRE_COUNTRY,
    FIRST_OCCURRENCE,
    LOST_TO_FOLLOW_UP,
    Field,
    algorithmic_fields,
    first_occurrence_fields,
)
from sphr.data.headers import ColumnKey

if TYPE_CHECKING:
    import pandas as pd

#: key of the follow-up fields' random stream (the field id of "date lost to follow-up")
FOLLOW_UP_STREAM = 191
SCOTLAND_SHARE = 0.07
WALES_SHARE = 0.04
LOST_SHARE = 0.0026
LOST_BY = np.datetime64("2022-10-31")
#: 3-character ICD-10 codes of the category 42 outcomes the generator writes
ALGORITHMIC_CODES: dict[str, tuple[str, ...]] = {
    "myocardial_infarction": ("I21", "I22", "I23"),
    "stroke": ("I60", "I61", "I63", "I64"),
}
_PLACEHOLDER = np.datetime64("1900-01-01")


def _centres(rng: np.random.Generator, n: int) -> np.ndarray:
    """A baseline centre (coding 10) per participant."""
    by_country: dict[str, list[int]] = {}
    for code, country in CENTRE_COUNTRY.items():
        if code not in (10003, 11024, 11025, 11026, 11027, 11028):  # pilot, revisits, imaging
            by_country.setdefault(country, []).append(code)
    u = rng.random(n)
    country = np.where(u < SCOTLAND_SHARE, "scotland",
                       np.where(u < SCOTLAND_SHARE + WALES_SHARE, "wales", "england"))
    out = np.empty(n, np.int64)
    for name, codes in by_country.items():
        rows = np.flatnonzero(country == name)
        out[rows] = rng.choice(np.array(sorted(codes)), rows.shape[0])
    return out


class _First:
    """Per participant, for one 3-character code: the earliest dated hospital or death record,
    whether it came from the death registry, and whether each kind of record has the code."""

    def __init__(self, n: int) -> None:
        self.date = np.full(n, np.datetime64("NaT"), "M8[D]")
        self.from_death = np.zeros(n, bool)
        self.in_hospital = np.zeros(n, bool)
        self.in_death = np.zeros(n, bool)


def _first_dates(linked: pd.DataFrame, eid: np.ndarray) -> dict[str, _First]:
    recs = linked.loc[linked["source"].isin(["hospital", "death_underlying",
                                             "death_contributory"])
                      & linked["code"].notna()]
    recs = recs.loc[recs["date"].to_numpy().astype("M8[D]") != _PLACEHOLDER]
    cat = recs["code"].str.slice(0, 3).to_numpy(str)
    rows = np.searchsorted(eid, recs["eid"].to_numpy())
    dates = recs["date"].to_numpy().astype("M8[D]")
    death = recs["source"].to_numpy(str) != "hospital"
    out = {}
    for code in {*FIRST_OCCURRENCE, *(c for cs in ALGORITHMIC_CODES.values() for c in cs)}:
        first = _First(eid.shape[0])
        pick = np.flatnonzero(cat == code)
        # the latest first, so that the earliest is written last; on a tie hospital wins
        order = pick[np.lexsort((~death[pick], dates[pick]))[::-1]]
        first.date[rows[order]] = dates[order]
        first.from_death[rows[order]] = death[order]
        first.in_hospital[rows[pick[~death[pick]]]] = True
        first.in_death[rows[pick[death[pick]]]] = True
        out[code] = first
    return out


def _date_series(values: np.ndarray) -> pl.Series:
    return pl.Series(values.astype("M8[D]"))


def _code_series(values: np.ndarray, present: np.ndarray) -> pl.Series:
    return pl.Series(np.where(present, values, 0)).cast(pl.Int64).set(
        pl.Series(~present), None)


def _derived(linked: pd.DataFrame, eid: np.ndarray) -> list[tuple[ColumnKey, pl.Series, Field]]:
    """First Occurrence and category 42 columns that agree with the linked records."""
    first = _first_dates(linked, eid)
    out: list[tuple[ColumnKey, pl.Series, Field]] = []
    for code, fid in FIRST_OCCURRENCE.items():
        f = first[code]
        has = ~np.isnat(f.date)
        other = np.where(f.from_death, f.in_hospital, f.in_death)
        report = np.where(f.from_death, 20, 40) + other
        date_f, source_f = first_occurrence_fields(code, fid)
        out.append((ColumnKey(fid, 0, 0), _date_series(f.date), date_f))
        out.append((ColumnKey(fid + 1, 0, 0), _code_series(report, has), source_f))
    for name, codes in ALGORITHMIC_CODES.items():
        fid, title = ALGORITHMIC[name]
        stack = np.stack([first[c].date for c in codes])
        far = np.datetime64("2200-01-01")
        earliest = np.where(np.isnat(stack), far, stack).min(axis=0)
        dates = np.where(earliest == far, np.datetime64("NaT"), earliest).astype("M8[D]")
        date_f, source_f = algorithmic_fields(title, fid)
        out.append((ColumnKey(fid, 0, 0), _date_series(dates), date_f))
        out.append((ColumnKey(fid + 1, 0, 0),
                    _code_series(np.ones(eid.shape[0], int), ~np.isnat(dates)), source_f))
    return out


def follow_up_columns(linked: pd.DataFrame, baseline: np.ndarray, eid: np.ndarray, seed: int,
                      labels: bool) -> list[tuple[ColumnKey, pl.Series, Field]]:
    """The assessment centre (54-0.0), date lost to follow-up (191) and the derived outcome
    columns of ``eid`` (sorted), whose baseline dates are ``baseline``."""
    rng = np.random.default_rng([seed, FOLLOW_UP_STREAM])
    n = eid.shape[0]
    centre = _centres(rng, n)
    centre_series = (pl.Series([CENTRE_CODING[c] for c in centre], dtype=pl.String) if labels
                     else pl.Series(centre, dtype=pl.Int64))
    lost = rng.random(n) < LOST_SHARE
    deaths = linked.loc[linked["source"] == "death"]
    end = np.full(n, LOST_BY, "M8[D]")
    rows = np.searchsorted(eid, deaths["eid"].to_numpy())
    end[rows] = np.minimum(end[rows], deaths["date"].to_numpy().astype("M8[D]"))
    base = baseline.astype("M8[D]")
    span = np.maximum((end - base).astype(np.int64), 1)
    when = base + np.floor(rng.random(n) * span).astype(np.int64).astype("timedelta64[D]") + 1
    lost &= end > base
    return [
        (ColumnKey(ASSESSMENT_CENTRE.id, 0, 0), centre_series, ASSESSMENT_CENTRE),
        (ColumnKey(LOST_TO_FOLLOW_UP.id, 0, 0),
         _date_series(np.where(lost, when, np.datetime64("NaT"))), LOST_TO_FOLLOW_UP),
        *_derived(linked, eid),
    ]
