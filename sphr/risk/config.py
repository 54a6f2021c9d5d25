"""Settings of the risk stage: one dataclass, read by the CLI and the Dagster assets.

Only light imports, so ``sphr --help`` builds its parser without pandas.
"""

from __future__ import annotations

from dataclasses import dataclass

from sphr.errors import ConfigError
from sphr.labels import SEXES
from sphr.risk.calibration import STANDARDIZATIONS, TAIL_BOUND, TAIL_BOUNDS
from sphr.risk.intervals import MODES


@dataclass(frozen=True)
class MethodInfo:
    """What the project knows of one risk method, in one place: its name, how people read
    it, and the facts the stage dispatches on. Every list of methods below is a view of
    :data:`RISK_METHODS` (their order is the registry's)."""

    name: str
    #: the report's full name, and the figures' short one (None: the full name)
    display: str
    short: str | None = None
    #: ``distance`` (a space and a reference per age group; :mod:`sphr.risk.spaces`) or
    #: ``score`` (given per person; :mod:`sphr.risk.comparators`)
    kind: str = "distance"
    #: one of the paper's five; mode ``paper`` (Eq. A.4) is defined for these
    paper: bool = False
    #: measured in the marker space (the others embed first)
    marker_space: bool = False
    #: the representation a deep method embeds with (``deep_patient`` / ``sphr``)
    embedded_by: str | None = None
    #: an SPHR variant aimed at risk (docs/METHODS.md, "SPHR variants aimed at risk")
    variant: bool = False
    #: needs a model file from an earlier stage or an optional input: skipped with a log line
    #: (and listed in the report) when it is missing
    optional: bool = False


#: every risk method: the distance methods, then the scores researchers already use
RISK_METHODS: dict[str, MethodInfo] = {m.name: m for m in (
    MethodInfo("raw_euclidean", "Euclidean (raw)", paper=True, marker_space=True),
    MethodInfo("mahalanobis", "Mahalanobis (age-group BFH)", short="Mahalanobis", paper=True,
              marker_space=True),
    MethodInfo("homeostatic_dysregulation", "Homeostatic dysregulation",
              short="Homeostatic dysreg.", marker_space=True),
    MethodInfo("p0_euclidean", "P0 (Euclidean)", paper=True, marker_space=True),
    MethodInfo("deep_patient", "DeepPatient", paper=True, embedded_by="deep_patient",
              optional=True),
    MethodInfo("sphr", "SPHR", paper=True, embedded_by="sphr", optional=True),
    # the SPHR variants: the same network, another reference or a joint space
    MethodInfo("sphr_age_line", "SPHR, age-line reference", embedded_by="sphr", variant=True,
              optional=True),
    MethodInfo("sphr_young", "SPHR, young reference", embedded_by="sphr", variant=True,
              optional=True),
    MethodInfo("sphr_joint", "SPHR + markers (shipped)", short="SPHR + markers",
              embedded_by="sphr", variant=True, optional=True),
    MethodInfo("phenoage", "PhenoAge acceleration", short="PhenoAge accel.", kind="score",
               optional=True),
    # stands for every supervised comparator (sphr.risk.supervised): one per linked outcome
    # (supervised_death, ...) and the repeat-visit one, whichever the export allows
    MethodInfo("supervised_xgboost", "Supervised XGBoost (uses outcome)",
               short="Supervised ceiling", kind="score", optional=True),
)}

#: SPHR variants aimed at risk (``sphr_joint`` is computed by default: :data:`SHIPPED_SPHR`)
SPHR_VARIANTS: tuple[str, ...] = tuple(m for m, i in RISK_METHODS.items() if i.variant)
#: the absolute-risk candidates that can ship (:data:`sphr.risk.absolute.CANDIDATES`; kept
#: here too so that this module stays light)
ABSOLUTE_CANDIDATES: tuple[str, ...] = ("age", "age_distance", "age_phenoage", "ridge_markers")
#: the distance methods (a space G and a reference per age group; :mod:`sphr.risk.spaces`)
METHODS: tuple[str, ...] = tuple(m for m, i in RISK_METHODS.items() if i.kind == "distance")
#: the paper's five; mode ``paper`` (Eq. A.4) is defined for these
PAPER_METHODS: tuple[str, ...] = tuple(m for m, i in RISK_METHODS.items() if i.paper)
#: full names of every method, and of age alone (the reports' yardstick)
DISPLAY: dict[str, str] = {**{m: i.display for m, i in RISK_METHODS.items()},
                           "age": "Age alone"}
