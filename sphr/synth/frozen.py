"""Frozen checks on values, not bytes: a table's digest that formatting does not move.

The synthetic worlds are frozen (docs/SYNTH.md): the same seed must give the same values on
every machine and with every release of our dependencies. A sha256 of the export's bytes
checks more than that (a polars release that prints floats with another number of digits
changes it) and, on its own, says nothing about *which* column moved. This digest keeps, per
column,

* text (dates, codes, anything that is not a number everywhere): the sha256 of its values, so
  it must be equal exactly;
* numbers: which cells are missing (a sha256 of the mask, exact), the count, the sum of
  absolute values and a weighted sum with fixed pseudo-random weights, compared with a relative
  tolerance :data:`RTOL` (1e-9). Floating-point rounding that differs between BLAS kernels or
  printers moves a cell by about 1e-16 of its value and passes; a real change of one cell by
  more than about ``RTOL x rows`` of the column's mean magnitude fails, and the message names
  the column.

``python -m sphr.synth.frozen EXPORT`` prints an export's digest as JSON; the tests compare the
generator's exports to the digests committed in ``tests/data/frozen_digests.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np
import polars as pl

#: relative tolerance of a numeric column's sums (docs/SYNTH.md, reproducibility)
RTOL = 1e-9
#: the weights' stream: numpy's PCG64, the same numbers on every machine
WEIGHT_SEED = 20261127


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _weights(n: int) -> np.ndarray:
    return np.random.default_rng(WEIGHT_SEED).uniform(-1.0, 1.0, n)


def as_numbers(column: pl.Series) -> pl.Series | None:
    """The column as float64 when every value present is a number, else None."""
    if column.dtype.is_numeric():
        return column.cast(pl.Float64)
    if column.dtype != pl.String:
        return None
    text = column.str.strip_chars()
    numbers = text.cast(pl.Float64, strict=False)
    present = text.is_not_null() & (text != "")
    if (numbers.is_null() & present).any():
        return None
    return numbers


def column_digest(column: pl.Series) -> dict:
    """One column's digest: exact for text, sums within :data:`RTOL` for numbers."""
    numbers = as_numbers(column)
    if numbers is None:
        text = column.cast(pl.String).fill_null("\x00<null>")
        return {"kind": "text", "n": len(column),
                "sha256": _sha256("\x1f".join(text.to_list()).encode())}
    x = numbers.to_numpy().astype(float)
    missing = ~np.isfinite(x)
    x = np.where(missing, 0.0, x)
    w = _weights(len(x)) * x
    return {"kind": "number", "n": len(x), "missing": int(missing.sum()),
            "missing_sha256": _sha256(np.packbits(missing).tobytes()),
            "abs_sum": float(np.abs(x).sum()), "weighted_sum": float(w.sum()),
            "weighted_abs_sum": float(np.abs(w).sum())}


def table_digest(frame: pl.DataFrame) -> dict[str, dict]:
    """Every column's digest, by column name, in the frame's order."""
    return {name: column_digest(frame[name]) for name in frame.columns}


def export_digest(path: str | Path) -> dict[str, dict]:
    """The digest of an export file (CSV, TSV or parquet) read as text, as the ingest reads it."""
    path = Path(path)
    if path.suffix == ".parquet":
        return table_digest(pl.read_parquet(path))
    separator = "\t" if path.suffix in (".tsv", ".tab", ".txt") else ","
    return table_digest(pl.read_csv(path, separator=separator, infer_schema=False))


def _close(a: float, b: float, scale: float, rtol: float) -> bool:
    return abs(a - b) <= rtol * max(scale, abs(a), abs(b), 1e-300)


def _column_differences(name: str, want: dict, got: dict, rtol: float) -> str | None:
    if want["kind"] != got["kind"] or want["n"] != got["n"]:
        return (f"{name}: {got['kind']} of {got['n']} rows, expected {want['kind']} of "
                f"{want['n']} rows")
    if want["kind"] == "text":
        return None if want["sha256"] == got["sha256"] else f"{name}: other text values"
    if want["missing_sha256"] != got["missing_sha256"]:
        return f"{name}: {got['missing']} missing cells, expected {want['missing']} (or others)"
    scale = want["weighted_abs_sum"]
    if not (_close(want["abs_sum"], got["abs_sum"], want["abs_sum"], rtol)
            and _close(want["weighted_sum"], got["weighted_sum"], scale, rtol)):
        rel = abs(want["weighted_sum"] - got["weighted_sum"]) / max(scale, 1e-300)
        return f"{name}: values moved (weighted sum off by {rel:.2e} of its scale)"
    return None


def compare_digests(expected: dict[str, dict], actual: dict[str, dict],
                    rtol: float = RTOL) -> list[str]:
    """One line per column that differs (missing, extra, or other values); empty when equal."""
    lines = [f"{c}: missing" for c in expected if c not in actual]
    lines += [f"{c}: not expected" for c in actual if c not in expected]
    if not lines and list(expected) != list(actual):
        lines.append("columns in another order")
    for name in expected:
        if name in actual:
            line = _column_differences(name, expected[name], actual[name], rtol)
            if line:
                lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="print an export's value digest as JSON")
    parser.add_argument("export", type=Path)
    args = parser.parse_args(argv)
    print(json.dumps(export_digest(args.export), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
