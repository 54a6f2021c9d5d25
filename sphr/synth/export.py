"""Write a synthetic cohort as a real UK Biobank export, in any of its forms.

Formats: ``ukbconv`` (legacy CSV, every value quoted, missing ``""``), ``tsv``
(legacy names, tab-separated), ``tab`` (R: ``f.21003.0.0``, ``NA``), ``rap``
(``participant.p21003_i0``, numeric codes), ``rap-labels`` (``p21003_i0``,
categorical codes as their text labels) and ``parquet`` (legacy names, typed
columns). Columns are sorted by field, instance and array as UKB's tools
write them, decoy fields (never used by the pipeline) included.

Linked records (41270/41280 hospital, 40005/40006 cancer, 40000-40002 death) are
written as UKB does: ICD-10 codes without the dot (``E119``, coding 19) in one
column per array index; on the RAP a multi-valued field is one column holding
the whole array, ``["E119","I10"]`` (``rap``, as ``dx extract_dataset``) or
``E11.9 <title>|I10 <title>`` (``rap-labels``, as the Table Exporter), while its
dates stay one column per index (``p41280_a0``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import polars as pl

from sphr.data.fields import (
    CANCER_DATE,
    CANCER_TYPE,
    CATALOG,
    DEATH_CONTRIBUTORY,
    DEATH_DATE,
    DEATH_UNDERLYING,
    FIRST_OCCURRENCE,
    HOSPITAL_DATES,
    HOSPITAL_DIAGNOSES,
    SPECIAL_CODES,
    Field,
)
from sphr.data.headers import ColumnKey, Style, eid_column, format_column
from sphr.errors import ConfigError
from sphr.io import atomic_path, write_parquet
from sphr.synth.cohort import SyntheticCohort
from sphr.synth.config import FORMATS, SynthConfig

if TYPE_CHECKING:
    import pandas as pd

ExportFormat = Literal["ukbconv", "tsv", "tab", "rap", "rap-labels", "parquet"]
_STYLE: dict[str, Style] = {"ukbconv": "legacy", "tsv": "legacy", "tab": "tab", "rap": "rap",
                            "rap-labels": "rap", "parquet": "legacy"}
_SUFFIX = {"ukbconv": ".csv", "tsv": ".tsv", "tab": ".tab", "rap": ".csv", "rap-labels": ".csv",
           "parquet": ".parquet"}


@dataclass(frozen=True)
class Decoy:
    """A real UKB field the pipeline does not use, to exercise column selection."""

    id: int
    kind: Literal["float", "int", "code", "date", "text"]
    instances: int = 1
    arrays: int = 1
    coding: dict[int, str] | None = None
    scale: float = 1.0


DECOYS: tuple[Decoy, ...] = (
    Decoy(34, "int", 1, 1, scale=1950), Decoy(48, "float", 4, 1, scale=90),
    Decoy(49, "float", 4, 1, scale=103), Decoy(50, "float", 4, 1, scale=168),
    Decoy(54, "code", 4, 1, {11010: "Leeds", 11016: "Liverpool", 11009: "Manchester"}),
    Decoy(189, "float", 1, 1, scale=-1.3), Decoy(1558, "code", 4, 1, {
        1: "Daily or almost daily", 2: "Three or four times a week", 3: "Once or twice a week",
        6: "Never"}),
    Decoy(4079, "int", 4, 2, scale=82), Decoy(4080, "int", 4, 2, scale=138),
    Decoy(20116, "code", 4, 1, {0: "Never", 1: "Previous", 2: "Current"}),
    Decoy(20544, "code", 1, 16, {1: "Social anxiety or social phobia", 11: "Depression",
                                 15: "Anxiety, nerves or generalized anxiety disorder"}),
    Decoy(21000, "code", 3, 1, {1001: "British", 1002: "Irish", 3001: "Indian"}),
    Decoy(23099, "float", 4, 1, scale=31), Decoy(30510, "float", 2, 1, scale=8.9),
    Decoy(30530, "float", 2, 1, scale=76), Decoy(41272, "text", 1, 40),
)
#: operative procedures (OPCS-4, field 41272) for the text decoy
_OPCS = np.array(["H22.9", "W40.1", "C75.1", "K40.1", "Q07.4", "M45.9"])
#: 130000+ "date first reported" fields fill any further decoys, as in a real main dataset
_FIRST_OCCURRENCE_START = 130_000
#: the First Occurrence fields the ingest reads: never decoys
_READ_FIRST_OCCURRENCES = frozenset(FIRST_OCCURRENCE.values())
#: the purpose of the decoy columns' stream, ``SeedSequence([seed, DECOY_STREAM])``
DECOY_STREAM = 7919


def _decoy_columns(n_decoys: int) -> list[tuple[ColumnKey, Decoy]]:
    cols: list[tuple[ColumnKey, Decoy]] = []
    for d in DECOYS:
        for i in range(d.instances):
            for a in range(d.arrays):
                cols.append((ColumnKey(d.id, i, a), d))
    k = 0
    while len(cols) < n_decoys:
        d = Decoy(_FIRST_OCCURRENCE_START + 2 * k, "date")
        k += 1
        if d.id in _READ_FIRST_OCCURRENCES:  # written for real (sphr.synth.followup)
            continue
        cols.append((ColumnKey(d.id, 0, 0), d))
    return cols[:n_decoys]


def _decoy_values(rng: np.random.Generator, d: Decoy, n: int, labels: bool) -> pl.Series:
    present = rng.random(n) < (0.9 if d.arrays == 1 else 0.12)
    if d.kind == "float":
        vals = np.round(d.scale * (1 + 0.15 * rng.standard_normal(n)), 2)
        return pl.Series(np.where(present, vals, np.nan)).fill_nan(None)
    if d.kind == "int":
        vals = np.round(d.scale * (1 + 0.1 * rng.standard_normal(n)))
        return pl.Series(np.where(present, vals, np.nan)).fill_nan(None).cast(pl.Int64)
    if d.kind == "code":
        codes = np.array(list(d.coding or {0: ""}))
        vals = pl.Series(rng.choice(codes, n)).cast(pl.Int64)
        vals = pl.select(pl.when(pl.Series(present)).then(vals)).to_series()
        if labels:
            return vals.replace_strict({k: v for k, v in (d.coding or {}).items()},
                                       return_dtype=pl.Utf8, default=None)
        return vals
    if d.kind == "date":
        days = rng.integers(0, 6000, n)
        dates = pl.Series(np.datetime64("1995-01-01") + days.astype("timedelta64[D]"))
        return pl.select(pl.when(pl.Series(rng.random(n) < 0.05)).then(dates)).to_series()
    return pl.select(pl.when(pl.Series(present)).then(pl.Series(rng.choice(_OPCS, n)))).to_series()


def _field_values(f: Field, visits: dict[int, tuple[np.ndarray, object]], n: int,
                  instance: int, array: int) -> np.ndarray:
    """The values of one field column, aligned to baseline participants (NaN where absent)."""
    rows, frame = visits[instance]
    col = f"{f.name}#{array}" if f.arrays > 1 else f.name
    out = (np.full(n, np.nan) if f.value_type != "date"
           else np.full(n, np.datetime64("NaT"), "M8[D]"))
    if col not in frame.columns or (f.arrays == 1 and array > 0):
        return out
    values = frame[col].to_numpy()
    if f.value_type != "date":
        values = values.astype(float)
        if f.value_type == "continuous":
            values = np.round(values, f.decimals)
    out[rows] = values
    return out


def _to_series(f: Field, values: np.ndarray, labels: bool) -> pl.Series:
    if f.value_type == "date":
        return pl.Series(values.astype("datetime64[D]"))
    series = pl.Series(values).fill_nan(None)
    if f.value_type == "continuous":
        return series
    series = series.cast(pl.Int64)
    if labels and (f.coding or f.special_codes) and f.value_type != "integer":
        mapping = {**(f.coding or {}), **{c: SPECIAL_CODES[c] for c in f.special_codes}}
        return series.replace_strict(mapping, return_dtype=pl.Utf8, default=None)
    # integer fields: numbers stay numbers, special codes become text
    if labels and f.special_codes:
        text = series.cast(pl.Utf8)
        mapping = {str(c): SPECIAL_CODES[c] for c in f.special_codes}
        return text.replace(mapping)
    return series


def _positions(rows: np.ndarray) -> tuple[np.ndarray, int]:
    """For records sorted by participant row: each record's index within its participant, and
    the most records any participant has (the array width)."""
    if not rows.shape[0]:
        return np.zeros(0, int), 0
    start = np.ones(rows.shape[0], bool)
    start[1:] = rows[1:] != rows[:-1]
    first = np.maximum.accumulate(np.where(start, np.arange(rows.shape[0]), 0))
    pos = np.arange(rows.shape[0]) - first
    return pos, int(pos.max()) + 1


def _linked_columns(linked: pd.DataFrame, eid: np.ndarray, fmt: str
                    ) -> list[tuple[ColumnKey, pl.Series, Field]]:
    """The linked-record columns of one export form (see the module docstring)."""
    from sphr.synth.linked import TITLES

    n = eid.shape[0]
    rap, labels = _STYLE[fmt] == "rap", fmt == "rap-labels"
    out: list[tuple[ColumnKey, pl.Series, Field]] = []

    def text(codes: np.ndarray) -> np.ndarray:
        if labels:
            return np.array([f"{c} {TITLES[c]}" for c in codes], dtype=object)
        return np.array([c.replace(".", "") for c in codes], dtype=object)

    def take(source: str, by: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        part = linked.loc[linked["source"] == source]
        rows = np.searchsorted(eid, part["eid"].to_numpy())
        # UKB orders 41270's array by code; registrations and deaths by date
        key = part["code"].to_numpy(str) if by == "code" else part["date"].to_numpy()
        order = np.lexsort((key, rows))
        pos, width = _positions(rows[order])
        return part.iloc[order].reset_index(drop=True), rows[order], pos, width

    def dates(f: Field, rows, pos, width, values, axis: str) -> None:
        grid = np.full((n, width), np.datetime64("NaT"), "M8[D]")
        grid[rows, pos] = values.astype("M8[D]")
        for j in range(width):
            key = ColumnKey(f.id, 0, j) if axis == "array" else ColumnKey(f.id, j, 0)
            out.append((key, pl.Series(grid[:, j]), f))

    def codes(f: Field, rows, pos, width, values, axis: str, one_column: bool) -> None:
        values = text(values)
        if one_column:  # RAP: the whole array in one column
            frame = pl.DataFrame({"row": rows,
                                  "code": pl.Series(values.tolist(), dtype=pl.String)})
            joined = frame.group_by("row", maintain_order=True).agg(
                (pl.col("code").str.join("|") if labels else
                 pl.concat_str(pl.lit('["'), pl.col("code").str.join('","'), pl.lit('"]')))
                .alias("code"))
            cell = np.full(n, None, object)
            cell[joined["row"].to_numpy()] = joined["code"].to_numpy()
            out.append((ColumnKey(f.id, 0, 0), pl.Series(cell.tolist(), dtype=pl.String),
                        replace(f, arrays=1)))
            return
        grid = np.full((n, width), None, object)
        grid[rows, pos] = values
        for j in range(width):
            key = ColumnKey(f.id, 0, j) if axis == "array" else ColumnKey(f.id, j, 0)
            out.append((key, pl.Series(grid[:, j].tolist(), dtype=pl.String), f))

    part, rows, pos, width = take("hospital", "code")
    codes(HOSPITAL_DIAGNOSES, rows, pos, width, part["code"].to_numpy(), "array", rap)
    dates(HOSPITAL_DATES, rows, pos, width, part["date"].to_numpy(), "array")
    part, rows, pos, width = take("cancer_registry", "date")
    codes(CANCER_TYPE, rows, pos, width, part["code"].to_numpy(), "instance", False)
    dates(CANCER_DATE, rows, pos, width, part["date"].to_numpy(), "instance")
    part, rows, pos, width = take("death", "date")
    dates(DEATH_DATE, rows, pos, width, part["date"].to_numpy(), "instance")
    part, rows, pos, width = take("death_underlying", "date")
    codes(DEATH_UNDERLYING, rows, pos, width, part["code"].to_numpy(), "instance", False)
    part, rows, pos, width = take("death_contributory", "code")
    codes(DEATH_CONTRIBUTORY, rows, pos, width, part["code"].to_numpy(), "array", rap)
    return out


def build_export_frame(cohort: SyntheticCohort, fmt: ExportFormat = SynthConfig.format,
                       decoys: int = SynthConfig.decoys, seed: int = SynthConfig.seed, *,
                       linked: bool = SynthConfig.linked) -> pl.DataFrame:
    """The export as a polars frame with the column names of ``fmt`` (with the cohort's linked
    records unless ``linked`` is False)."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    style, labels = _STYLE[fmt], fmt == "rap-labels"
    prefix = "participant." if fmt == "rap" else ""
    visits = cohort.visits
    base = visits[visits["instance"] == 0]
    eid = base["eid"].to_numpy()
    n = eid.shape[0]
    by_instance = {}
    for i in (0, 1, 2, 3):
        frame = visits[visits["instance"] == i]
        by_instance[i] = (np.searchsorted(eid, frame["eid"].to_numpy()), frame)

    columns: list[tuple[ColumnKey, pl.Series, Field | None]] = []
    for f in CATALOG:
        instances = f.instances if f.id != 31 else (0,)
        for i in instances:
            for a in range(f.arrays):
                values = _field_values(f, by_instance, n, i, a)
                columns.append((ColumnKey(f.id, i, a), _to_series(f, values, labels), f))
    # a stream of their own, SeedSequence([seed, purpose]) as every derived seed (generator
    # v4; v3 drew them from seed + 7919, which is seed s + 7919's base stream)
    rng = np.random.default_rng([seed, DECOY_STREAM])
    for key, d in _decoy_columns(decoys):
        columns.append((key, _decoy_values(rng, d, n, labels), None))
    if linked and cohort.linked is not None:
        columns += _linked_columns(cohort.linked, eid, fmt)
        # last, from a stream of its own: every column above keeps its values
        from sphr.synth.followup import follow_up_columns

        extra = follow_up_columns(cohort.linked, base["assessment_date"].to_numpy(), eid,
                                  cohort.truth.attrs.get("world", {}).get("seed", seed), labels)
        written = {key for key, _, _ in extra}  # the decoy centre 54-0.0 gives way
        columns = [c for c in columns if c[0] not in written] + extra
    columns.sort(key=lambda c: c[0])

    def name(key: ColumnKey, f: Field | None) -> str:
        single_i = (f is not None and len(f.instances) == 1) or key.field == 31
        single_a = f is None or f.arrays == 1
        return format_column(key, style, single_instance=single_i, single_array=single_a,
                             prefix=prefix)

    data = {eid_column(style, prefix): pl.Series(eid, dtype=pl.Int64)}
    for key, series, f in columns:
        data[name(key, f)] = series
    return pl.DataFrame(data)


