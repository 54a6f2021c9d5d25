"""How many people of each class each sex's partitions would hold, without building a cohort.

The pre-flight check of a run (:mod:`sphr.settings.preflight`) compares these counts with what
every stage needs before anything is fitted. The counts come from the cohort step's own rules
(:func:`sphr.cohorts.build.prepare`, :func:`sphr.cohorts.ranges.assign_classes`, the stratified
and calibration splits), so they are the partitions ``sphr cohorts`` would write: no model,
normalizer or augmentation is fitted here, and a 5,000-person export is counted in about a
second.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sphr.cohorts.build import _calibration_split, _split, prepare
from sphr.cohorts.config import CohortConfig
from sphr.cohorts.ranges import assign_classes, severity_classes
from sphr.labels import BONA_FIDE_HEALTHY, CLASS_NAMES, SEX_CODE


@dataclass(frozen=True)
class PartitionCounts:
    """One sex's people by partition and class (``sphr.labels`` class codes as keys)."""

    sex: str
    #: labeled complete cases of this sex (what the cohort step starts from)
    participants: int
    classes: dict[int, int]
    train: dict[int, int]
    test: dict[int, int]
    calibration: dict[int, int]
    #: the triplet classes of the training rows (labels or severity, as configured)
    triplet_classes: dict[int, int]
    #: the features the completeness filter keeps (over both sexes)
    features: tuple[str, ...]

    def total(self, partition: str) -> int:
        return sum(getattr(self, partition).values())

    def describe(self, partition: str) -> str:
        """``12 unhealthy, 30 apparently healthy, 3 bona fide healthy``."""
        counts = getattr(self, partition)
        return ", ".join(f"{counts.get(c, 0)} {name.replace('_', ' ')}"
                         for c, name in enumerate(CLASS_NAMES))


def _by_class(labels: np.ndarray) -> dict[int, int]:
    values, counts = np.unique(labels, return_counts=True)
    return {int(v): int(n) for v, n in zip(values, counts, strict=True)}


def _sex_counts(frame: pd.DataFrame, sex: str, features: list[str],
                config: CohortConfig) -> PartitionCounts:
    ranges = config.clinical_ranges()
    labels = assign_classes(frame, sex, ranges) if len(frame) else np.empty(0, np.int8)
    classes = _by_class(labels)
    empty = PartitionCounts(sex, len(frame), classes, {}, {}, {}, {}, tuple(features))
    # the splits need two classes and a BFH member; without them the cohort step stops,
    # and the pre-flight says so from ``classes`` alone
    if len(classes) < 2 or classes.get(BONA_FIDE_HEALTHY, 0) == 0:
        return empty
    # the same seeds as build_sex_cohort, so the counts are the partitions it writes
    seeds = np.random.SeedSequence([config.seed, SEX_CODE[sex]]).generate_state(4)
    train_idx, test_idx = _split(labels, config.test_size, int(seeds[0]))
    train_idx, calib_idx = _calibration_split(labels, train_idx, config.calibration_size,
                                              int(seeds[3]))
    train_frame = frame.iloc[train_idx]
    triplet = (severity_classes(train_frame, sex, ranges) if config.triplet_classes == "severity"
               else labels[train_idx])
    return PartitionCounts(sex, len(frame), classes, _by_class(labels[train_idx]),
                           _by_class(labels[test_idx]), _by_class(labels[calib_idx]),
                           _by_class(triplet), tuple(features))


def partition_counts(baseline: pd.DataFrame, config: CohortConfig) -> dict[str, PartitionCounts]:
    """Each configured sex's partition counts, from the ingested ``baseline``."""
    frame, features, _ = prepare(baseline, config)
    out = {}
    for sex in config.sexes:
        sub = frame.loc[frame["sex"] == SEX_CODE[sex]].reset_index(drop=True)
        out[sex] = _sex_counts(sub, sex, features, config)
    return out
