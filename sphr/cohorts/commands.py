"""``sphr cohorts``."""

from __future__ import annotations

import argparse
from pathlib import Path

from sphr.profiles import DEFAULT_PROFILE, PROFILES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cohorts", help="per-sex train/test data, normalizer, BFH augmentation, triplets",
        description="From baseline.parquet: completeness filter, complete cases, per-sex "
        "classes (unhealthy / apparently healthy / bona fide healthy), stratified split, "
        "quantile normalizer fitted on training rows, BFH augmentation, triplets.")
    p.add_argument("baseline", type=Path, help="baseline.parquet from sphr ingest")
    p.add_argument("--out", type=Path, required=True, help="output folder (one subfolder per sex)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, choices=PROFILES,
                   help="paper: 100,000 triplets; demo: 20,000 (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--completeness", type=float, default=0.75,
                   help="keep features at least this complete (default 0.75)")
    p.add_argument("--test-size", type=float, default=0.3)
    p.add_argument("--bfh-fold", type=int, default=3,
                   help="augmented BFH rows per real training BFH row (0, 1, 3, 5, 10; default 3)")
    p.add_argument("--augment", choices=("independent", "copula"), default="independent",
                   help="independent: the paper's per-feature draws (default); copula: joint "
                   "draws that keep correlations and point masses")
    p.add_argument("--calibration-size", type=float, default=0.2,
                   help="share of the training healthy classes held out to calibrate the risk "
                   "bounds (default 0.2)")
    p.add_argument("--triplets", type=int, default=None, help="number of triplets")
    p.add_argument("--balanced-triplets", action="store_true",
                   help="draw anchor classes uniformly instead of rows uniformly")
    p.add_argument("--ranges", type=Path, default=None,
                   help='JSON overrides of the P0 ranges, e.g. {"glucose": {"high": 6.0}}')
    p.add_argument("--sex", choices=("female", "male"), action="append", default=None,
                   help="only this sex (repeatable; default both)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from sphr.cohorts.build import CohortConfig, run_cohorts
    from sphr.cohorts.ranges import load_overrides

    overrides = {"seed": args.seed, "completeness": args.completeness,
                 "test_size": args.test_size, "augment_fold": {"bona_fide_healthy": args.bfh_fold},
                 "balanced_triplets": args.balanced_triplets, "augment": args.augment,
                 "calibration_size": args.calibration_size,
                 "ranges": load_overrides(args.ranges)}
    if args.triplets is not None:
        overrides["n_triplets"] = args.triplets
    if args.sex:
        overrides["sexes"] = tuple(args.sex)
    config = CohortConfig.profile(args.profile, **overrides)
    cohorts, report = run_cohorts(args.baseline, args.out, config)
    print(f"{report['kept']} of {report['participants']} participants kept "
          f"({report['complete_cases']} complete cases, {report['unknown_label']} unknown label); "
          f"dropped features: {list(report['dropped_features']) or 'none'}")
    for sex, c in cohorts.items():
        r = c.report
        print(f"{sex}: {r['classes']}, BFH {r['bfh_share']:.1%} of the cohort; "
              f"train {len(c.train)} rows ({r['augmented']['bona_fide_healthy']} augmented), "
              f"test {len(c.test)}, {r['triplets']['n']} triplets")
    print(f"wrote {args.out}/<sex>/")
    return 0