def write_export(cohort: SyntheticCohort, path: str | Path, fmt: ExportFormat = SynthConfig.format,
                 decoys: int = SynthConfig.decoys, seed: int = SynthConfig.seed, *,
                 linked: bool = SynthConfig.linked) -> Path:
    """Write the export atomically, and the latent truth next to it (``*.truth.parquet``)."""
    path = Path(path)
    frame = build_export_frame(cohort, fmt, decoys, seed, linked=linked)
    with atomic_path(path) as tmp:
        if fmt == "parquet":
            frame.write_parquet(tmp, compression="zstd")
        elif fmt == "ukbconv":
            frame.write_csv(tmp, quote_style="always")
        elif fmt in ("tsv", "tab"):
            frame.write_csv(tmp, separator="\t", quote_style="never",
                            null_value="NA" if fmt == "tab" else "")
        else:
            frame.write_csv(tmp, quote_style="necessary")
    write_parquet(cohort.truth, truth_path(path))
    return path


def truth_path(export: str | Path) -> Path:
    """Where the hidden ground truth of a synthetic export lives (never inside the export)."""
    export = Path(export)
    return export.with_name(export.name.split(".")[0] + ".truth.parquet")


def default_suffix(fmt: str) -> str:
    return _SUFFIX[fmt]
