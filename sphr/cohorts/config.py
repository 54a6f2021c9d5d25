"""Settings of the cohort step: one dataclass, read by the library, the CLI and the Dagster
assets.

The defaults live here and nowhere else (``sphr cohorts`` and
``sphr_dagster.assets.cohorts.CohortConfig`` take theirs, and their help, from this class).
Only light imports, so ``sphr --help`` builds its parser without pandas or scikit-learn.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sphr.errors import ConfigError

if TYPE_CHECKING:
    from sphr.cohorts.ranges import ClinicalRange

#: inclusive [low, high] years; UKB baseline ages are 37-73
DEFAULT_AGE_GROUPS: tuple[tuple[int, int], ...] = (
    (36, 45), (46, 50), (51, 55), (56, 60), (61, 65), (66, 75),
)
#: ``independent``: the paper's Algorithm 1 (each feature drawn on its own); ``copula``: joint
#: draws that keep the class's correlations and point masses (docs/METHODS.md)
AUGMENTATIONS: tuple[str, ...] = ("independent", "copula")
#: what a triplet's classes are: ``labels`` (the paper's unhealthy / apparently healthy /
#: BFH) or ``severity`` (the number of P0 markers outside their ranges, 0..3+; docs/METHODS.md,
#: "SPHR variants aimed at risk")
TRIPLET_CLASSES: tuple[str, ...] = ("labels", "severity")

#: the paper's cohort protocol: complete cases and one split, no cross-fit
PAPER_PROTOCOL: dict[str, object] = {"folds": 0, "impute": False}
#: the synthetic demo's (the run without an export): the paper's complete cases, so its tables
#: reproduce the paper's, but cross-fitted in two folds, so every participant's risk group is
#: out of fold and the bounds rest on every healthy person (a single split's 50-60 calibration
#: BFH a sex leave Higher Risk empty: docs/BENCHMARKS.md). Two folds, not five, to stay within
#: the demo's time budget on two cores; an export's run takes :class:`CohortConfig`'s own
#: defaults: every participant, five folds
DEMO_PROTOCOL: dict[str, object] = {**PAPER_PROTOCOL, "folds": 2}

@dataclass
class CohortConfig:
    """Settings of the cohort step; defaults are the paper's (docs/METHODS.md)."""

    #: keep features at least this complete
    completeness: float = 0.75
    #: share of each sex's cohort held out as the test partition
    test_size: float = 0.3
    #: share of the training BFH and of the training apparently healthy set aside as the
    #: calibration partition: never seen by a normalizer, representation, covariance or
    #: reference; the risk stage's thresholds come from it (docs/METHODS.md)
    calibration_size: float = 0.2
    #: seed of the split, the augmentation and the triplets
    seed: int = 0
    #: folds of the cross-fit per sex (stratified by class and age group): fold k's cohort
    #: (``<sex>/folds/fold<k>/``) fits on the other folds and scores fold k, so every
    #: participant gets a risk score and group no fit has seen (docs/METHODS.md,
    #: "Cross-fitting"); 0: the single split only
    folds: int = 5
    #: fill a participant's missing markers inside each fit from the rows that fit saw (the
    #: training rows' median; docs/METHODS.md, "Missing markers"); off: complete cases only
    #: (the paper's protocol)
    impute: bool = True
    #: a participant missing more than this share of the kept markers is left out (counted in
    #: cohort_report.json under ``left_out``)
    max_missing: float = 0.5
    #: extra rows per real training row, by class name (0 = none); paper: BFH 3x
    augment_fold: dict[str, int] = field(default_factory=lambda: {"bona_fide_healthy": 3})
    #: ``independent`` (the paper's Algorithm 1: each feature drawn on its own) or ``copula``
    #: (joint draws that keep the class's correlations and point masses; docs/METHODS.md)
    augment: str = "independent"
    #: number of triplets
    n_triplets: int = 100_000
    #: draw anchor classes uniformly instead of rows uniformly
    balanced_triplets: bool = False
    #: positive and negative from the anchor's age group (docs/notes/SPHR_AGE.md): the triplets
    #: then never contrast an older unhealthy person with a younger healthy one
    age_matched_triplets: bool = False
    #: labels: the paper's classes; severity: the number of P0 markers out of range (0, 1, 2,
    #: 3+) as the triplets' classes
    triplet_classes: str = "labels"
    #: the age groups of age-matched triplets, inclusive [low, high] years
    age_groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS
    #: overrides of the P0 clinical ranges, e.g. {"glucose": {"low": 4.0}}
    ranges: dict | None = None
    #: quantiles of the quantile normalizer
    n_quantiles: int = 1000
    #: the sexes to build a cohort for
    sexes: tuple[str, ...] = ("female", "male")

    @classmethod
    def profile(cls, name: str, **overrides) -> CohortConfig:
        """``paper``: the paper's values. ``demo``: 20,000 triplets so the demo trains in
        seconds."""
        if name == "paper":
            return cls(**overrides)
        if name == "demo":
            return cls(**{"n_triplets": 20_000, **overrides})
        raise ConfigError(f"unknown profile {name!r}: use demo or paper")

    def clinical_ranges(self) -> tuple[ClinicalRange, ...]:
        from sphr.cohorts.ranges import P0_RANGES, with_overrides

        return with_overrides(self.ranges, P0_RANGES)
