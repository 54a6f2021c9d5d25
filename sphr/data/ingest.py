"""``sphr ingest``: a UK Biobank export in, ``baseline.parquet`` + ``followup.parquet`` out,
and ``outcomes.parquet`` when the export has linked health records (:mod:`sphr.data.outcomes`).

Baseline values are instance 0 only. A later visit never fills a baseline gap
(taking "the last non-null instance" silently mixes visits). Special negative
codes become null and are counted per column; an unknown code or label, a
non-numeric value, bytes that are not UTF-8, a duplicate eid, a ragged or
cut-off row each stop the ingest with one message naming the file, field and row.

A number no person can have (outside its field's plausible range in the catalog,
e.g. age outside 18-110 or a negative concentration, or inf/NaN) becomes missing,
is logged, and is counted per field with its rule and first rows and eids in
``implausible_values`` of the report (docs/INGEST.md). It does not stop the run: one
bad lab value in 500,000 rows should not stop everyone's run, while a participant
whose value became missing shows up downstream as incomplete, not as a wrong number.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pyarrow as pa

from sphr.data.fields import (
    ASSESSMENT_DATE,
    CONDITIONS,
    FASTING_TIME,
    MEDICATION_MEN,
    MEDICATION_WOMEN,
    PREDICTORS,
    SEX,
    SPECIAL_CODES,
    Field,
)
from sphr.data.headers import ColumnKey, ListCellError, is_list_cell, split_list_cells
from sphr.data.outcomes import (
    LinkedCollector,
    OutcomeConfig,
    build_outcomes,
    no_outcomes_report,
    plan_linked,
)
from sphr.data.reader import ExportLayout, inspect_export, read_columns
from sphr.errors import InputError
from sphr.io import staged_outputs, write_json, write_parquet

log = logging.getLogger(__name__)

LABELS = ("unhealthy", "apparently_healthy", "unknown")
#: fields without which no label or split can be made
REQUIRED: tuple[Field, ...] = (SEX, ASSESSMENT_DATE, *CONDITIONS)
AGE = next(f for f in PREDICTORS if f.name == "age")
_MEDICATION_FLAGS = {1: "cholesterol_medication", 2: "blood_pressure_medication", 3: "insulin"}
#: rows and eids of implausible values kept per field in the report (the count has them all)
FIRST_SHOWN = 5
#: -7 "none of the above" answers a multiple-choice question; the other special codes do not
ANSWERED_NONE = -7
#: value types whose numbers must be plausible (:func:`plausibility`)
_CHECKED = ("continuous", "integer")


@dataclass
class IngestResult:
    baseline: pl.DataFrame
    followup: pl.DataFrame
    report: dict
    #: one row per participant and outcome; None when the export has no linked records
    outcomes: pl.DataFrame | None = None


def _col(key: ColumnKey) -> str:
    return f"{key.field}-{key.instance}.{key.array}"


def _plan(layout: ExportLayout, warnings: list[str]) -> list[ColumnKey]:
    """The columns to read; errors for missing required fields and baseline-less fields."""
    keys: list[ColumnKey] = []
    for f in (*REQUIRED, AGE):
        if ColumnKey(f.id, 0, 0) not in layout.columns:
            later = [i for i in layout.instances(f.id) if i > 0]
            why = (f"only instance {later} is in the export; sphr takes baseline values from "
                   "instance 0 and never mixes visits") if later else "not in the export"
            raise InputError(f"required field {f.id} ({f.title}) missing: {why}",
                             file=layout.path, field=f"{f.id}-0.0", row=0)
    for f in PREDICTORS:
        key = ColumnKey(f.id, 0, 0)
        if key in layout.columns:
            keys.append(key)
            continue
        later = [i for i in layout.instances(f.id) if i > 0]
        if later:
            raise InputError(
                f"predictor {f.id} ({f.name}) has instance {later} columns but no instance 0: "
                "sphr uses baseline (instance 0) values only and never fills them from a later "
                "visit; re-export with instance 0", file=layout.path, field=f"{f.id}-0.0", row=0)
        warnings.append(f"predictor {f.id} ({f.name}) is not in the export: its column is empty "
                        "and the completeness filter will drop it")
    keys.append(ColumnKey(SEX.id, 0, 0))
    for f in (ASSESSMENT_DATE, *CONDITIONS):
        keys += [ColumnKey(f.id, i, 0) for i in layout.instances(f.id)]
    for f in (MEDICATION_MEN, MEDICATION_WOMEN):
        arrays = layout.arrays(f.id, 0)
        if not arrays:
            warnings.append(f"medication field {f.id} ({f.sex}) is not in the export: "
                            f"{f.sex} participants without a condition get label 'unknown'")
        keys += [ColumnKey(f.id, 0, a) for a in arrays]
    if ColumnKey(FASTING_TIME.id, 0, 0) in layout.columns:
        keys.append(ColumnKey(FASTING_TIME.id, 0, 0))
    return keys


def _decode_coded(layout: ExportLayout, column: pl.Series, key: ColumnKey, f: Field, *,
                  rows: pl.Series | None = None, cells: pl.Series | None = None) -> pl.Series:
    """Numbers or text labels to integer codes; an unknown label or code is an error.

    ``rows`` (1-based data rows) and ``cells`` (the whole list cells) are given when
    ``column`` holds the values of list cells, one per value, so that an error names the
    participant's row and cell rather than the value's position.
    """
    name = layout.columns[key]
    text = column.str.strip_chars()
    number = text.cast(pl.Float64, strict=False)
    lookup = f.label_to_code
    label = text.str.to_lowercase().replace_strict(lookup, default=None, return_dtype=pl.Int64)
    code = pl.select(pl.coalesce(number.round(0).cast(pl.Int64), label)).to_series()
    unreadable = text.is_not_null() & code.is_null()
    fractional = number.is_not_null() & (number != number.round(0))
    valid = set(f.coding or {}) | set(f.special_codes)
    unknown = code.is_not_null() & ~code.is_in(sorted(valid))
    if f.value_type == "integer":  # any count is fine; only negative codes must be known
        unknown = unknown & (code < 0)
    bad = unreadable | fractional | unknown
    if bad.any():
        row = int(bad.arg_true()[0])
        shown = "; ".join(f"{c} {lbl}" for c, lbl in {**(f.coding or {}),
                          **{c: SPECIAL_CODES[c] for c in f.special_codes}}.items())
        kind = "label" if number[row] is None else "code"
        where = f" in {cells[row]!r}" if cells is not None else ""
        raise InputError(
            f"unknown {kind} {text[row]!r}{where} for {f.title} (known: {shown})",
            file=layout.path, field=f"{name} ({f.name})",
            row=int(rows[row]) if rows is not None else row + 1)
    return code.alias(_col(key))


def _holds_lists(column: pl.Series, f: Field) -> bool:
    """Whether a multi-select field's text column has a cell holding a whole list."""
    return (f.value_type == "categorical_multiple" and column.dtype == pl.Utf8
            and bool(column.to_frame("c").select(is_list_cell(pl.col("c")).any()).item()))


