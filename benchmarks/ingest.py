"""Ingest one ukbconv CSV three ways: ``sphr ingest`` vs naive pandas vs FUNPACK.

The export (500,000 participants and 300 decoy columns by default) is generated in a
separate process, then each reader runs in its own process and reports its peak memory as
``VmHWM`` from ``/proc/self/status`` at the end of that process (so no reader inherits the
generator's or the parent's peak, as ``ru_maxrss`` of a child would):

- ours: the whole ``sphr ingest FILE --out DIR`` command (``python -m sphr.cli``);
- naive: ``pandas.read_csv`` of the whole file, then the columns we read selected;
- FUNPACK: ``fmrib_unpack`` (fmrib-unpack 4.0.1) with ``--no_download``, exactly the
  columns we read (``--column``), UKB's negative codes made missing as we make them
  (``--na_values`` per field), output as TSV.

FUNPACK lives in a benchmark-only virtual environment, never in the project's::

    python3 -m venv runs/funpack-venv
    runs/funpack-venv/bin/pip install fmrib-unpack==4.0.1
    .venv/bin/python benchmarks/ingest.py --funpack runs/funpack-venv/bin/fmrib_unpack \\
        [--participants 500000] [--decoys 300] [--workdir DIR] [--funpack-jobs 1]

Without ``--funpack`` (or when that path does not exist) FUNPACK is skipped with a
message and its keys are null. Afterwards the benchmark decodes the same columns as
``sphr ingest`` does (:func:`sphr.data.decode.decode`) and compares them cell by cell
with FUNPACK's output (same participants, same ``field-instance.array`` columns; numbers
within a float32-level tolerance, dates as ``YYYY-MM-DD``, codes as numbers); the
differing cells, and the first few of them on stderr, are reported. The linked-record
columns (41270, 40000, ...) are read by all three but not compared: ``sphr ingest`` turns
them into outcomes rather than keeping their values.

Last line: one JSON object with

- ``ours_s``, ``naive_s``, ``funpack_s``: wall seconds of each reader's whole process;
- ``ours_peak_mb``, ``naive_peak_mb``, ``funpack_peak_mb``: each process's ``VmHWM`` (MiB);
- ``speedup_vs_funpack``: ``funpack_s / ours_s`` (> 1: ours is faster);
- ``memory_vs_funpack``: ``funpack_peak_mb / ours_peak_mb`` (>= 1: ours uses at most
  FUNPACK's memory);
- ``cells_differing``: cells of the shared columns where ours and FUNPACK disagree, other than
  those the ingest's plausibility rule explains;
- ``cells_set_missing_by_plausibility``: cells where ours is missing because the value in the
  file is one no person can have (outside the field's plausible range in the catalog, or not
  finite: :func:`sphr.data.decode.implausible_mask`, docs/INGEST.md), while FUNPACK, which
  checks no range, kept it. Such a cell is the rule working, not a disagreement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import measure

#: relative and absolute tolerance for numbers (float32 carries ~7 significant digits)
RTOL, ATOL = 1e-6, 1e-9
SHOW_DIFFERENCES = 10

GENERATE = """
import sys
from sphr.synth.export import write_export
from sphr.synth.cohort import generate_cohort
path, n, decoys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
write_export(generate_cohort(n, seed=0), path, "ukbconv", decoys=decoys, seed=0)
"""


def _naive(path: str, column_file: str, participants: str) -> None:
    """The naive way: read everything, then select the same columns (what most UKB scripts
    do). Runs in its own measured process (``benchmarks/ingest.py --naive ...``)."""
    import pandas as pd

    columns = Path(column_file).read_text().split()
    frame = pd.read_csv(path, low_memory=False)[columns]
    if len(frame) != int(participants):
        raise SystemExit(f"naive pandas read {len(frame)} rows, expected {participants}")


def _columns(path: Path) -> tuple[list[str], dict[int, list[int]]]:
    """The columns ``sphr ingest`` reads (eid first), and per decoded field the codes it
    turns into missing values (for FUNPACK's ``--na_values``)."""
    from sphr.data.decode import ANSWERED_NONE
    from sphr.data.export_layout import inspect_export
    from sphr.data.fields import BY_ID, SPECIAL_CODES
    from sphr.data.ingest import plan_columns
    from sphr.data.outcomes.plan import plan_linked

    layout = inspect_export(path)
    keys = plan_columns(layout, [])
    linked = plan_linked(layout, [])
    names = [layout.eid_column] + [layout.columns[k] for k in [*keys, *linked.keys]]
    na: dict[int, list[int]] = {}
    for key in keys:
        f = BY_ID[key.field]
        if f.value_type in ("date", "text"):
            continue
        specials = f.special_codes or tuple(SPECIAL_CODES)
        na[f.id] = sorted(c for c in specials if c != ANSWERED_NONE)
    return names, na


def _funpack_python(funpack: Path) -> str:
    """The interpreter of FUNPACK's environment (from its entry script's ``#!`` line)."""
    first = funpack.read_text().splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else str(funpack.parent / "python")


def _column_differences(a: Any, b: Any, f: Any, matched: Any) -> tuple[Any, Any]:
    """(differing, explained): the rows where our decoded column ``a`` and FUNPACK's ``b``
    (text) disagree, and of those, the ones the ingest's plausibility rule explains: ours is
    missing where FUNPACK kept a value that rule rejects (:func:`sphr.data.decode.implausible_mask`,
    docs/INGEST.md)."""
    import numpy as np
    import polars as pl

    from sphr.data.decode import implausible_mask, plausibility

    explained = np.zeros(len(a), bool)
    if a.dtype == pl.Date:
        # FUNPACK writes dates as YYYY-MM-DD (a time part, if any, is ignored)
        b = b.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False)
        same = ((a == b).fill_null(False) | (a.is_null() & b.is_null())).to_numpy()
    else:
        theirs = b.cast(pl.Float64, strict=False)
        x, y = a.cast(pl.Float64).to_numpy(), theirs.to_numpy()
        same = np.isclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True)
        rejected = implausible_mask(theirs, f) if plausibility(f) is not None else None
        if rejected is not None:
            explained = a.is_null().to_numpy() & rejected.to_numpy()
    # a participant on one side only differs in every column, whatever the rule says
    explained &= matched
    differing = ~(same & matched)
    return differing & ~explained, differing & explained


