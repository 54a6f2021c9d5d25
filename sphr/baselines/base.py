"""What every representation shares: an sklearn-style ``fit(X) / transform(X)``.

A representation maps the normalized cohort features (float32, one row per
participant) to an embedding. It is fitted on training rows only and then
applied, row by row, to anyone: ``transform`` never looks at other rows of its
input, so a test participant's embedding cannot depend on other test
participants (``tests/test_baselines.py`` checks this for every representation).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import check_is_fitted

from sphr.errors import InputError


def as_matrix(X: np.ndarray, *, what: str = "X") -> np.ndarray:
    """A finite 2-D float array; a clear error instead of a NaN deep inside a solver."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise InputError(f"{what} must be a 2-D array (participants x features), got shape {X.shape}")
    if X.shape[0] == 0:
        raise InputError(f"{what} has no rows")
    if not np.issubdtype(X.dtype, np.floating):
        X = X.astype(np.float64)
    bad = ~np.isfinite(X)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise InputError(f"{what} has a missing or infinite value (column {col})", row=int(row) + 1)
    return X


def keep_params(estimator: BaseEstimator, params: dict[str, Any]) -> None:
    """Store every ``__init__`` argument as the attribute of the same name, as given.

    scikit-learn's ``get_params`` and ``clone`` read the arguments back by those names, so
    an estimator's ``__init__`` keeps them unchanged: call this first, with ``locals()``.
    """
    for name, value in params.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


class Representation(TransformerMixin, BaseEstimator):
    """Base class: subclasses implement ``_fit`` and ``_transform`` on checked arrays."""

    #: embedding width; ``None`` means "same as the input" (the raw representation)
    n_components: int | None = None

    def fit(self, X: np.ndarray, y: None = None) -> Representation:
        X = as_matrix(X, what=f"{type(self).__name__}.fit input")
        self.n_features_in_ = X.shape[1]
        self._fit(X)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "n_features_in_")
        X = as_matrix(X, what=f"{type(self).__name__}.transform input")
        if X.shape[1] != self.n_features_in_:
            raise InputError(
                f"{type(self).__name__} was fitted on {self.n_features_in_} features, "
                f"got {X.shape[1]}"
            )
        return np.ascontiguousarray(self._transform(X), dtype=np.float32)

    def _fit(self, X: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _transform(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class Raw(Representation):
    """"Not transformed": the normalized features themselves (width n, not 32)."""

    def __init__(self, random_state: int = 0) -> None:
        self.random_state = random_state  # unused; kept so every representation takes one

    def _fit(self, X: np.ndarray) -> None:
        self.n_components_ = X.shape[1]

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return X


def flip_signs(components: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(components, signs): each row's largest-magnitude entry made positive, scikit-learn's
    ``svd_flip(u_based_decision=False)`` convention; a zero row keeps sign +1."""
    signs, flipped = svd_flip(np.ones((1, components.shape[0])), np.array(components, copy=True),
                              u_based_decision=False)
    signs = signs[0]
    signs[signs == 0] = 1.0
    return flipped, signs
