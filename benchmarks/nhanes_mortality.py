"""NHANES 1999-2000 mortality check on real people (docs/notes/NHANES.md; the study:
benchmarks/nhanes_1999_2000.py).

Scores the 4,086 people of the vendored NHANES file (PhenoAge, homeostatic
dysregulation, raw Euclidean distance, age), reports Harrell's C against
all-cause death with bootstrap CIs, calibrated risk groups and the Cox hazard
ratio of Higher Risk vs Normal. Writes nhanes_mortality.json, a per-score table
and Kaplan-Meier curves into --out. Last line: one JSON object.

    python benchmarks/nhanes_mortality.py [--out runs/nhanes] [--seed 0] [--bootstrap 1000]
        [--space marker|quantile]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

#: the summary keys printed on the last line (the full result is in the JSON file)
KEYS = (
    "n", "deaths", "c_index_age", "c_index_phenoage", "c_index_mahalanobis",
    "c_index_raw_euclidean", "hr_higher_vs_normal", "hr_low", "hr_high",
    "c_index_age_ci", "c_index_phenoage_ci", "c_index_mahalanobis_ci",
    "c_index_raw_euclidean_ci", "c_index_phenoage_acceleration",
    "c_index_phenoage_acceleration_ci", "hr_higher_vs_normal_unadjusted",
    "hr_unadjusted_low", "hr_unadjusted_high", "group_shares", "saturated_share",
    "reference_max_age", "n_reference", "n_fit", "n_calibration", "space", "beyond_fit_share",
)


def _rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/nhanes"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--space", default="marker", choices=("marker", "quantile"),
                        help="the marker space of the distances (docs/METHODS.md): marker "
                        "(log-robust, linear beyond the fit; default) or quantile (the cohort "
                        "normalizer, capped at |z| = 5.2)")
    args = parser.parse_args()

    # the study module sits beside this script (benchmarks/ is on sys.path when it runs)
    from nhanes_1999_2000 import nhanes_mortality

    t = time.perf_counter()
    result = nhanes_mortality(out_dir=args.out, seed=args.seed, n_bootstrap=args.bootstrap,
                              space=args.space)
    summary = {key: _rounded(result[key]) for key in KEYS}
    summary["seconds"] = round(time.perf_counter() - t, 2)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