#: figure labels where the full name is too long for a panel
SHORT: dict[str, str] = {m: i.short for m, i in RISK_METHODS.items() if i.short}
#: scores given per person (:mod:`sphr.risk.comparators`)
SCORE_METHODS: tuple[str, ...] = tuple(m for m, i in RISK_METHODS.items() if i.kind == "score")
#: the inputs of the marker-space distances (docs/METHODS.md, "The distance space")
DISTANCE_SPACES: tuple[str, ...] = ("marker", "quantile")
#: the distance methods that measure in the marker space (the others embed first)
MARKER_SPACE_METHODS: tuple[str, ...] = tuple(m for m, i in RISK_METHODS.items()
                                              if i.marker_space)
#: the representation each deep method embeds with
EMBEDDED_BY: dict[str, str] = {m: i.embedded_by for m, i in RISK_METHODS.items()
                               if i.embedded_by}
#: every method: the distance methods, then the scores researchers already use
ALL_METHODS: tuple[str, ...] = tuple(RISK_METHODS)
#: the SPHR risk score the project ships: SPHR's embedding joined with the markers, the one
#: variant that beat the paper's distance for both fold seeds on the development set
#: (docs/METHODS.md "SPHR variants aimed at risk", docs/notes/SPHR_RISK.md)
SHIPPED_SPHR = "sphr_joint"
#: what ``sphr risk`` computes unless told otherwise: every method, the shipped SPHR score
#: beside the paper's, but the variants that did not win (options)
DEFAULT_METHODS: tuple[str, ...] = tuple(m for m in ALL_METHODS
                                         if m not in SPHR_VARIANTS or m == SHIPPED_SPHR)
#: methods that need a model file from an earlier stage or an optional input
OPTIONAL_METHODS: tuple[str, ...] = tuple(m for m, i in RISK_METHODS.items() if i.optional)
#: what ``sphr score --on-drift`` may ask when the export drifted (the first: the default)
ON_DRIFT: tuple[str, ...] = ("warn", "refuse")
#: every part of a fitted model that re-anchoring can refit (:mod:`sphr.risk.serve.reanchor`)
REANCHOR_ALL_PARTS: tuple[str, ...] = ("normalizer", "marker_scaler", "references",
                                       "standardizers", "bounds")
#: the parts ``sphr score --reanchor`` refits: the pre-registered rule's choice on the
#: transport benchmark (docs/METHODS.md, "Re-anchoring"; docs/notes/TRANSPORT.md): no candidate
#: beat unchanged scoring by more than 0.005, so the smallest, standardizers and bounds
REANCHOR_PARTS: tuple[str, ...] = ("standardizers", "bounds")
#: what a calibrated score's groups are read against (:attr:`RiskConfig.reference`)
REFERENCES: tuple[str, ...] = ("centiles", "groups")
#: fewest bona fide healthy people with every feature per sex to re-anchor on
REANCHOR_MIN_BFH = 50


