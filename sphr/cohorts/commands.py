"""``sphr cohorts``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sphr.profiles import DEFAULT_PROFILE, PROFILES

if TYPE_CHECKING:
    from sphr.cohorts.config import CohortConfig


def register(sub: argparse._SubParsersAction) -> None:
    # every option of a setting is generated from the library's CohortConfig: its default,
    # and its help the field's doc (sphr.options)
    from sphr.cohorts.config import AUGMENTATIONS, TRIPLET_CLASSES, CohortConfig
    from sphr.cohorts.ranges import load_overrides
    from sphr.options import Option, add_settings

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
    options = add_settings(p, CohortConfig, defaults=defaults, options={
        "augment_fold": Option(
            "--bfh-fold", {"type": int, "metavar": None,
                           "default": defaults.augment_fold["bona_fide_healthy"]},
            read=lambda fold: {"bona_fide_healthy": fold},
            note="this option: the bona fide healthy class's, 0, 1, 3, 5 or 10"),
        "augment": Option(kwargs={"choices": AUGMENTATIONS}),
        "triplet_classes": Option(kwargs={"choices": TRIPLET_CLASSES}),
        "n_triplets": Option("--triplets", {"default": None}),
        "age_groups": Option(kwargs={"default": None},
                             read=lambda groups: tuple(tuple(g) for g in groups)),
        "n_quantiles": Option(kwargs={"default": None}),
        "ranges": Option(kwargs={"type": Path, "metavar": "FILE"}, read=load_overrides,
                         note="this option: a JSON file of them", unset="the P0 ranges"),
        "sexes": Option("--sex", {"type": str, "metavar": None, "action": "append",
                                  "choices": ("female", "male"), "default": None},
                        read=tuple, note="repeatable", unset=" and ".join(defaults.sexes))},
        stage="cohorts")
    p.set_defaults(func=_run, setting_options=options)


def config_from_args(args: argparse.Namespace) -> CohortConfig:
    """The library's CohortConfig the parsed options ask for (no options: the profile's)."""
    from sphr.cohorts.config import CohortConfig

    return CohortConfig.profile(args.profile, **args.setting_options.values(args))


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
