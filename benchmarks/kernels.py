"""Same seed, same outputs under every OpenBLAS kernel? Measured, cell by cell.

``python benchmarks/kernels.py --synth 20000`` writes ``sphr synth --participants N --seed 0``
under the Haswell, Zen and SkylakeX kernels (each in its own process with OPENBLAS_CORETYPE
set) and compares every cell of the exports and truth files with the first kernel's.
``--demo`` also runs the main command (``python -m sphr_dagster run``, the demo) under Haswell
and SkylakeX and compares every result table of the two run folders: identical bytes, equal
within 1e-9 relative, or the largest difference. The last line is one JSON object:
``kernels_ran``, ``synth`` (per kernel: differing cells, largest relative difference) and
``demo`` (per table: status, cells compared, differing cells, largest absolute and relative
difference; timings left out, they differ from run to run). docs/REPRODUCIBILITY.md reports it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from sphr.synth.frozen import as_numbers

KERNELS = ("Haswell", "Zen", "SkylakeX")
DEMO_KERNELS = ("Haswell", "SkylakeX")
RTOL = 1e-9
#: the result tables a reader sees; model weights and logs are not results
TABLE_SUFFIXES = (".csv", ".parquet", ".json", ".md")
SKIPPED_NAMES = ("run_settings.json", "timings.json", "progress.json")
#: a key or column that holds how long something took: it differs from run to run anyway
TIMING = re.compile(r"(^|_)s$|seconds|per_s$|^timings$|elapsed")


def _is_timing(name: str) -> bool:
    parts = re.split(r"[/\[\]]+", name.lower())
    return any(TIMING.search(part) for part in parts if part and not part.isdigit())


def _env(kernel: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENBLAS_")}
    env.update(OPENBLAS_CORETYPE=kernel, SPHR_PROGRESS="0")
    return env


def _kernel_ran(kernel: str) -> str:
    code = ("from threadpoolctl import threadpool_info as t; import numpy; print(','.join("
            "sorted({i.get('architecture') or '?' for i in t() if i['internal_api']=='openblas'"
            "})))")
    done = subprocess.run([sys.executable, "-c", code], env=_env(kernel), capture_output=True,
                          text=True)
    return done.stdout.strip() if done.returncode == 0 else f"failed ({done.returncode})"


def _numeric(frame: pl.DataFrame) -> dict[str, np.ndarray]:
    """The columns that hold only numbers (empty cells missing), as float64 (NaN: missing)."""
    out = {}
    for name in frame.columns:
        numbers = as_numbers(frame[name])
        if numbers is not None:
            out[name] = numbers.fill_null(np.nan).to_numpy().astype(float)
    return out


def compare_frames(a: pl.DataFrame, b: pl.DataFrame) -> dict:
    """Cells compared, cells that differ, and the largest absolute and relative difference."""
    if a.columns != b.columns or a.height != b.height:
        return {"status": "different shape", "shape": [a.shape, b.shape]}
    a, b = (f.select([c for c in f.columns if not _is_timing(c)]) for f in (a, b))
    na, nb = _numeric(a), _numeric(b)
    cells = differing = 0
    worst_abs = worst_rel = 0.0
    for name in a.columns:
        if name in na and name in nb:
            x, y = na[name], nb[name]
            both = np.isfinite(x) & np.isfinite(y)
            d = np.abs(x - y)[both]
            # relative to the larger of the two: 1 where one is 0 and the other is not
            rel = d / np.maximum(np.maximum(np.abs(x[both]), np.abs(y[both])), 1e-300)
            differing += int((d > 0).sum()) + int((np.isfinite(x) != np.isfinite(y)).sum())
            worst_abs = max(worst_abs, float(d.max(initial=0.0)))
            worst_rel = max(worst_rel, float(rel.max(initial=0.0)))
        else:
            differing += int((a[name].cast(pl.String).fill_null("")
                              != b[name].cast(pl.String).fill_null("")).sum())
        cells += a.height
    status = "identical" if differing == 0 else (
        "within 1e-9" if worst_rel <= RTOL else "differs")
    return {"status": status, "cells": cells, "differing_cells": differing,
            "max_abs_diff": worst_abs, "max_rel_diff": worst_rel}


def _read(path: Path) -> pl.DataFrame | None:
    if path.suffix == ".parquet":
        return pl.read_parquet(path)
    if path.suffix == ".csv":
        return pl.read_csv(path, infer_schema=False)
    return None


def _flatten(value, prefix: str = "") -> dict[str, object]:
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}/{k}"))
        return out
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _text(path: Path, root: Path) -> str:
    """A result file's text with its run folder's path written as RUN (the two runs differ)."""
    return path.read_text().replace(str(root.resolve()), "RUN").replace(str(root), "RUN")


def _compare_json(a: Path, b: Path, roots: tuple[Path, Path]) -> dict:
    x = _flatten(json.loads(_text(a, roots[0])))
    y = _flatten(json.loads(_text(b, roots[1])))
    if set(x) != set(y):
        return {"status": "different keys", "keys": sorted(set(x) ^ set(y))[:10]}
    x, y = ({k: v for k, v in d.items() if not _is_timing(k)} for d in (x, y))
    numbers = [k for k in x if isinstance(x[k], float | int) and not isinstance(x[k], bool)]
    frame = pl.DataFrame({"key": numbers, "a": [float(x[k]) for k in numbers]})
    other = pl.DataFrame({"key": numbers, "a": [float(y[k]) for k in numbers]})
    result = compare_frames(frame, other)
    texts = [k for k in x if k not in numbers and x[k] != y[k]]
    if texts:
        result.update(status="differs", differing_text=texts[:10])
    elif result.get("differing_cells") == 0:
        result["status"] = "identical but for the run folder"
    return result


def compare_runs(a: Path, b: Path) -> dict[str, dict]:
    """Every result table under run folder ``a`` against the same file under ``b``."""
    out = {}
    for path in sorted(a.rglob("*")):
        if path.suffix not in TABLE_SUFFIXES or path.name in SKIPPED_NAMES:
            continue
        rel = path.relative_to(a)
        other = b / rel
        if not other.exists():
            out[str(rel)] = {"status": "missing in the other run"}
        elif path.read_bytes() == other.read_bytes():
            out[str(rel)] = {"status": "identical bytes"}
        elif path.suffix == ".json":
            out[str(rel)] = _compare_json(path, other, (a, b))
        elif path.suffix == ".md":
            same = _text(path, a) == _text(other, b)
            out[str(rel)] = {"status": "identical but for the run folder" if same
                             else "text differs"}
        else:
            out[str(rel)] = compare_frames(_read(path), _read(other))
    return out


def synth_across_kernels(n: int, work: Path) -> dict[str, dict]:
    files = {}
    for kernel in KERNELS:
        out = work / kernel / "ukb.csv"
        out.parent.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "sphr.cli", "-q", "synth", "--participants",
                        str(n), "--seed", "0", "--out", str(out)], env=_env(kernel), check=True,
                       capture_output=True)
        files[kernel] = out
    first = KERNELS[0]
    result = {}
    for kernel in KERNELS[1:]:
        export = compare_frames(pl.read_csv(files[first], infer_schema=False),
                                pl.read_csv(files[kernel], infer_schema=False))
        truth = compare_frames(pl.read_parquet(files[first].with_suffix(".truth.parquet")),
                               pl.read_parquet(files[kernel].with_suffix(".truth.parquet")))
        result[f"{first} vs {kernel}"] = {"export": export, "truth": truth}
    return result


def demo_across_kernels(work: Path) -> tuple[dict[str, dict], dict[str, float]]:
    seconds = {}
    for kernel in DEMO_KERNELS:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sphr_dagster", "run", "--run-dir",
                        str(work / kernel)], env=_env(kernel), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        seconds[kernel] = round(time.perf_counter() - start, 1)
    return compare_runs(work / DEMO_KERNELS[0], work / DEMO_KERNELS[1]), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--synth", type=int, default=20_000, metavar="N",
                        help="participants of the synthetic export (default %(default)s)")
    parser.add_argument("--demo", action="store_true", help="also run the demo under two kernels")
    parser.add_argument("--keep", type=Path, help="keep the runs in this folder")
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        result: dict = {"kernels_ran": {k: _kernel_ran(k) for k in KERNELS},
                        "participants": args.synth,
                        "synth": synth_across_kernels(args.synth, work / "synth")}
        if args.demo:
            tables, seconds = demo_across_kernels(work / "demo")
            result["demo"] = tables
            result["demo_seconds"] = seconds
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