def _compare(path: Path, funpack_out: Path) -> tuple[int, int]:
    """(cells_differing, cells_set_missing_by_plausibility): cells where our decoded values and
    FUNPACK's disagree, less those the ingest's plausibility rule explains, and those (the
    first few of each printed to stderr)."""
    import polars as pl

    from sphr.data.decode import decode, raw_columns
    from sphr.data.export_layout import inspect_export
    from sphr.data.fields import BY_ID
    from sphr.data.ingest import plan_columns
    from sphr.data.reader import read_columns

    layout = inspect_export(path)
    keys = plan_columns(layout, [])
    ours = decode(layout, raw_columns(read_columns(layout, keys)), keys, {})
    names = {f"{k.field}-{k.instance}.{k.array}": (layout.columns[k], BY_ID[k.field])
             for k in keys}
    theirs = pl.read_csv(funpack_out, separator="\t", infer_schema=False,
                         columns=["eid", *(n for n, _ in names.values())])
    theirs = theirs.with_columns(pl.col("eid").cast(pl.Int64))
    if ours.height != theirs.height:
        print(f"  rows: ours {ours.height}, FUNPACK {theirs.height}", file=sys.stderr)
    both = ours.join(theirs, on="eid", how="full", suffix="@funpack", coalesce=True)
    # a participant on one side only differs in every column
    matched = (both["eid"].is_in(ours["eid"].implode())
               & both["eid"].is_in(theirs["eid"].implode())).to_numpy()
    counts = {"differing": 0, "explained": 0}
    examples: dict[str, list] = {"differing": [], "explained": []}
    for ours_name, (file_name, f) in names.items():
        a = both[ours_name]
        b = both[f"{file_name}@funpack" if file_name == ours_name else file_name]
        for kind, rows in zip(("differing", "explained"),
                              _column_differences(a, b, f, matched), strict=True):
            counts[kind] += int(rows.sum())
            shown = examples[kind]
            shown += [(both["eid"][int(i)], ours_name, a[int(i)], b[int(i)])
                      for i in rows.nonzero()[0][: SHOW_DIFFERENCES - len(shown)]]
    for kind, what in (("differing", "differs"), ("explained", "plausibility rule")):
        for eid, column, x, y in examples[kind]:
            print(f"  {what}: eid {eid} {column}: ours {x!r}, FUNPACK {y!r}", file=sys.stderr)
    return counts["differing"], counts["explained"]


