"""Cohorts and training data: completeness, sex split, quantile normalization,
BFH, augmentation, triplets."""

from __future__ import annotations

from sphr import lazy_exports

#: public names and their modules, imported on first use (PEP 562) so that reading a
#: constant such as the age groups does not pull in pandas and scipy
_LAZY: dict[str, tuple[str, ...]] = {
    "sphr.cohorts.config": ("DEFAULT_AGE_GROUPS", "CohortConfig"),
    "sphr.cohorts.age": ("assign_age_groups",),
    "sphr.cohorts.augment": ("rejection_sample",),
    "sphr.cohorts.build": ("SexCohort", "build_cohorts", "run_cohorts"),
    "sphr.cohorts.filtering": ("CompletenessFilter",),
    "sphr.cohorts.normalize": ("QuantileNormalizer",),
    "sphr.cohorts.ranges": ("P0_RANGES", "ClinicalRange", "bona_fide_mask"),
    "sphr.cohorts.triplets": ("mine_triplets",),
}
__all__ = sorted(name for names in _LAZY.values() for name in names)
__getattr__ = lazy_exports(__name__, _LAZY)
