"""Write ``frozen_digests.json``: the value digests of the frozen synthetic exports.

Run only for a new generator version (docs/SYNTH.md, reproducibility):
``python tests/data/frozen_digests.py``. Each entry is what ``tests/test_reproducible.py`` makes:
``sphr synth --participants 2000`` per world and seed, and the ingest of the shared test export
(generate_cohort(2_000, seed=11), ukbconv, 25 decoys).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import polars as pl

from sphr.cli import main as sphr
from sphr.data.ingest import run_ingest
from sphr.synth.cohort import generate_cohort
from sphr.synth.export import write_export
from sphr.synth.frozen import export_digest, table_digest

OUT = Path(__file__).with_name("frozen_digests.json")


def main() -> None:
    digests = {}
    with tempfile.TemporaryDirectory() as tmp:
        for world, seed in (("linear", 0), ("nonlinear", 3)):
            path = Path(tmp) / f"{world}.csv"
            sphr(["-q", "synth", "--participants", "2000", "--seed", str(seed), "--world", world,
                  "--out", str(path)])
            digests[f"export:{world}:{seed}"] = export_digest(path)
        export = write_export(generate_cohort(2_000, seed=11), Path(tmp) / "ukb.csv", "ukbconv",
                              decoys=25, seed=11)
        run_ingest(export, Path(tmp) / "ingest")
        base = pl.read_parquet(Path(tmp) / "ingest" / "baseline.parquet")
        digests["baseline:ingest_dir"] = table_digest(base)
    OUT.write_text(json.dumps(digests, separators=(",", ":"), sort_keys=False) + "\n")
    print(f"wrote {OUT} ({sum(len(d) for d in digests.values())} columns)")


if __name__ == "__main__":
    main()
