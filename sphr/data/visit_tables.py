"""The ingest's two per-visit tables: ``baseline.parquet`` (instance 0: predictors,
conditions, medication flags and the label) and ``followup.parquet`` (later visits' conditions
and new diagnoses), from the decoded columns (:func:`sphr.data.decode.decode`)."""

from __future__ import annotations

import polars as pl

from sphr.data.decode import column_name
from sphr.data.export_layout import ExportLayout
from sphr.data.fields import (
    ASSESSMENT_DATE,
    CONDITIONS,
    FASTING_TIME,
    MEDICATION_MEN,
    MEDICATION_WOMEN,
    PREDICTORS,
    SEX,
    Field,
)
from sphr.data.headers import ColumnKey

LABELS = ("unhealthy", "apparently_healthy", "unknown")
_MEDICATION_FLAGS = {1: "cholesterol_medication", 2: "blood_pressure_medication", 3: "insulin"}


def _medication(frame: pl.DataFrame) -> pl.DataFrame:
    """Answered?, and the three condition-medication flags, from the participant's sex's field.

    6177 is asked of men, 6153 of women. -7 "none of the above" is an answer; -1 and -3
    were already nulled, so a participant with no code left did not answer.
    """
    def columns(f: Field) -> list[pl.Expr]:
        # the frame's, not the layout's: a RAP list column (p6177_i0) becomes several
        return [pl.col(c) for c in frame.columns if c.startswith(f"{f.id}-0.")]

    def any_of(cols: list[pl.Expr], test) -> pl.Expr:
        return pl.any_horizontal([test(c) for c in cols]) if cols else pl.lit(False)

    men, women = columns(MEDICATION_MEN), columns(MEDICATION_WOMEN)
    male = pl.col("sex") == 1
    answered = pl.when(male).then(any_of(men, lambda c: c.is_not_null())).otherwise(
        any_of(women, lambda c: c.is_not_null()))
    flags = {
        name: pl.when(answered).then(
            pl.when(male).then(any_of(men, lambda c, k=code: (c == k).fill_null(False)))
            .otherwise(any_of(women, lambda c, k=code: (c == k).fill_null(False))))
        for code, name in _MEDICATION_FLAGS.items()
    }
    return frame.with_columns(medication_answered=answered, **flags)


def build_baseline(frame: pl.DataFrame, layout: ExportLayout) -> pl.DataFrame:
    cond = {f.name: pl.col(column_name(ColumnKey(f.id, 0, 0))).cast(pl.Int8) for f in CONDITIONS}
    base = frame.select(
        "eid",
        pl.col(column_name(ColumnKey(SEX.id, 0, 0))).cast(pl.Int8).alias("sex"),
        pl.col(column_name(ColumnKey(ASSESSMENT_DATE.id, 0, 0))).alias("assessment_date"),
        *[(pl.col(column_name(ColumnKey(f.id, 0, 0))) if ColumnKey(f.id, 0, 0) in layout.columns
           else pl.lit(None, pl.Float64)).cast(pl.Float64).alias(f.name) for f in PREDICTORS],
        *[expr.alias(name) for name, expr in cond.items()],
        *[pl.col(c) for c in frame.columns if c.startswith(("6177-0.", "6153-0."))],
        (pl.col(column_name(ColumnKey(FASTING_TIME.id, 0, 0))).cast(pl.Float64)
         if ColumnKey(FASTING_TIME.id, 0, 0) in layout.columns
         else pl.lit(None, pl.Float64)).alias("fasting_time"),
    )
    base = _medication(base)
    any_condition = pl.any_horizontal([pl.col(n) == 1 for n in cond])
    medicated = pl.any_horizontal([pl.col(v).fill_null(False) for v in _MEDICATION_FLAGS.values()])
    all_answered = pl.all_horizontal([pl.col(n).is_not_null() for n in cond]) & pl.col(
        "medication_answered")
    label = (pl.when(any_condition.fill_null(False) | medicated).then(pl.lit("unhealthy"))
             .when(all_answered).then(pl.lit("apparently_healthy"))
             .otherwise(pl.lit("unknown")))
    base = base.with_columns(label=label)
    return base.select(
        "eid", "sex", "assessment_date", *[f.name for f in PREDICTORS], *cond,
        *_MEDICATION_FLAGS.values(), "fasting_time", "label", "medication_answered")


def build_followup(frame: pl.DataFrame, layout: ExportLayout) -> pl.DataFrame:
    parts = []
    date0 = pl.col(column_name(ColumnKey(ASSESSMENT_DATE.id, 0, 0)))
    for inst in (i for i in layout.instances(ASSESSMENT_DATE.id) if i > 0):
        date = pl.col(column_name(ColumnKey(ASSESSMENT_DATE.id, inst, 0)))
        sex = pl.col(column_name(ColumnKey(SEX.id, 0, 0))).cast(pl.Int8)
        exprs = [pl.col("eid"), sex.alias("sex"),
                 pl.lit(inst, pl.Int8).alias("instance"), date.alias("assessment_date"),
                 ((date - date0).dt.total_days() / 365.25).alias("years_since_baseline")]
        for f in CONDITIONS:
            now_key = ColumnKey(f.id, inst, 0)
            now = (pl.col(column_name(now_key)) if now_key in layout.columns
                   else pl.lit(None, pl.Int64)).cast(pl.Int8)
            before = pl.col(column_name(ColumnKey(f.id, 0, 0)))
            exprs += [now.alias(f.name),
                      pl.when(now.is_not_null() & before.is_not_null())
                      .then((now == 1) & (before == 0)).alias(f"new_{f.name}")]
        parts.append(frame.filter(date.is_not_null()).select(exprs))
    if not parts:
        return pl.DataFrame(schema={"eid": pl.Int64, "sex": pl.Int8, "instance": pl.Int8,
                                    "assessment_date": pl.Date, "years_since_baseline": pl.Float64,
                                    **{f.name: pl.Int8 for f in CONDITIONS},
                                    **{f"new_{f.name}": pl.Boolean for f in CONDITIONS}})
    return pl.concat(parts).sort("eid", "instance")
