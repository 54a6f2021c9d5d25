"""The cross-fit's folds of one sex (docs/METHODS.md, "Cross-fitting").

Every participant is dealt into one of K folds, stratified by class and age group, so each
fold holds about the same share of bona fide healthy people of every age: fold k's cohort
trains on the other folds and scores fold k, and every participant gets a score no fit has
seen. Written here rather than with scikit-learn's ``StratifiedKFold`` because that warns
and leaves folds without a member when a stratum (say, the BFH aged 66-75) has fewer people
than folds; dealing each stratum in turn, continuing where the last one stopped, keeps the
fold sizes within one person of each other whatever the strata.
"""

from __future__ import annotations

import numpy as np

from sphr.errors import ConfigError

#: the purpose word of the folds' random stream (``SeedSequence([seed, sex, purpose])``), so
#: drawing the folds moves none of the cohort's other streams
FOLD_PURPOSE = 5


def assign_folds(labels: np.ndarray, age_groups: np.ndarray, folds: int,
                 rng: np.random.Generator) -> np.ndarray:
    """The fold (0..folds-1) of each participant, stratified by class and age group."""
    labels, age_groups = np.asarray(labels), np.asarray(age_groups, dtype=object)
    if folds < 2:
        raise ConfigError(f"folds must be at least 2 for a cross-fit, got {folds}")
    if labels.size < folds:
        raise ConfigError(f"{labels.size} participants cannot be dealt into {folds} folds")
    out = np.full(labels.size, -1, dtype=np.int64)
    strata = sorted({(int(c), str(g)) for c, g in zip(labels, age_groups, strict=True)})
    start = 0
    for c, g in strata:
        members = np.flatnonzero((labels == c) & (age_groups.astype(str) == g))
        members = rng.permutation(members)
        out[members] = (start + np.arange(members.size)) % folds
        start = (start + members.size) % folds
    return out