def _decode_list(layout: ExportLayout, column: pl.Series, key: ColumnKey, f: Field
                 ) -> list[pl.Series]:
    """A column whose cells hold a whole array (the RAP's ``p6177_i0`` = ``[1, 2]``) as the
    columns ``field-instance.0``, ``.1``, ... of the per-index layout, codes decoded."""
    name = layout.columns[key]
    if len(layout.arrays(f.id, key.instance)) > 1:
        # a list beside per-index columns: which index each value stands for is unknowable
        lists = column.to_frame("c").select(is_list_cell(pl.col("c"))).to_series()
        row = int(lists.fill_null(False).arg_true()[0])
        raise InputError(
            f"{column[row][:60]!r} holds several values in one array column; expected one "
            f"value per column ({f.id}-{key.instance}.0, {f.id}-{key.instance}.1, ...) or the "
            f"whole list in a single column (p{f.id}_i{key.instance})",
            file=layout.path, field=f"{name} ({f.name})", row=row + 1)
    try:
        lists = split_list_cells(column)
    except ListCellError as exc:
        raise InputError(str(exc), file=layout.path, field=f"{name} ({f.name})",
                         row=exc.index + 1) from None
    n = len(column)
    long = (pl.DataFrame({"row": pl.int_range(1, n + 1, eager=True, dtype=pl.UInt32),
                          "cell": column, "item": lists})
            .with_columns(pos=pl.int_ranges(0, pl.col("item").list.len(), dtype=pl.UInt32))
            .explode(["item", "pos"])
            .filter(pl.col("item").is_not_null() & (pl.col("item") != "")))
    codes = _decode_coded(layout, long["item"], key, f, rows=long["row"], cells=long["cell"])
    long = long.select("row", "pos", code=codes)
    width = int(long["pos"].max()) + 1 if long.height else 1
    out = []
    for a in range(width):
        at = long.filter(pl.col("pos") == a)
        values = pl.repeat(None, n, dtype=pl.Int64, eager=True)
        if at.height:
            values = values.scatter(at["row"] - 1, at["code"])
        out.append(values.alias(_col(ColumnKey(f.id, key.instance, a))))
    return out


