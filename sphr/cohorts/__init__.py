"""Cohorts and training data: completeness, sex split, quantile normalization, BFH, augmentation, triplets."""

from sphr.cohorts.age import DEFAULT_AGE_GROUPS, assign_age_groups
from sphr.cohorts.augment import rejection_sample
from sphr.cohorts.build import CohortConfig, SexCohort, build_cohorts, run_cohorts
from sphr.cohorts.filtering import CompletenessFilter
from sphr.cohorts.normalize import QuantileNormalizer
from sphr.cohorts.ranges import P0_RANGES, ClinicalRange, bona_fide_mask
from sphr.cohorts.triplets import mine_triplets

__all__ = [
    "DEFAULT_AGE_GROUPS", "P0_RANGES", "ClinicalRange", "CohortConfig", "CompletenessFilter",
    "QuantileNormalizer", "SexCohort", "assign_age_groups", "bona_fide_mask", "build_cohorts",
    "mine_triplets", "rejection_sample", "run_cohorts",
]