@dataclass
class RiskConfig:
    #: the methods to compute, of :data:`ALL_METHODS` (by default every one but the SPHR
    #: variants that did not win); a method whose model or input is missing is skipped with a
    #: warning
    methods: tuple[str, ...] = DEFAULT_METHODS
    #: the interval modes, of :data:`sphr.risk.intervals.MODES`: ``calibrated`` (one-sided
    #: split-conformal bounds from the calibration partition) and ``paper`` (Eq. A.4)
    modes: tuple[str, ...] = MODES
    #: fewest real BFH members per age group before the reference borrows neighbouring ages
    min_group_size: int = 10
    #: fewest healthy people per age group for the score's age standardization (form
    #: ``groups``)
    standardize_min_group: int = 30
    #: how the score is made comparable across ages before the calibrated bounds, of
    #: :data:`sphr.risk.calibration.STANDARDIZATIONS` (docs/METHODS.md, "Age standardization")
    standardization: str = "training_groups"
    #: the bounds' parametric fallback where the calibration BFH are too few for a conformal
    #: bound (fewer than 99 for the 99% bound), of :data:`sphr.risk.calibration.TAIL_BOUNDS`:
    #: ``lognormal`` (conservative on standardized scores) or ``yeo_johnson`` (in a
    #: pre-registered simulation it failed only on a heavy-tailed score at n <= 30;
    #: docs/notes/SPHR_RISK.md, "The Higher Risk bound with fewer than 99 calibration BFH")
    tail_bound: str = TAIL_BOUND
    #: participant bootstrap resamples of the discrimination intervals
    n_bootstrap: int = 500
    #: resamples for the linked-outcome intervals (Cox and Kaplan-Meier fits are slower)
    n_bootstrap_linked: int = 200
    #: seed of the stage's random steps (the bootstrap resamples, the supervised comparators'
    #: folds)
    seed: int = 0
    #: torch device for the deep methods: auto (CUDA when present), cpu or cuda
    device: str = "auto"
    #: the sexes to group (those whose cohort the run has)
    sexes: tuple[str, ...] = SEXES
    #: input of the four marker-space distances: ``marker`` (log-robust standardized markers,
    #: linear beyond the fit; the default by the pre-registered rule, docs/REAL.md) or
    #: ``quantile`` (the cohort's normalized features, as before 2026-11-26)
    distance_space: str = "marker"
    #: folds of the supervised comparators' cross-fitting
    supervised_folds: int = 5
    #: fewest training events (per fold fit) for a supervised comparator of an outcome
    supervised_min_events: int = 10
    #: the absolute-risk candidate written as absolute_risk.parquet (docs/METHODS.md,
    #: "Absolute risk and the risk-equivalent age": chosen by its pre-registered rule)
    absolute_method: str = "age_distance"
    #: the shipped risk uses the calibration partition's slope and baseline (else the
    #: training fit's own baseline; every candidate's table has both). Off by the
    #: pre-registered rule: on the development set's cross-fit the calibration partition's
    #: 5-13 deaths per fold gave slopes of -0.08 to 2.2 and worse O/E (docs/REAL.md)
    absolute_recalibrate: bool = False
    #: fewest training events of an outcome to fit its absolute-risk candidates
    absolute_min_events: int = 20
    #: what a calibrated score's groups are read against: ``centiles`` (healthy-reference
    #: centiles continuous in age, from every bona fide healthy person's out-of-fold value in
    #: a cross-fit, else the calibration partition's; docs/METHODS.md, "Healthy-reference
    #: centiles") or ``groups`` (the age-group standardization and split-conformal bounds of
    #: ``standardization``, as before 2026-12-03)
    reference: str = "centiles"
    #: the centiles' location and scale in age: ``spline`` (a natural cubic spline) or ``line``
    centile_form: str = "spline"
    #: how the centile is read off the healthy people's residuals: ``hybrid`` (conformal,
    #: with a Yeo-Johnson normal tail beyond the largest few), ``conformal`` or ``parametric``
    centile_tail: str = "hybrid"

    def check(self) -> None:
        bad = [m for m in self.methods if m not in ALL_METHODS] + \
            [m for m in self.modes if m not in MODES]
        if bad:
            raise ConfigError(f"unknown method/mode {bad}: methods {ALL_METHODS}, modes {MODES}")
        if self.standardization not in STANDARDIZATIONS:
            raise ConfigError(f"standardization {self.standardization!r}: choose from "
                              f"{', '.join(STANDARDIZATIONS)}")
        if self.tail_bound not in TAIL_BOUNDS:
            raise ConfigError(f"tail_bound {self.tail_bound!r}: choose from "
                              f"{', '.join(TAIL_BOUNDS)}")
        if self.distance_space not in DISTANCE_SPACES:
            raise ConfigError(f"distance_space {self.distance_space!r}: choose from "
                              f"{', '.join(DISTANCE_SPACES)}")
        if self.supervised_folds < 2 or self.supervised_min_events < 1:
            raise ConfigError("supervised_folds must be at least 2 and supervised_min_events "
                              "at least 1")
        if self.absolute_method not in ABSOLUTE_CANDIDATES:
            raise ConfigError(f"absolute_method {self.absolute_method!r}: choose from "
                              f"{', '.join(ABSOLUTE_CANDIDATES)}")
        if self.absolute_min_events < 1:
            raise ConfigError("absolute_min_events must be at least 1")
        if self.reference not in REFERENCES:
            raise ConfigError(f"reference {self.reference!r}: choose from {', '.join(REFERENCES)}")
        from sphr.risk.centiles import CENTILE_FORMS, TAIL_METHODS

        for name, value, allowed in (("centile_form", self.centile_form, CENTILE_FORMS),
                                     ("centile_tail", self.centile_tail, TAIL_METHODS)):
            if value not in allowed:
                raise ConfigError(f"{name} {value!r}: choose from {', '.join(allowed)}")


