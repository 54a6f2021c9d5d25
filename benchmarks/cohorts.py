"""Cohort step on a 500,000-participant synthetic baseline.

Times mining 100,000 triplets (the paper reports 1.27 min) and the whole step:
completeness filter, per-sex split, normalizer, BFH augmentation, triplets and
writing every file. Last line: one JSON object with triplets_s and total_s.

    python benchmarks/cohorts.py [--participants 500000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--participants", type=int, default=500_000)
    parser.add_argument("--triplets", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    import numpy as np

    from sphr.cohorts import CohortConfig, mine_triplets, run_cohorts
    from sphr.data.ingest import run_ingest
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import write_export

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sphr-bench-"))
    baseline = workdir / f"ingest_{args.participants}" / "baseline.parquet"
    if not baseline.exists():
        export = workdir / f"ukb_{args.participants}.parquet"
        write_export(generate_cohort(args.participants, seed=0), export, "parquet", decoys=0)
        run_ingest(export, baseline.parent)
        print(f"built {baseline}", file=sys.stderr)

    t = time.perf_counter()
    cohorts, report = run_cohorts(baseline, workdir / f"cohorts_{args.participants}",
                                  CohortConfig(n_triplets=args.triplets, seed=0))
    total_s = time.perf_counter() - t

    labels = cohorts["female"].train["label"].to_numpy()
    mine_triplets(labels, args.triplets, seed=1)  # warm-up
    runs = []
    for seed in range(5):
        t = time.perf_counter()
        mine_triplets(labels, args.triplets, seed=seed)
        runs.append(time.perf_counter() - t)
    print(json.dumps({
        "participants": args.participants, "kept": report["kept"],
        "train_rows": {s: len(c.train) for s, c in cohorts.items()},
        "triplets": args.triplets, "triplets_s": round(float(np.median(runs)), 4),
        "total_s": round(total_s, 2),
    }))


if __name__ == "__main__":
    main()
