"""Feature completeness, complete cases and constant features
(docs/METHODS.md#cohort-preparation, steps 1-2)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sphr.cohorts.config import CohortConfig
from sphr.errors import ConfigError


@dataclass
class CompletenessFilter:
    """Keep features at least ``threshold`` complete; report what was dropped and why."""

    threshold: float = CohortConfig.completeness
    kept_: list[str] = field(default_factory=list)
    dropped_: dict[str, str] = field(default_factory=dict)
    completeness_: dict[str, float] = field(default_factory=dict)

    def fit(self, frame: pd.DataFrame, features: list[str]) -> CompletenessFilter:
        if not 0 < self.threshold <= 1:
            raise ConfigError(f"completeness threshold must be in (0, 1], got {self.threshold}")
        share = frame[features].notna().mean()
        self.completeness_ = {f: round(float(share[f]), 4) for f in features}
        self.kept_ = [f for f in features if share[f] >= self.threshold]
        self.dropped_ = {f: f"{share[f]:.1%} complete, below {self.threshold:.0%}"
                         for f in features if share[f] < self.threshold}
        return self

    def complete_cases(self, frame: pd.DataFrame) -> np.ndarray:
        """True for participants with every kept feature present."""
        return frame[self.kept_].notna().all(axis=1).to_numpy()


def constant_features(frame: pd.DataFrame, features: list[str]) -> list[str]:
    """Features with a single value: no ranks to normalize, no information to learn."""
    values = frame[features].to_numpy(dtype=float)
    return [f for f, lo, hi in zip(features, np.nanmin(values, 0), np.nanmax(values, 0),
                                   strict=True) if lo == hi]
