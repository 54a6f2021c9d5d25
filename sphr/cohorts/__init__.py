"""Cohorts and training data: completeness, sex split, quantile normalization, BFH, augmentation, triplets."""

from __future__ import annotations

from sphr import lazy_exports

#: public names and their modules, imported on first use (PEP 562) so that reading a
#: constant such as the age groups does not pull in pandas and scipy
_LAZY: dict[str, str] = {
    "DEFAULT_AGE_GROUPS": "sphr.cohorts.config", "assign_age_groups": "sphr.cohorts.age",
    "rejection_sample": "sphr.cohorts.augment", "CohortConfig": "sphr.cohorts.config",
    "SexCohort": "sphr.cohorts.build", "build_cohorts": "sphr.cohorts.build",
    "run_cohorts": "sphr.cohorts.build", "CompletenessFilter": "sphr.cohorts.filtering",
    "QuantileNormalizer": "sphr.cohorts.normalize", "P0_RANGES": "sphr.cohorts.ranges",
    "ClinicalRange": "sphr.cohorts.ranges", "bona_fide_mask": "sphr.cohorts.ranges",
    "mine_triplets": "sphr.cohorts.triplets",
}
__all__ = sorted(_LAZY)
__getattr__ = lazy_exports(__name__, _LAZY)