def _ratio(a: float | None, b: float | None, digits: int = 2) -> float | None:
    return None if a is None or b is None else round(a / b, digits)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--participants", type=int, default=500_000)
    parser.add_argument("--decoys", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the export and outputs go (an existing export is reused)")
    parser.add_argument("--funpack", type=Path, default=None,
                        help="fmrib_unpack of a benchmark-only venv with fmrib-unpack==4.0.1")
    parser.add_argument("--funpack-jobs", type=int, default=1,
                        help="FUNPACK --num_jobs (default 1, its own default: one process, "
                        "so VmHWM is its whole peak; with more, its forked workers' memory is "
                        "not counted)")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sphr-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"ukb_{args.participants}_{args.decoys}.csv"
    env = {**os.environ, "SPHR_PROGRESS": "0"}
    if not path.exists():
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", GENERATE, str(path), str(args.participants),
                        str(args.decoys)], check=True, env=env)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)

    names, na = _columns(path)
    column_file = workdir / "columns.txt"
    column_file.write_text("\n".join(names) + "\n")
    print(f"{path.name}: {path.stat().st_size / 1e9:.2f} GB, reading {len(names)} columns",
          file=sys.stderr)
    peak_file = workdir / "peak.json"

    ours_s, ours_mb = measure(["-m", "sphr.cli", "-q", "ingest", str(path),
                                "--out", str(workdir / "ours")], sys.executable, peak_file, env)
    print(f"ours: {ours_s:.2f} s, {ours_mb:.0f} MiB", file=sys.stderr)
    naive_s, naive_mb = measure(["-p", str(Path(__file__).resolve()), "--naive", str(path),
                                  str(column_file), str(args.participants)],
                                 sys.executable, peak_file, env)
    print(f"naive pandas: {naive_s:.2f} s, {naive_mb:.0f} MiB", file=sys.stderr)

    funpack_s = funpack_mb = None
    cells = explained = None
    if args.funpack is None or not args.funpack.exists():
        print("FUNPACK skipped: pass --funpack PATH/bin/fmrib_unpack of a venv with "
              "fmrib-unpack==4.0.1 (see the module docstring)", file=sys.stderr)
    else:
        out = workdir / "funpack.tsv"
        # " -1,-3": a leading space keeps argparse from taking the codes for an option
        # (FUNPACK adds it itself, but only to the first --na_values)
        na_args = [a for fid, codes in na.items() if codes
                   for a in ("--na_values", str(fid), " " + ",".join(map(str, codes)))]
        cmd = [str(args.funpack), "--no_download", "--quiet", "--overwrite",
               "--num_jobs", str(args.funpack_jobs), "--column", str(column_file),
               *na_args, str(out), str(path)]
        funpack_s, funpack_mb = measure(["-p", *cmd], _funpack_python(args.funpack),
                                         peak_file, env)
        print(f"FUNPACK: {funpack_s:.2f} s, {funpack_mb:.0f} MiB", file=sys.stderr)
        os.environ["SPHR_PROGRESS"] = "0"
        cells, explained = _compare(path, out)

    result: dict[str, Any] = {
        "ours_s": round(ours_s, 2), "ours_peak_mb": round(ours_mb),
        "naive_s": round(naive_s, 2), "naive_peak_mb": round(naive_mb),
        "funpack_s": None if funpack_s is None else round(funpack_s, 2),
        "funpack_peak_mb": None if funpack_mb is None else round(funpack_mb),
        "speedup_vs_funpack": _ratio(funpack_s, ours_s, 1),
        "memory_vs_funpack": _ratio(funpack_mb, ours_mb),
        "cells_differing": cells,
        "cells_set_missing_by_plausibility": explained,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--naive"]:
        _naive(*sys.argv[2:5])
    else:
        main()
