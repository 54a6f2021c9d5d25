"""Settings of the risk stage: one dataclass, read by the CLI and the Dagster assets.

Only light imports, so ``sphr --help`` builds its parser without pandas.
"""

from __future__ import annotations

from dataclasses import dataclass

from sphr.errors import ConfigError
from sphr.labels import SEXES
from sphr.risk.intervals import MODES
from sphr.risk.spaces import METHODS

#: scores researchers already use, computed per person (:mod:`sphr.risk.scores`)
SCORE_METHODS: tuple[str, ...] = ("phenoage", "supervised_xgboost")
#: every method: the distance methods, then the scores researchers already use
ALL_METHODS: tuple[str, ...] = (*METHODS, *SCORE_METHODS)
#: methods that need a model file from an earlier stage or an optional input; skipped with
#: a log line (and listed in the report) when it is missing
OPTIONAL_METHODS: tuple[str, ...] = ("deep_patient", "sphr", "phenoage", "supervised_xgboost")


@dataclass
class RiskConfig:
    methods: tuple[str, ...] = ALL_METHODS
    modes: tuple[str, ...] = MODES
    #: validation population: ``test`` participants (no fit has seen them)
    validate_on: str = "test"
    min_group_size: int = 10
    #: fewest training BFH per age group for the score's age standardization
    standardize_min_group: int = 30
    #: participant bootstrap resamples of the discrimination intervals
    n_bootstrap: int = 500
    #: resamples for the linked-outcome intervals (Cox and Kaplan-Meier fits are slower)
    n_bootstrap_linked: int = 200
    seed: int = 0
    device: str = "auto"
    sexes: tuple[str, ...] = SEXES

    def check(self) -> None:
        bad = [m for m in self.methods if m not in ALL_METHODS] + \
            [m for m in self.modes if m not in MODES]
        if bad:
            raise ConfigError(f"unknown method/mode {bad}: methods {ALL_METHODS}, modes {MODES}")
        if self.validate_on != "test":
            # "all" validated SPHR on training rows it was trained to push away from BFH
            raise ConfigError("validate_on must be test: every other partition was seen by a fit")


