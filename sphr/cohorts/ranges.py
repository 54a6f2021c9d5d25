"""Clinical normal ranges of the P0 markers
(docs/METHODS.md#bona-fide-healthy-bfh-and-the-p0-ranges), as data, in UK Biobank units.

Bona fide healthy (BFH) = apparently healthy and every P0 marker inside its
range, on raw values before normalization. Users override a range from
configuration (``--ranges ranges.json``); every range keeps its unit and source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sphr.errors import ConfigError, check_keys

if TYPE_CHECKING:  # only annotations: the CLI parser imports this module without pandas
    import pandas as pd

MG_DL_PER_MMOL_L_GLUCOSE = 18.016


@dataclass(frozen=True)
class ClinicalRange:
    marker: str
    low: float | None
    high: float | None
    #: whether the bound itself is normal (<= 5.18 includes 5.18; < 42 excludes 42)
    low_inclusive: bool = True
    high_inclusive: bool = True
    unit: str = ""
    sex: str | None = None  # None: both sexes
    paper: str = ""
    source: str = ""

    def contains(self, values: np.ndarray) -> np.ndarray:
        """True where a value is inside the range; NaN is never inside."""
        values = np.asarray(values, dtype=float)
        ok = ~np.isnan(values)
        if self.low is not None:
            ok &= values >= self.low if self.low_inclusive else values > self.low
        if self.high is not None:
            ok &= values <= self.high if self.high_inclusive else values < self.high
        return ok


P0_RANGES: tuple[ClinicalRange, ...] = (
    ClinicalRange("cholesterol", None, 5.18, unit="mmol/L", paper="<= 5.18 mmol/L",
                  source="NPLB Appendix H (refs 1, 2)"),
    ClinicalRange("hdl", 1.0, None, unit="mmol/L", sex="male", paper=">= 1.0 mmol/L (men)",
                  source="NPLB Appendix H (refs 1, 2)"),
    ClinicalRange("hdl", 1.3, None, unit="mmol/L", sex="female", paper=">= 1.3 mmol/L (women)",
                  source="NPLB Appendix H (refs 1, 2)"),
    ClinicalRange("ldl", None, 3.3, unit="mmol/L", paper="<= 3.3 mmol/L",
                  source="NPLB Appendix H (refs 1, 2)"),
    ClinicalRange("triglycerides", None, 1.7, unit="mmol/L", paper="<= 1.7 mmol/L",
                  source="NPLB Appendix H (refs 1, 2)"),
    # 70-100 mg/dL fasting glucose; UKB reports mmol/L (mg/dL / 18.016), rounded to 0.1
    ClinicalRange("glucose", 3.9, 5.6, unit="mmol/L", paper="70-100 mg/dL",
                  source="NPLB Appendix H (ref 3); mg/dL / 18.016"),
    ClinicalRange("hba1c", None, 42.0, high_inclusive=False, unit="mmol/mol",
                  paper="< 42 mmol/mol", source="NPLB Appendix H (ref 4)"),
    ClinicalRange("crp", None, 10.0, high_inclusive=False, unit="mg/L", paper="< 10 mg/L",
                  source="NPLB Appendix H (ref 5)"),
)


def ranges_for(sex: str, ranges: tuple[ClinicalRange, ...] = P0_RANGES) -> list[ClinicalRange]:
    return [r for r in ranges if r.sex in (None, sex)]


def bona_fide_mask(raw: pd.DataFrame, sex: str,
                   ranges: tuple[ClinicalRange, ...] = P0_RANGES) -> np.ndarray:
    """Every P0 marker inside its normal range (raw UKB units); a missing marker fails."""
    ok = np.ones(len(raw), dtype=bool)
    for r in ranges_for(sex, ranges):
        if r.marker not in raw.columns:
            raise ConfigError(f"P0 marker {r.marker!r} is not a column of the baseline")
        ok &= r.contains(raw[r.marker].to_numpy())
    return ok


#: severity classes stop here: 3 or more P0 markers out of range are one class
SEVERITY_CAP = 3


def severity_classes(raw: pd.DataFrame, sex: str,
                     ranges: tuple[ClinicalRange, ...] = P0_RANGES) -> np.ndarray:
    """Number of P0 markers outside their clinical range (capped at :data:`SEVERITY_CAP`),
    over the markers ``raw`` has: the triplet classes of ``triplet_classes="severity"``."""
    count = np.zeros(len(raw), dtype=np.int8)
    for r in ranges_for(sex, ranges):
        if r.marker in raw.columns:
            count += ~r.contains(raw[r.marker].to_numpy(float))
    return np.minimum(count, SEVERITY_CAP).astype(np.int8)


def assign_classes(frame: pd.DataFrame, sex: str,
                   ranges: tuple[ClinicalRange, ...] = P0_RANGES) -> np.ndarray:
    """The class of each participant (``sphr.labels``), from the ingest label and raw P0 values.

    0 unhealthy, 1 apparently healthy, 2 bona fide healthy (apparently healthy and every P0
    marker inside ``ranges``), -1 (``UNKNOWN_CLASS``) for an ``unknown`` label. The one
    labelling rule of the project: ``sphr cohorts`` and ``sphr score`` both call it, each with
    the ranges of the run (docs/METHODS.md#classes).
    """
    from sphr.labels import APPARENTLY_HEALTHY, BONA_FIDE_HEALTHY, UNHEALTHY, UNKNOWN_CLASS

    label = frame["label"].to_numpy(object)
    out = np.full(len(frame), UNKNOWN_CLASS, dtype=np.int8)
    out[label == "unhealthy"] = UNHEALTHY
    healthy = label == "apparently_healthy"
    out[healthy] = APPARENTLY_HEALTHY
    out[healthy & bona_fide_mask(frame, sex, ranges)] = BONA_FIDE_HEALTHY
    return out


def ranges_from_records(records: list[dict]) -> tuple[ClinicalRange, ...]:
    """Ranges as ``cohort_report.json`` / ``clinical_ranges.json`` record them (``asdict``)."""
    try:
        return tuple(ClinicalRange(**r) for r in records)
    except TypeError as exc:
        raise ConfigError(f"not a list of clinical ranges: {exc}") from None


#: the keys of one range an override may set
_RANGE_KEYS: tuple[str, ...] = ("low", "high", "low_inclusive", "high_inclusive", "source")


def with_overrides(overrides: dict | None,
                   ranges: tuple[ClinicalRange, ...] = P0_RANGES) -> tuple[ClinicalRange, ...]:
    """Apply ``{"glucose": {"low": 4.0, "high": 5.5}, "hdl": {"female": {"low": 1.2}}}``."""
    if not overrides:
        return ranges
    known = {r.marker for r in ranges}
    out = list(ranges)
    for marker, spec in overrides.items():
        if marker not in known:
            raise ConfigError(f"no clinical range for {marker!r}; known: "
                              f"{', '.join(sorted(known))}")
        per_sex = {k: v for k, v in spec.items() if k in ("female", "male")}
        common = {k: v for k, v in spec.items() if k not in ("female", "male")}
        check_keys(common, (*_RANGE_KEYS, "female", "male"), f"range override for {marker!r}")
        for sex, table in per_sex.items():
            check_keys(table, _RANGE_KEYS, f"range override for {marker!r} {sex}")
        for i, r in enumerate(out):
            if r.marker != marker:
                continue
            change = {**common, **per_sex.get(r.sex, {})} if r.sex else dict(common)
            if change:
                source = change.pop("source", "user override")
                out[i] = replace(r, **change, source=source)
    return tuple(out)


def load_overrides(path: str | Path | None) -> dict | None:
    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