def plausibility(f: Field) -> str | None:
    """The plausibility rule the ingest applies to ``f``'s values (``Field.plausible_rule``), or
    None for a field it does not check: dates, codes and text, whose unknown values stop the
    ingest instead."""
    return f.plausible_rule if f.value_type in _CHECKED else None


def _implausible_to_null(values: pl.Series, f: Field, column: str, eid: pl.Series,
                         implausible: dict[str, dict]) -> pl.Series:
    """``values`` with each one outside ``f``'s plausible range, or not finite, set null; each
    field hit gets a count, the rule and its first rows and eids in ``implausible``."""
    if not values.dtype.is_numeric():
        return values
    v = pl.col("v")
    tests = [~v.is_finite()] if values.dtype.is_float() else []
    if f.min_value is not None:
        tests.append(v < f.min_value)
    if f.max_value is not None:
        tests.append(v > f.max_value)
    if not tests:
        return values
    bad = values.to_frame("v").select(pl.any_horizontal(tests).fill_null(False)).to_series()
    if not bad.any():
        return values
    index = bad.arg_true()
    first = index.head(FIRST_SHOWN)
    implausible[f.name] = {
        "column": column, "rule": f.plausible_rule, "count": len(index),
        "first_rows": (first + 1).to_list(), "first_eids": eid.gather(first).to_list(),
        # text, so that inf and NaN survive JSON
        "first_values": [str(v) for v in values.gather(first).to_list()],
    }
    return pl.select(pl.when(~bad).then(values)).to_series().alias(values.name)


def _decode(layout: ExportLayout, raw: dict[str, pa.ChunkedArray], keys: list[ColumnKey],
            special_counts: dict[str, dict[str, int]],
            implausible: dict[str, dict] | None = None) -> pl.DataFrame:
    """Typed columns named ``field-instance.array``; special codes counted, then null;
    implausible values (:func:`_implausible_to_null`) counted in ``implausible``, then null.

    ``raw`` (the columns as read, by file name; see :func:`_raw_columns`) is emptied column by
    column: each raw column is dropped as soon as it is decoded, so the raw and the decoded
    table never both exist whole.
    """
    from sphr.data.fields import BY_ID

    # a caller without a report still gets the values an ingest would write
    implausible = {} if implausible is None else implausible

    def take(name: str) -> pl.Series:
        return pl.Series(name, raw.pop(name))

    eid_text = take(layout.eid_column)
    eid = eid_text.cast(pl.Int64, strict=False)
    bad = eid.is_null()
    if bad.any():
        row = int(bad.arg_true()[0])
        raise InputError(f"participant id {eid_text[row]!r} is not an integer", file=layout.path,
                         field=layout.eid_column, row=row + 1)
    out = [eid.alias("eid")]
    for key in keys:
        f, name = BY_ID[key.field], layout.columns[key]
        if f.value_type == "date":
            text = take(name).str.strip_chars()
            date = text.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False)
            bad = text.is_not_null() & date.is_null()
            if bad.any():
                row = int(bad.arg_true()[0])
                raise InputError(f"{text[row]!r} is not a date (YYYY-MM-DD)", file=layout.path,
                                 field=f"{name} ({f.name})", row=row + 1)
            out.append(date.alias(_col(key)))
            continue
        column = take(name)
        if _holds_lists(column, f):
            decoded = _decode_list(layout, column, key, f)
        elif column.dtype == pl.Utf8:
            decoded = [_decode_coded(layout, column, key, f)]
        else:
            decoded = [column.alias(_col(key))]
        del column
        for values in decoded:
            values = _null_special(values, f, f"{name} ({f.name})", special_counts)
            if plausibility(f) is not None:
                values = _implausible_to_null(values, f, name, eid, implausible)
            out.append(values)
    pa.default_memory_pool().release_unused()
    return pl.DataFrame(out)


