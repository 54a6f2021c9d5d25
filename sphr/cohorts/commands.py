"""``sphr cohorts``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sphr.profiles import DEFAULT_PROFILE, PROFILES

if TYPE_CHECKING:
    from sphr.cohorts.config import CohortConfig


def register(sub: argparse._SubParsersAction) -> None:
    # every default and every default in a help text is read from the library's CohortConfig
    from sphr.cohorts.config import AUGMENTATIONS, CohortConfig

    defaults = CohortConfig()
    triplets = {name: f"{CohortConfig.profile(name).n_triplets:,}" for name in PROFILES}

    p = sub.add_parser(
        "cohorts", help="per-sex train/test data, normalizer, BFH augmentation, triplets",
        description="From baseline.parquet: completeness filter, complete cases, per-sex "
        "classes (unhealthy / apparently healthy / bona fide healthy), stratified split, "
        "quantile normalizer fitted on training rows, BFH augmentation, triplets.")
    p.add_argument("baseline", type=Path, help="baseline.parquet from sphr ingest")
    p.add_argument("--out", type=Path, required=True, help="output folder (one subfolder per sex)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, choices=PROFILES,
                   help="; ".join(f"{name}: {n} triplets" for name, n in triplets.items())
                   + " (default: %(default)s)")
    p.add_argument("--seed", type=int, default=defaults.seed, help="default: %(default)s")
    p.add_argument("--completeness", type=float, default=defaults.completeness,
                   help="keep features at least this complete (default %(default)s)")
    p.add_argument("--test-size", type=float, default=defaults.test_size,
                   help="share of each sex's cohort held out as the test partition "
                   "(default %(default)s)")
    p.add_argument("--bfh-fold", type=int, default=defaults.augment_fold["bona_fide_healthy"],
                   help="augmented BFH rows per real training BFH row (0, 1, 3, 5, 10; "
                   "default %(default)s)")
    p.add_argument("--augment", choices=AUGMENTATIONS, default=defaults.augment,
                   help="independent: the paper's per-feature draws; copula: joint draws that "
                   "keep correlations and point masses (default %(default)s)")
    p.add_argument("--calibration-size", type=float, default=defaults.calibration_size,
                   help="share of the training healthy classes held out to calibrate the risk "
                   "bounds (default %(default)s)")
    p.add_argument("--triplets", type=int, default=None,
                   help="number of triplets (default: the profile's)")
    p.add_argument("--balanced-triplets", action="store_true", default=defaults.balanced_triplets,
                   help="draw anchor classes uniformly instead of rows uniformly")
    p.add_argument("--age-matched-triplets", action="store_true",
                   default=defaults.age_matched_triplets,
                   help="draw each triplet's positive and negative from the anchor's age group")
    p.add_argument("--triplet-classes", choices=("labels", "severity"),
                   default=defaults.triplet_classes,
                   help="labels: the paper's classes; severity: the number of P0 markers out of "
                   "range (0, 1, 2, 3+) as the triplets' classes (default %(default)s)")
    p.add_argument("--ranges", type=Path, default=None,
                   help='JSON overrides of the P0 ranges, e.g. {"glucose": {"high": 6.0}}')
    p.add_argument("--sex", choices=("female", "male"), action="append", default=None,
                   help=f"only this sex (repeatable; default {' and '.join(defaults.sexes)})")
    p.set_defaults(func=_run)


def config_from_args(args: argparse.Namespace) -> CohortConfig:
    """The library's CohortConfig the parsed options ask for (no options: the profile's)."""
    from sphr.cohorts.config import CohortConfig
    from sphr.cohorts.ranges import load_overrides

    overrides = {"seed": args.seed, "completeness": args.completeness,
                 "test_size": args.test_size, "augment_fold": {"bona_fide_healthy": args.bfh_fold},
                 "balanced_triplets": args.balanced_triplets,
                 "age_matched_triplets": args.age_matched_triplets, "augment": args.augment,
                 "triplet_classes": args.triplet_classes,
                 "calibration_size": args.calibration_size,
                 "ranges": load_overrides(args.ranges)}
    if args.triplets is not None:
        overrides["n_triplets"] = args.triplets
    if args.sex:
        overrides["sexes"] = tuple(args.sex)
    return CohortConfig.profile(args.profile, **overrides)


def _run(args: argparse.Namespace) -> int:
    from sphr.cohorts.build import run_cohorts

    cohorts, report = run_cohorts(args.baseline, args.out, config_from_args(args))
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