#: keys ``[risk]`` no longer has, and why: a settings file that still sets one is told so
REMOVED_SETTINGS: dict[str, str] = {
    # its one legal value was test: "all" validated SPHR on training rows it was trained to
    # push away from the BFH
    "validate_on": "the risk groups are always validated on the test partition, the people "
                   "no fit has seen",
}

#: the seed of the re-anchoring's anchor / calibration split unless told otherwise; its own,
#: not RiskConfig's bootstrap seed
REANCHOR_SEED = 0


@dataclass(frozen=True)
class ScoreSettings:
    """``sphr score``'s settings: its options and the ``[score]`` table of a settings file
    (``sphr score --config FILE``; docs/ARCHITECTURE.md). The command line wins over the file,
    the file over these defaults."""

    #: score even when most values of a field lie outside the fitted range
    allow_out_of_range: bool = False
    #: auto (CUDA when present), cpu or cuda: where SPHR embeds
    device: str = "auto"
    #: when a feature drifted from the training population (drift.csv): warn and score, or
    #: refuse (exit non-zero, nothing written)
    on_drift: str = ON_DRIFT[0]
    #: refit the parts of reanchor_parts on the export's own people (never their outcomes)
    #: and save the re-anchored model as OUT/model (docs/METHODS.md, "Re-anchoring")
    reanchor: bool = False
    #: the parts to refit, of normalizer, marker_scaler, references, standardizers, bounds;
    #: the default is the pre-registered rule's choice (docs/notes/TRANSPORT.md)
    reanchor_parts: tuple[str, ...] = REANCHOR_PARTS
    #: seed of the re-anchoring's anchor / calibration split (not the bootstrap's)
    reanchor_seed: int = REANCHOR_SEED
    #: seed of the bootstrap resamples behind the scored groups' intervals (dC, ordering);
    #: unset: the fitted model's own risk seed
    seed: int | None = None
    #: a JSON file of the export's outcome table and censoring dates, as ``sphr_dagster run
    #: --outcomes`` takes it (docs/OUTCOMES.md); without it the defaults. Where the export has
    #: linked records, the scored groups are judged against them (OUT/group_ordering.parquet)
    outcomes: str | None = None

    def check(self) -> ScoreSettings:
        if self.on_drift not in ON_DRIFT:
            raise ConfigError(f"on_drift {self.on_drift!r}: choose from {', '.join(ON_DRIFT)}")
        unknown = [p for p in self.reanchor_parts if p not in REANCHOR_ALL_PARTS]
        if unknown or not self.reanchor_parts:
            raise ConfigError(f"reanchor_parts {unknown or list(self.reanchor_parts)}: choose "
                              f"from {', '.join(REANCHOR_ALL_PARTS)}")
        return self
