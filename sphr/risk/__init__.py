"""Single-visit health risk (paper section 5.3, Appendix B and C;
docs/METHODS.md#risk-groups).

``sphr risk RUN_DIR [--out DIR]`` (default ``RUN/risk``) writes each sex into
``OUT/<sex>/`` and the merged export into ``OUT`` (docs/METHODS.md, "Risk groups"):

``risk_groups.parquet`` / ``risk_groups.csv``
    one row per real participant (training rows that are not augmented,
    calibration and test rows), method and mode. Stable columns, in this order:

    ==============  ===========================================================
    ``eid``         participant id (int64)
    ``sex``         ``female`` / ``male``
    ``age_years``   age at baseline
    ``age_group``   the age group whose reference was used, e.g. ``46-50``
    ``method``      a distance method, ``phenoage``, ``supervised_<outcome>`` (one per
                    linked outcome) or ``supervised_xgboost`` (repeat visit)
    ``mode``        ``calibrated`` or ``paper`` (:mod:`sphr.risk.intervals`)
    ``distance``    the method's raw score (distance to the age group's BFH
                    reference; PhenoAge acceleration; supervised log-odds or log
                    hazard ratio). A participant a method cannot score (PhenoAge
                    without CRP) has no row for it; ``risk_report.json`` counts them
                    (``unscored``, with the reason, as for a method ``skipped``)
    ``score``       ``distance`` standardized per age group (larger is worse)
    ``group``       ``Normal``, ``Lower Risk`` or ``Higher Risk``
    ``normal_low``, ``normal_high``   the Normal interval (no low end when calibrated)
    ``lower_low``, ``lower_high``     the Lower Risk interval used (contains Normal)
    ``partition``   ``train``, ``calibration`` or ``test``
    ``label``       class at baseline: 0 unhealthy, 1 apparently healthy, 2 BFH
    ==============  ===========================================================

``thresholds.parquet`` / ``.csv``
    per sex, method, mode and age group: BFH counts, pooled groups, the age
    standardization, the bounds and how they were obtained.
``heldout_bfh.parquet``
    share of the calibration and test BFH in Normal (Wilson 95% CIs).
``discrimination.parquet``
    AUROC, C-index, risk ratio, paired differences (:mod:`sphr.risk.validation.discrimination`).
``validation.parquet`` / ``validation.md``, ``time_correlation.parquet``
    Table 4 shape and Appendix C (:mod:`sphr.risk.validation.groups`).
``absolute_risk.parquet``
    the 5- and 10-year absolute risk of every participant and linked outcome with enough
    events, its 95% interval and the risk-equivalent age (``eid, sex, outcome, risk_5y,
    risk_10y, risk_10y_low, risk_10y_high, risk_age, risk_age_outside, partition``) from the
    shipped candidate (:mod:`sphr.risk.absolute`; docs/METHODS.md, "Absolute risk");
    ``absolute_risk_candidates.parquet`` every candidate, ``absolute_metrics.parquet`` /
    ``absolute_deciles.parquet`` their evaluation on the test partition.
``model/``
    ``risk_model.json`` (references, standardization and bounds), per sex the
    normalizer, features, the clinical ranges of the cohort (``clinical_ranges.json``)
    and the representation files, for ``sphr score``.
``report.html``
    self-contained report (inline CSS, PNG plots), summary first; ``report.pdf`` (A4, where
    Chromium is installed), ``report_summary.png``; ``risk_report.json`` summary.

``sphr score RUN_DIR NEW_EXPORT --out DIR`` writes ``risk_groups.parquet`` /
``.csv`` with the same columns (``partition`` = ``new``, ``label`` from the
export's answers where known, else -1) for a new export (:mod:`sphr.risk.serve.apply`), every
method included: the supervised comparators' fold models and PhenoAge's line are saved.
The fitted model is one object, :class:`sphr.risk.model.RiskModel` (``fit`` / ``save`` /
``load`` / ``score_cohort``); the module map is in docs/ARCHITECTURE.md.
"""

from sphr import lazy_exports
from sphr.risk.config import METHODS
from sphr.risk.intervals import GROUPS, MODES, Intervals, assign_groups, make_intervals

__all__ = ["GROUPS", "METHODS", "MODES", "DistanceModel", "Intervals", "RiskModel",
           "assign_groups", "make_intervals"]
# pandas-backed; imported on first use so the CLI parser stays light
__getattr__ = lazy_exports(__name__, {"sphr.risk.model": ("RiskModel",),
                                      "sphr.risk.distance": ("DistanceModel",)})
