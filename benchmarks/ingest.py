"""Ingest a 500,000-participant ukbconv CSV with 300 decoy columns, ours vs naive pandas.

Each way runs in its own process so peak memory (ru_maxrss) is its own.
Last line: one JSON object with ours_s, naive_s, speedup_ratio, ours_peak_mb,
naive_peak_mb, memory_ratio.

    python benchmarks/ingest.py [--participants 500000] [--decoys 300] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OURS = """
import resource, sys, time
from sphr.data.ingest import ingest
t = time.perf_counter()
result = ingest(sys.argv[1])
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      result.baseline.height)
"""

# The naive way: read everything, then select the same columns (what most UKB scripts do).
NAIVE = """
import resource, sys, time
import pandas as pd
from sphr.data.reader import inspect_export
from sphr.data.ingest import _plan
layout = inspect_export(sys.argv[1])
cols = [layout.eid_column] + [layout.columns[k] for k in _plan(layout, [])]
t = time.perf_counter()
frame = pd.read_csv(sys.argv[1], low_memory=False)[cols]
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
      len(frame))
"""


def _run(code: str, path: Path) -> tuple[float, float, int]:
    out = subprocess.run([sys.executable, "-c", code, str(path)], check=True,
                         capture_output=True, text=True, env={"SPHR_PROGRESS": "0",
                                                              **_env()}).stdout.split()
    return float(out[0]), float(out[1]), int(out[2])


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "SPHR_PROGRESS"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=500_000)
    parser.add_argument("--decoys", type=int, default=300)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    from sphr.data.export import write_export
    from sphr.data.synth import generate_cohort

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sphr-bench-"))
    path = workdir / f"ukb_{args.participants}_{args.decoys}.csv"
    if not path.exists():
        t = time.perf_counter()
        write_export(generate_cohort(args.participants, seed=0), path, "ukbconv",
                     decoys=args.decoys, seed=0)
        print(f"wrote {path} ({path.stat().st_size / 1e9:.2f} GB) in "
              f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
    ours_s, ours_mb, n_ours = _run(OURS, path)
    naive_s, naive_mb, n_naive = _run(NAIVE, path)
    assert n_ours == n_naive == args.participants
    print(json.dumps({
        "participants": args.participants, "decoys": args.decoys,
        "file_gb": round(path.stat().st_size / 1e9, 2),
        "ours_s": round(ours_s, 2), "naive_s": round(naive_s, 2),
        "speedup_ratio": round(naive_s / ours_s, 1),
        "ours_peak_mb": round(ours_mb), "naive_peak_mb": round(naive_mb),
        "memory_ratio": round(naive_mb / ours_mb, 1),
    }))


if __name__ == "__main__":
    main()
