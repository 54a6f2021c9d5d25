"""The fitted risk model: :class:`RiskModel` (``fit`` / ``save`` / ``load`` /
``score_cohort``).

``sphr risk`` fits it (:mod:`sphr.risk.fit` reads a run's cohorts into :class:`CohortInputs`,
:mod:`sphr.risk.pipeline` saves it as ``RUN/risk/model/``); ``sphr score``
(:mod:`sphr.risk.serve.apply`) and the refresh (:mod:`sphr.risk.serve.refresh`) load it and
score new
people with it. Loading reads only the model folder: this package, the representations it
holds, and nothing of the fit or the run directory.

Per sex (:class:`SexModel`): the cohort's quantile normalizer and features, the clinical
ranges its classes were labelled with, the marker scaler of the marker-space methods, and
one fitted method per name, either a distance (:class:`DistanceMethod`: a space of
:mod:`sphr.risk.spaces` and one :class:`~sphr.risk.distance.DistanceModel` per mode, with
the references, age standardizer and bounds) or a score given per person
(:class:`ScoreMethod`: PhenoAge's line on age or the supervised fold models, and the
calibrated :class:`~sphr.risk.comparators.ScoreModel`).

**Fit** (docs/METHODS.md, "Partitions"): the spaces, references and age standardizations
on the real training rows (BFH only where the method says so), the calibrated bounds on the
calibration partition's BFH, the supervised comparators on the training participants'
outcomes, cross-fitted. Every participant (train, calibration, test) is then scored
(``rows_``); validation later reads only the test partition. A method that cannot be
computed (a model file missing, too few events, no PhenoAge marker in the export) is
**skipped** with its reason; a method computed for some people only (PhenoAge without CRP)
leaves the others **unscored**, counted with the reason (``skipped_``, ``unscored_``).

**Score** new people (a baseline frame in UKB units, one row per participant): nothing is
refitted. Refusals (``InputError`` naming the export and the UKB field): a fitted feature
the export does not have (or has no value for anyone); **units**: a feature for which more
than half of the new values (and at least one) fall outside the range seen in training
(the normalizer's minimum and maximum, raw UKB units). A column in other units (glucose in
mg/dL instead of mmol/L is x18) lands almost entirely outside; a correct file almost never
does. ``allow_out_of_range=True`` scores anyway (a value outside the range is then treated
as the training extreme, which is what the quantile normalizer does). Missing values
(``impute=True``): a missing fitted feature is set to the per-sex training median
(:mod:`sphr.risk.impute`) and flagged per participant; still unscorable, with the reason: a
missing or unknown sex, a sex the model was not fitted on, a missing age, or more than
``MAX_IMPUTED_SHARE`` of the features missing. PhenoAge reads the markers as measured
(never imputed): a person without its nine markers is not scored by it, counted per method
in the report's ``not_scored``. Ages outside every age group join the nearest group.

The package, one concern a module (each imports only the ones listed before it):

==================  ========================================================================
``frames``          the inputs of a fit (:class:`CohortInputs`), ``risk_groups``' columns,
                    what scoring gives (:class:`Scores`), new people, absolute-risk covariates
``units``           the units check of new people (:func:`check_units`)
``methods``         the fitted methods (:class:`DistanceMethod`, :class:`ScoreMethod`) and
                    their saved entries, each stating its ``kind``
``persistence``     ``risk_model.json`` and the sex folders (:func:`find_model_dir`)
``fitting``         the fit of one sex (:class:`~sphr.risk.model.fitting.SexFit`), which
                    returns what it fitted
``scoring``         new people through a fitted sex
``estimator``       :class:`SexModel` and :class:`RiskModel`, which hold what was fitted
==================  ========================================================================
"""

from sphr.risk.model.estimator import RiskModel, SexModel
from sphr.risk.model.frames import (
    COLUMNS,
    PARTITIONS,
    CohortInputs,
    Scores,
    participants,
    predict_none,
)
from sphr.risk.model.methods import KINDS, DistanceMethod, ScoreMethod
from sphr.risk.model.persistence import (
    MARKER_SCALER,
    MODEL_FILE,
    MODEL_VERSION,
    check_written_by,
    find_model_dir,
    read_spec,
)
from sphr.risk.model.scoring import MAX_IMPUTED_SHARE
from sphr.risk.model.units import OUT_OF_RANGE_SHARE, check_units

__all__ = ["COLUMNS", "KINDS", "MARKER_SCALER", "MAX_IMPUTED_SHARE", "MODEL_FILE", "MODEL_VERSION",
           "OUT_OF_RANGE_SHARE", "PARTITIONS", "CohortInputs", "DistanceMethod", "RiskModel",
           "ScoreMethod", "Scores", "SexModel", "check_units", "check_written_by",
           "find_model_dir", "participants", "predict_none", "read_spec"]
