"""Rank-based quantile normalization to a standard normal, fitted per sex on training data.

The fitted normalizer is a small table (quantiles per feature) saved as JSON,
so scoring new participants later uses exactly the training distribution.
Ties get the mid-rank (the average of interpolating from below and from
above), so integer features such as age or sleep hours map symmetrically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import ndtri

from sphr.errors import ConfigError, InputError
from sphr.io import read_json, write_json

_EPS = 1e-7  # keeps Phi^-1 finite at the extremes: |z| <= 5.2


@dataclass
class QuantileNormalizer:
    """sklearn-style ``fit`` / ``transform`` / ``inverse_transform`` on float arrays."""

    n_quantiles: int = 1000
    features_: list[str] = field(default_factory=list)
    quantiles_: np.ndarray | None = None  # (n_quantiles, n_features)
    references_: np.ndarray | None = None  # (n_quantiles,) in [0, 1]

    def fit(self, X: np.ndarray, features: list[str] | None = None) -> QuantileNormalizer:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] < 2:
            raise InputError(f"need at least 2 rows to fit a normalizer, got shape {X.shape}")
        if np.isnan(X).any():
            raise InputError("cannot fit the normalizer on missing values (complete cases only)")
        n = min(self.n_quantiles, X.shape[0])
        self.references_ = np.linspace(0, 1, n)
        self.quantiles_ = np.quantile(X, self.references_, axis=0)
        # equal neighbouring quantiles would make interpolation ill-defined; np.maximum.accumulate
        # keeps the grid monotone after floating-point noise
        self.quantiles_ = np.maximum.accumulate(self.quantiles_, axis=0)
        self.features_ = list(features) if features is not None else [f"x{i}" for i in range(X.shape[1])]
        return self

    def _check(self, X: np.ndarray) -> np.ndarray:
        if self.quantiles_ is None:
            raise ConfigError("QuantileNormalizer is not fitted")
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.quantiles_.shape[1]:
            raise InputError(f"expected {self.quantiles_.shape[1]} features "
                             f"({', '.join(self.features_[:3])}, ...), got shape {X.shape}")
        return X

    def transform(self, X: np.ndarray) -> np.ndarray:
        X = self._check(X)
        out = np.empty_like(X)
        r = self.references_
        for j in range(X.shape[1]):  # a loop over features, each one vectorized
            q = self.quantiles_[:, j]
            up = np.interp(X[:, j], q, r)
            down = -np.interp(-X[:, j], -q[::-1], -r[::-1])
            out[:, j] = 0.5 * (up + down)
        return ndtri(np.clip(out, _EPS, 1 - _EPS)).astype(np.float32)

    def inverse_transform(self, Z: np.ndarray) -> np.ndarray:
        from scipy.special import ndtr

        Z = self._check(Z)
        p = ndtr(Z)
        return np.stack([np.interp(p[:, j], self.references_, self.quantiles_[:, j])
                         for j in range(Z.shape[1])], axis=1)

    def save(self, path: str | Path) -> Path:
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
        return norm
