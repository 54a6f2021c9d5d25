"""One block's records per linked source, as (row, source, coding, code, date) tables:

* hospital inpatient diagnoses: ICD-10 (41270 with the dates 41280) and ICD-9 (41271 with
  41281), paired by array index (:func:`hospital_records`);
* cancer registry: one registration per instance, 40006 with its date 40005
  (:func:`cancer_registry_records`);
* First Occurrences (category 1712) and the algorithmically-defined outcomes (category 42):
  one date per field (:func:`first_occurrence_records`, :func:`algorithmic_records`);
* death registry: the date of death 40000 and its underlying and contributory causes
  (:func:`death_registry`).

The participant-level fields that end follow-up (assessment centre, lost to follow-up) are
read by :mod:`sphr.data.outcomes.followup`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

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
from sphr.data.outcomes.cells import LinkedCells
from sphr.data.outcomes.plan import LinkedPlan

if TYPE_CHECKING:  # polars loads on use
    import polars as pl


def coded_and_dated(cells: LinkedCells, df: pl.DataFrame, first_row: int, source: str,
                    code_cols: dict[str, int], code_field: Field, date_cols: dict[str, int],
                    date_field: Field, *, aligned_codes: bool,
                    coding: str = "icd10") -> pl.DataFrame:
    """(row, source, coding, code, date) of a source whose codes and dates are separate
    fields, paired by array index (hospital: 41270/41280, 41271/41281; cancer registry:
    40006/40005)."""
    import polars as pl

    codes = cells.codes(cells.long(df, code_cols, code_field, first_row,
                                   aligned=aligned_codes), code_field, first_row, coding)
    dates = cells.dates(cells.long(df, date_cols, date_field, first_row, aligned=True),
                        date_field, first_row)
    # (row, pos) is unique: one date column per array index, or one list column
    paired = codes.join(dates.select("row", "pos", "date"), on=["row", "pos"], how="left")
    return paired.select("row", pl.lit(source).alias("source"),
                         pl.lit(coding).alias("coding"), "code", "date")


def hospital_records(cells: LinkedCells, df: pl.DataFrame, first_row: int,
                     plan: LinkedPlan) -> list[pl.DataFrame]:
    """Hospital inpatient records: ICD-10 diagnoses, then ICD-9 ones (each only with its
    dates)."""
    records = []
    if plan.hospital_codes and plan.hospital_dates:
        records.append(coded_and_dated(
            cells, df, first_row, "hospital", plan.hospital_codes, HOSPITAL_DIAGNOSES,
            plan.hospital_dates, HOSPITAL_DATES, aligned_codes=True))
    if plan.icd9_codes and plan.icd9_dates:
        records.append(coded_and_dated(
            cells, df, first_row, "hospital", plan.icd9_codes, HOSPITAL_ICD9,
            plan.icd9_dates, HOSPITAL_ICD9_DATES, aligned_codes=True, coding="icd9"))
    return records


def cancer_registry_records(cells: LinkedCells, df: pl.DataFrame, first_row: int,
                            plan: LinkedPlan) -> list[pl.DataFrame]:
    """Cancer registrations: the code of each instance with that instance's date."""
    if "cancer_registry" not in plan.sources:
        return []
    return [coded_and_dated(cells, df, first_row, "cancer_registry", plan.cancer_codes,
                            CANCER_TYPE, plan.cancer_dates, CANCER_DATE, aligned_codes=False)]


def dated_fields(cells: LinkedCells, df: pl.DataFrame, first_row: int, source: str,
                 coding: str, cols: dict[str, tuple[str, Field]]) -> list[pl.DataFrame]:
    """(row, source, coding, code, date) of fields that are one date each: a First
    Occurrence (its code is the field's ICD-10 category) or an algorithmically-defined
    outcome (its code is the outcome's name)."""
    import polars as pl

    out = []
    for col, (code, f) in cols.items():
        dates = cells.dates(cells.long(df, {col: 0}, f, first_row, aligned=True), f,
                            first_row)
        out.append(dates.select("row", source=pl.lit(source), coding=pl.lit(coding),
                                code=pl.lit(code), date=pl.col("date")))
    return out


def first_occurrence_records(cells: LinkedCells, df: pl.DataFrame, first_row: int,
                             plan: LinkedPlan) -> list[pl.DataFrame]:
    """First Occurrences (category 1712): the date each 3-character ICD-10 code was first
    reported in any source."""
    return dated_fields(cells, df, first_row, "first_occurrence", "icd10",
                        plan.first_occurrence)


def algorithmic_records(cells: LinkedCells, df: pl.DataFrame, first_row: int,
                        plan: LinkedPlan) -> list[pl.DataFrame]:
    """Algorithmically-defined outcomes (category 42): myocardial infarction, stroke, ..."""
    return dated_fields(cells, df, first_row, "algorithmic", "algorithm", plan.algorithmic)


@dataclass
class DeathRegistry:
    """One block of the death registry."""

    #: eid, death_date: each participant's date of death (the first, if registered twice)
    deaths: pl.DataFrame
    #: eid, source, date: the date of death as a record of any code (all-cause death)
    any_record: pl.DataFrame
    #: the causes of death as records (row, source, coding, code, date)
    causes: list[pl.DataFrame]


def _death_dates(cells: LinkedCells, df: pl.DataFrame, first_row: int,
                 plan: LinkedPlan) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(row, pos, date) per registration and (row, death_date): the first of them."""
    import polars as pl

    dates = cells.dates(cells.long(df, plan.death_dates, DEATH_DATE, first_row,
                                   aligned=True), DEATH_DATE, first_row)
    per_instance = dates.select("row", "pos", "date")
    # a death registered twice (instances 0 and 1) is one death: its first date
    death = per_instance.group_by("row").agg(death_date=pl.col("date").min())
    return per_instance, death


def death_registry(cells: LinkedCells, df: pl.DataFrame, rows: pl.DataFrame, first_row: int,
                   plan: LinkedPlan) -> DeathRegistry:
    """The dates of death and the causes, each cause dated on its registration's date."""
    import polars as pl

    per_instance, death = _death_dates(cells, df, first_row, plan)
    deaths = (death.join(rows, on="row").filter(pl.col("death_date").is_not_null())
              .select("eid", "death_date"))
    causes = []
    for f, cols in ((DEATH_UNDERLYING, plan.death_underlying),
                    (DEATH_CONTRIBUTORY, plan.death_contributory)):
        if not cols:
            continue
        coded = cells.codes(cells.long(df, cols, f, first_row, aligned=False), f, first_row)
        # a cause is recorded on the date of death of its registration (instance)
        coded = (coded.join(per_instance, on=["row", "pos"], how="left")
                 .join(death, on="row", how="left")
                 .with_columns(date=pl.coalesce("date", "death_date")))
        causes.append(coded.select("row", pl.lit("death").alias("source"),
                                   pl.lit("icd10").alias("coding"), "code", "date"))
    any_record = (death.join(rows, on="row").select(
        "eid", pl.lit("death").alias("source"), pl.col("death_date").alias("date"))
        .filter(pl.col("date").is_not_null()))
    return DeathRegistry(deaths, any_record, causes)
