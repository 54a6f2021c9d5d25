"""Rank-based quantile normalization to a standard normal, fitted per sex on training data.

The fitted normalizer is a small table (quantiles per feature) saved as JSON,
so scoring new participants later uses exactly the training distribution.
Ties get the mid-rank (the average of interpolating from below and from
above), so integer features such as age or sleep hours map symmetrically.

It is a scikit-learn estimator (parameters in ``__init__``, fitted attributes
ending in ``_``, ``get_params`` / ``clone``), but not a wrapper of
``sklearn.preprocessing.QuantileTransformer(output_distribution="normal")``:
that transformer sends every value equal to the lowest (highest) training
quantile to z = -5.2 (+5.2), where this one gives the tied values their
mid-rank. On a point mass at an end of the range (half the participants report
no vigorous activity) the two differ by up to 4.5 SD (docs/METHODS.md,
"Quantile normalization by sex").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import ndtr, ndtri
from sklearn.base import BaseEstimator, TransformerMixin

from sphr.cohorts.config import CohortConfig
from sphr.errors import ConfigError, InputError
from sphr.io import read_json, write_json

_EPS = 1e-7  # keeps Phi^-1 finite at the extremes: |z| <= 5.2
_TINY = np.finfo(np.float64).tiny


class QuantileNormalizer(TransformerMixin, BaseEstimator):
    """``fit`` / ``transform`` / ``inverse_transform`` on float arrays.

    Fitted attributes: ``quantiles_`` ``(n, n_features)``, ``references_``
    ``(n,)`` in [0, 1] with ``n = min(n_quantiles, rows)``, ``features_`` (the
    feature names, from ``features=``, a DataFrame's columns, or ``x0, x1, ...``)
    and ``n_features_in_``.
    """

    def __init__(self, n_quantiles: int = CohortConfig.n_quantiles) -> None:
        self.n_quantiles = n_quantiles

    def fit(self, X, y=None, *, features: list[str] | None = None,
            observed_only: bool = False) -> QuantileNormalizer:
        """``observed_only``: each feature's quantiles from the rows that have it (the cohort
        step fills the others afterwards; filled values would be a point mass at the median
        that every drift check of new people then reads as drift)."""
        if features is None and hasattr(X, "columns"):
            features = [str(c) for c in X.columns]
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2:
            raise InputError(f"need at least 2 rows to fit a normalizer, got shape {X.shape}")
        observed = (~np.isnan(X)).sum(axis=0)
        if not observed_only and observed.min() < X.shape[0]:
            raise InputError("cannot fit the normalizer on missing values (complete cases only)")
        if observed.min() < 2:
            raise InputError("a feature has fewer than 2 observed values to fit a normalizer on")
        n = min(int(self.n_quantiles), int(observed.min()))
        self.references_ = np.linspace(0, 1, n)
        # equal neighbouring quantiles would make interpolation ill-defined; np.maximum.accumulate
        # keeps the grid monotone after floating-point noise
        self.quantiles_ = np.maximum.accumulate(np.nanquantile(X, self.references_, axis=0),
                                                axis=0)
        self.features_ = (list(features) if features is not None
                          else [f"x{i}" for i in range(X.shape[1])])
        self.n_features_in_ = X.shape[1]
        return self

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        self._check_fitted()
        return np.asarray(self.features_, dtype=object)

    def _check_fitted(self) -> None:
        if getattr(self, "quantiles_", None) is None:
            raise ConfigError("QuantileNormalizer is not fitted")

    def _check(self, X) -> np.ndarray:
        self._check_fitted()
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.quantiles_.shape[1]:
            raise InputError(f"expected {self.quantiles_.shape[1]} features "
                             f"({', '.join(self.features_[:3])}, ...), got shape {X.shape}")
        return X

    def transform(self, X) -> np.ndarray:
        X = self._check(X)
        out = np.empty_like(X)
        r = self.references_
        for j in range(X.shape[1]):  # a loop over features, each one vectorized
            # subnormal values flushed to 0: a gap between two quantiles below the smallest
            # normal double overflows np.interp's slope (inf * 0 = NaN)
            q, x = (np.where(np.abs(v) < _TINY, 0.0, v) for v in (self.quantiles_[:, j], X[:, j]))
            up = np.interp(x, q, r)
            down = -np.interp(-x, -q[::-1], -r[::-1])
            out[:, j] = 0.5 * (up + down)
        return ndtri(np.clip(out, _EPS, 1 - _EPS)).astype(np.float32)

    def inverse_transform(self, Z) -> np.ndarray:
        Z = self._check(Z)
        p = ndtr(Z)
        return np.stack([np.interp(p[:, j], self.references_, self.quantiles_[:, j])
                         for j in range(Z.shape[1])], axis=1)

    def save(self, path: str | Path) -> Path:
        self._check_fitted()
        return write_json({"kind": "quantile_normal", "features": self.features_,
                           "references": self.references_, "quantiles": self.quantiles_.T},
                          path)

    @classmethod
    def load(cls, path: str | Path) -> QuantileNormalizer:
        data = read_json(path)
        norm = cls(n_quantiles=len(data["references"]))
        norm.features_ = list(data["features"])
        norm.references_ = np.asarray(data["references"], dtype=np.float64)
        norm.quantiles_ = np.asarray(data["quantiles"], dtype=np.float64).T
        norm.n_features_in_ = norm.quantiles_.shape[1]
        return norm


class MarkerScaler(TransformerMixin, BaseEstimator):
    """Robust standardization of the markers, on the log scale where they are positive.

    The input of the marker-space distances (docs/METHODS.md, "The distance space"):
    a feature whose fitted values are all positive is logged (concentrations are
    multiplicative and right-skewed), then every feature is centred on its median and
    divided by IQR / 1.349 (the SD of a normal with that IQR). Unlike
    :class:`QuantileNormalizer` it is linear beyond the fitted range, so a distance keeps
    ranking people far from the fitted rows instead of capping them at one z.

    Fitted attributes: ``log_`` (bool per feature), ``floor_`` (the smallest fitted value
    of a logged feature: a new value at or below zero is read as half of it, since its log
    is undefined), ``center_``, ``scale_``, ``features_``, ``n_features_in_``.
    """

    def __init__(self, log: bool = True) -> None:
        self.log = log

    def fit(self, X, y=None, *, features: list[str] | None = None) -> MarkerScaler:
        if features is None and hasattr(X, "columns"):
            features = [str(c) for c in X.columns]
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2:
            raise InputError(f"need at least 2 rows to fit a marker scaler, got shape {X.shape}")
        if not np.isfinite(X).all():
            raise InputError("cannot fit the marker scaler on missing or infinite values")
        self.log_ = (X > 0).all(axis=0) if self.log else np.zeros(X.shape[1], bool)
        self.floor_ = np.where(self.log_, X.min(axis=0), np.nan)
        Y = self._logged(X)
        q25, self.center_, q75 = np.percentile(Y, (25, 50, 75), axis=0)
        scale = (q75 - q25) / 1.349
        # a feature with a point mass over its middle half (an integer score) has IQR 0:
        # its SD stands in, and a constant feature gets 1 (it then adds no distance)
        sd = Y.std(axis=0)
        self.scale_ = np.where(scale > 0, scale, np.where(sd > 0, sd, 1.0))
        self.features_ = (list(features) if features is not None
                          else [f"x{i}" for i in range(X.shape[1])])
        self.n_features_in_ = X.shape[1]
        return self

    def _logged(self, X: np.ndarray) -> np.ndarray:
        floor = np.where(self.log_, 0.5 * np.nan_to_num(self.floor_, nan=1.0), 0.0)
        safe = np.where(self.log_ & (X <= 0), floor, X)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.log_, np.log(np.where(self.log_, safe, 1.0)), X)

    def transform(self, X) -> np.ndarray:
        if getattr(self, "center_", None) is None:
            raise ConfigError("MarkerScaler is not fitted")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise InputError(f"expected {self.n_features_in_} features "
                             f"({', '.join(self.features_[:3])}, ...), got shape {X.shape}")
        return (self._logged(X) - self.center_) / self.scale_

    def to_dict(self) -> dict:
        return {"kind": "marker_scaler", "features": self.features_, "log": self.log_.tolist(),
                "floor": [None if np.isnan(v) else float(v) for v in self.floor_],
                "center": self.center_.tolist(), "scale": self.scale_.tolist()}

    def save(self, path: str | Path) -> Path:
        return write_json(self.to_dict(), path)

    @classmethod
    def from_dict(cls, data: dict) -> MarkerScaler:
        scaler = cls()
        scaler.features_ = list(data["features"])
        scaler.log_ = np.asarray(data["log"], bool)
        scaler.floor_ = np.asarray([np.nan if v is None else v for v in data["floor"]], float)
        scaler.center_ = np.asarray(data["center"], float)
        scaler.scale_ = np.asarray(data["scale"], float)
        scaler.n_features_in_ = len(scaler.features_)
        return scaler

    @classmethod
    def load(cls, path: str | Path) -> MarkerScaler:
        return cls.from_dict(read_json(path))


def training_medians(norm: QuantileNormalizer) -> np.ndarray:
    """Raw-unit training median per feature (the quantile grid at 0.5, which normalizes to
    0): the one value a missing marker is filled with, by the cohort step inside each fit
    and by ``sphr score`` (:mod:`sphr.risk.impute`)."""
    return np.array([np.interp(0.5, norm.references_, norm.quantiles_[:, j])
                     for j in range(norm.quantiles_.shape[1])])