def _null_special(values: pl.Series, f: Field, label: str,
                  special_counts: dict[str, dict[str, int]]) -> pl.Series:
    """``values`` with UKB's special codes counted under ``label``, then null, but for -7
    ("none of the above"), which is an answer."""
    # labs are never negative: UKB's special codes in a numeric column mean "no answer"
    specials = list(f.special_codes) if f.special_codes else list(SPECIAL_CODES)
    hit = values.is_in([values.dtype.to_python()(c) for c in specials])
    if not hit.any():
        return values
    # a list column's values spread over several columns count under the one column read
    counts = special_counts.setdefault(label, {})
    for c, n in values.filter(hit).value_counts().iter_rows():
        counts[str(int(c))] = counts.get(str(int(c)), 0) + int(n)
    no_answer = hit & (values != ANSWERED_NONE)
    return pl.select(pl.when(~no_answer).then(values)).to_series().alias(values.name)


def _raw_columns(table: pa.Table) -> dict[str, pa.ChunkedArray]:
    """The table's columns by name, for :func:`_decode` to consume (drop the table after)."""
    return dict(zip(table.column_names, table.columns, strict=True))


def _check_duplicates(layout: ExportLayout, frame: pl.DataFrame) -> None:
    dup = frame["eid"].is_duplicated()
    if dup.any():
        rows = (dup.arg_true() + 1).to_list()
        eid = frame["eid"][rows[0] - 1]
        same = [r for r in rows if frame["eid"][r - 1] == eid]
        raise InputError(f"participant id {eid} appears more than once (rows {same[:5]}); "
                         f"{len(rows)} rows share an id with another", file=layout.path,
                         field=layout.eid_column, row=same[1] if len(same) > 1 else same[0])


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
    cond = {f.name: pl.col(_col(ColumnKey(f.id, 0, 0))).cast(pl.Int8) for f in CONDITIONS}
    base = frame.select(
        "eid",
        pl.col(_col(ColumnKey(SEX.id, 0, 0))).cast(pl.Int8).alias("sex"),
        pl.col(_col(ColumnKey(ASSESSMENT_DATE.id, 0, 0))).alias("assessment_date"),
        *[(pl.col(_col(ColumnKey(f.id, 0, 0))) if ColumnKey(f.id, 0, 0) in layout.columns
           else pl.lit(None, pl.Float64)).cast(pl.Float64).alias(f.name) for f in PREDICTORS],
        *[expr.alias(name) for name, expr in cond.items()],
        *[pl.col(c) for c in frame.columns if c.startswith(("6177-0.", "6153-0."))],
        (pl.col(_col(ColumnKey(FASTING_TIME.id, 0, 0))).cast(pl.Float64)
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
    date0 = pl.col(_col(ColumnKey(ASSESSMENT_DATE.id, 0, 0)))
    for inst in (i for i in layout.instances(ASSESSMENT_DATE.id) if i > 0):
        date = pl.col(_col(ColumnKey(ASSESSMENT_DATE.id, inst, 0)))
        exprs = [pl.col("eid"), pl.col(_col(ColumnKey(SEX.id, 0, 0))).cast(pl.Int8).alias("sex"),
                 pl.lit(inst, pl.Int8).alias("instance"), date.alias("assessment_date"),
                 ((date - date0).dt.total_days() / 365.25).alias("years_since_baseline")]
        for f in CONDITIONS:
            now_key = ColumnKey(f.id, inst, 0)
            now = (pl.col(_col(now_key)) if now_key in layout.columns
                   else pl.lit(None, pl.Int64)).cast(pl.Int8)
            before = pl.col(_col(ColumnKey(f.id, 0, 0)))
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


def _report(layout: ExportLayout, frame: pl.DataFrame, baseline: pl.DataFrame,
            followup: pl.DataFrame, special: dict, warnings: list[str], seconds: float,
            dropped_no_sex: int, columns_read: int) -> dict:
    n = baseline.height
    completeness = {f.name: round(1 - baseline[f.name].null_count() / n, 4) if n else 0.0
                    for f in PREDICTORS}
    labels = {}
    # count on the few columns needed: filtering all of baseline copies it (~150 MB at 500k)
    sex_label = baseline.select("sex", "label")
    for sex, name in ((0, "female"), (1, "male")):
        sub = sex_label.filter(pl.col("sex") == sex)
        counts = dict(sub["label"].value_counts().iter_rows())
        labels[name] = {lbl: int(counts.get(lbl, 0)) for lbl in LABELS}
    unknown = baseline.select(*[f.name for f in CONDITIONS], "medication_answered",
                              "label").filter(pl.col("label") == "unknown")
    reasons = {
        "condition_unanswered": int(unknown.select(pl.any_horizontal(
            [pl.col(f.name).is_null() for f in CONDITIONS])).to_series().sum()),
        "medication_unanswered": int((~unknown["medication_answered"]).sum()),
    }
    return {
        "source": str(layout.path), "format": layout.describe(),
        "columns_in_file": len(layout.header), "columns_read": columns_read,
        "rows_read": frame.height + dropped_no_sex, "participants": n,
        "dropped_without_sex": dropped_no_sex,
        "followup_visits": {str(k): int(v) for k, v in
                            followup["instance"].value_counts().sort("instance").iter_rows()},
        "completeness": completeness, "special_codes": special,
        "labels_by_sex": labels, "unknown_label_reasons": reasons,
        "warnings": warnings, "seconds": round(seconds, 2),
    }


def ingest(export: str | Path, *, drop_truncated_last_row: bool = False,
           outcome_config: OutcomeConfig | None = None) -> IngestResult:
    """Read an export and build baseline, follow-up, outcomes and the ingest report (no files
    written)."""
    start = time.perf_counter()
    config = outcome_config or OutcomeConfig()
    layout = inspect_export(export)
    warnings: list[str] = []
    keys = _plan(layout, warnings)
    linked = plan_linked(layout, warnings, config)
    # the linked records are read in the same pass, block by block (see read_columns)
    collector = LinkedCollector(layout, linked, config) if linked.sources else None
    raw = read_columns(layout, keys, drop_truncated_last_row=drop_truncated_last_row,
                       warnings=warnings, side_keys=linked.keys if collector else None,
                       side_hook=collector)
    if raw.num_rows == 0:
        raise InputError("the export has a header but no participants", file=layout.path, row=1)
    special: dict[str, dict[str, int]] = {}
    implausible: dict[str, dict] = {}
    columns = _raw_columns(raw)
    del raw  # _decode drops each raw column once decoded
    frame = _decode(layout, columns, keys, special, implausible)
    for name, hit in implausible.items():
        warnings.append(
            f"{hit['column']} ({name}): {hit['count']} value(s) outside the plausible range "
            f"({hit['rule']}) set missing, first at row {hit['first_rows'][0]} (eid "
            f"{hit['first_eids'][0]}, value {hit['first_values'][0]}); see implausible_values "
            "in ingest_report.json")
    _check_duplicates(layout, frame)
    sex_col = _col(ColumnKey(SEX.id, 0, 0))
    no_sex = int(frame[sex_col].null_count())
    if no_sex:
        warnings.append(f"{no_sex} participants without sex (31) were left out")
        frame = frame.filter(pl.col(sex_col).is_not_null())
    baseline = build_baseline(frame, layout)
    followup = build_followup(frame, layout)
    if collector is not None:
        outcomes, outcome_report = build_outcomes(baseline.select("eid", "assessment_date"),
                                                  collector)
        log.info("%s: outcomes from %s", layout.path, ", ".join(linked.sources))
    else:
        outcomes, outcome_report = None, no_outcomes_report(config)
        log.info("%s: %s; no outcomes.parquet", layout.path, outcome_report["why"])
    for w in warnings:
        log.warning("%s: %s", layout.path, w)
    # the file's columns, not the frame's: a RAP list column is read once, decoded into several
    report = _report(layout, frame, baseline, followup, special, warnings,
                     time.perf_counter() - start, no_sex, 1 + len(keys))
    report["implausible_values"] = implausible
    report["outcomes"] = outcome_report
    report["columns_read"] += len(linked.keys)
    return IngestResult(baseline.drop("medication_answered"), followup, report, outcomes)


OUTCOMES_FILE = "outcomes.parquet"


def run_ingest(export: str | Path, out_dir: str | Path, *,
               drop_truncated_last_row: bool = False,
               outcome_config: OutcomeConfig | None = None) -> IngestResult:
    """``sphr ingest``: write baseline.parquet, followup.parquet, outcomes.parquet (when the
    export has linked records) and ingest_report.json, all or nothing."""
    result = ingest(export, drop_truncated_last_row=drop_truncated_last_row,
                    outcome_config=outcome_config)
    with staged_outputs(out_dir) as stage:
        write_parquet(result.baseline, stage / "baseline.parquet")
        write_parquet(result.followup, stage / "followup.parquet")
        if result.outcomes is not None:
            write_parquet(result.outcomes, stage / OUTCOMES_FILE)
        write_json(result.report, stage / "ingest_report.json")
    if result.outcomes is None:
        # an outcomes file from an earlier export would pass for this one's
        (Path(out_dir) / OUTCOMES_FILE).unlink(missing_ok=True)
    return result
