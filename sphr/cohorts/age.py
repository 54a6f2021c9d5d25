"""Age groups for the per-sex, per-age risk references (docs/METHODS.md#cohort-preparation)."""

from __future__ import annotations

import numpy as np

from sphr.cohorts.config import DEFAULT_AGE_GROUPS


def group_names(groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS) -> list[str]:
    return [f"{lo}-{hi}" for lo, hi in groups]


def assign_age_groups(ages: np.ndarray, groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS
                      ) -> tuple[np.ndarray, int]:
    """Group name per age, and how many ages fell outside every group.

    Nearest-group rule (documented): an age outside all groups joins the closest
    group edge (a 35-year-old joins 36-45, a 76-year-old 66-75), so every
    participant gets exactly one reference. Ages between two groups' edges
    (e.g. 45.5) go to the group whose edge is closer, the lower on a tie.
    """
    ages = np.asarray(ages, dtype=float)
    if np.isnan(ages).any():
        from sphr.errors import InputError

        raise InputError("age is missing for some participants; cannot assign an age group")
    lows = np.array([g[0] for g in groups], dtype=float)
    highs = np.array([g[1] for g in groups], dtype=float)
    # distance to each group's interval: 0 inside
    dist = (np.maximum(lows[None, :] - ages[:, None], 0)
            + np.maximum(ages[:, None] - highs[None, :], 0))
    idx = np.argmin(dist, axis=1)
    outside = int((dist.min(axis=1) > 0).sum())
    names = np.array(group_names(groups), dtype=object)
    return names[idx], outside
