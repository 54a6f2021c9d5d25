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

from sphr.data.decode import column_name, decode, raw_columns
from sphr.data.export_layout import ExportLayout, inspect_export
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
from sphr.data.outcomes import (
    LinkedCollector,
    OutcomeConfig,
    build_outcomes,
    no_outcomes_report,
    plan_linked,
)
from sphr.data.reader import read_columns
from sphr.data.visit_tables import LABELS, build_baseline, build_followup
from sphr.errors import InputError
from sphr.io import staged_outputs, write_json, write_parquet

log = logging.getLogger(__name__)

#: fields without which no label or split can be made
REQUIRED: tuple[Field, ...] = (SEX, ASSESSMENT_DATE, *CONDITIONS)
AGE = next(f for f in PREDICTORS if f.name == "age")


@dataclass
class IngestResult:
    baseline: pl.DataFrame
    followup: pl.DataFrame
    report: dict
    #: one row per participant and outcome; None when the export has no linked records
    outcomes: pl.DataFrame | None = None


def plan_columns(layout: ExportLayout, warnings: list[str]) -> list[ColumnKey]:
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


def _check_duplicates(layout: ExportLayout, frame: pl.DataFrame) -> None:
    dup = frame["eid"].is_duplicated()
    if dup.any():
        rows = (dup.arg_true() + 1).to_list()
        eid = frame["eid"][rows[0] - 1]
        same = [r for r in rows if frame["eid"][r - 1] == eid]
        raise InputError(f"participant id {eid} appears more than once (rows {same[:5]}); "
                         f"{len(rows)} rows share an id with another", file=layout.path,
                         field=layout.eid_column, row=same[1] if len(same) > 1 else same[0])


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
    keys = plan_columns(layout, warnings)
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
    columns = raw_columns(raw)
    del raw  # decode drops each raw column once decoded
    frame = decode(layout, columns, keys, special, implausible)
    for name, hit in implausible.items():
        warnings.append(
            f"{hit['column']} ({name}): {hit['count']} value(s) outside the plausible range "
            f"({hit['rule']}) set missing, first at row {hit['first_rows'][0]} (eid "
            f"{hit['first_eids'][0]}, value {hit['first_values'][0]}); see implausible_values "
            "in ingest_report.json")
    _check_duplicates(layout, frame)
    sex_col = column_name(ColumnKey(SEX.id, 0, 0))
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
