"""Imputation for scoring: the per-sex training median, i.e. 0 on the normal scale.

The cohort's :class:`~sphr.cohorts.normalize.QuantileNormalizer` is fitted on
the training partition only (``sphr.cohorts.build``) and maps each feature to
a standard normal; a missing value is replaced by that feature's training
median (the normalizer's quantile at reference 0.5, which normalizes to 0).
Nothing about the participant being scored, nor any test or calibration
participant, enters the imputed value. Chosen over a multivariate
(IterativeImputer) model because the fitted model folder holds only the
normalizer, and a refresh must not refit or add model files; the cost is
that an imputed feature carries no information (it sits at the centre), so
imputed participants are flagged with how many features were filled in.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import QuantileNormalizer, training_medians


def impute_median(frame: pd.DataFrame, norm: QuantileNormalizer
                  ) -> tuple[pd.DataFrame, np.ndarray, list[str]]:
    """Fill missing fitted features; return the frame, count per row and names per row."""
    features = norm.features_
    values = frame[features].to_numpy(float)
    missing = np.isnan(values)
    med = training_medians(norm)
    filled = np.where(missing, med[None, :], values)
    out = frame.copy()
    out[features] = filled
    names = [";".join(np.asarray(features)[row]) for row in missing]
    return out, missing.sum(axis=1).astype(int), names
