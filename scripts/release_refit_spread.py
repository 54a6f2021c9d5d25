"""The release step of the refit spread (``make refit-spread``): check the study's results
file ``benchmarks/results/refit_spread.json`` (written by ``benchmarks/real_nhanes.py
--record-spread``) and copy it, byte for byte and atomically, into the risk stage's package
data ``sphr/risk/refit_spread.json``, which the report reads (sphr.risk.refits).

Why a step of its own: the report must work offline from a wheel, so the spread it shows
ships inside the package; but a study run is not a release, so no benchmark writes into the
package. Running this is the decision that the measured spread is the one users see.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sphr.io import write_bytes
from sphr.risk.refits import SPREAD_FILE, check_spreads

REPO = Path(__file__).resolve().parents[1]
#: the study's results file (benchmarks/nhanes_crossfit/spread_file.py SPREAD_FILE)
RESULTS = REPO / "benchmarks" / "results" / "refit_spread.json"


def release(results: Path = RESULTS, packaged: Path = SPREAD_FILE) -> bool:
    """Copy ``results`` into ``packaged`` when it is a valid spread file; False (nothing
    written) when it is not. Returns True also when the two already agree."""
    data = results.read_bytes()
    try:
        problems = check_spreads(json.loads(data))
    except json.JSONDecodeError as err:
        problems = [f"not JSON: {err}"]
    if problems:
        print(f"{results}: not released:\n  " + "\n  ".join(problems), file=sys.stderr)
        return False
    if packaged.exists() and packaged.read_bytes() == data:
        print(f"{packaged} already holds {results}")
        return True
    write_bytes(data, packaged)
    print(f"released {results} -> {packaged}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--check", action="store_true",
                        help="only check that the package data is the released results")
    args = parser.parse_args(argv)
    if args.check:
        same = SPREAD_FILE.read_bytes() == args.results.read_bytes()
        print("package data is the released results" if same else
              f"{SPREAD_FILE} differs from {args.results}: run make refit-spread")
        return 0 if same else 1
    return 0 if release(args.results) else 1


if __name__ == "__main__":
    sys.exit(main())
