"""PCA and ICA (FastICA) to 32 dimensions, fitted on the training partition."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.decomposition import PCA as _PCA
from sklearn.decomposition import FastICA as _FastICA
from sklearn.exceptions import ConvergenceWarning

from sphr.baselines.base import Representation, flip_signs, keep_params


def _width(n_components: int, X: np.ndarray) -> int:
    # 32 is the paper's d; a cohort with fewer features or rows cannot give more
    return int(min(n_components, X.shape[1], X.shape[0]))


class PCA(Representation):
    """Principal components; ``svd_solver='full'`` so the result does not depend on a seed."""

    def __init__(self, n_components: int = 32, random_state: int = 0) -> None:
        keep_params(self, locals())

    def _fit(self, X: np.ndarray) -> None:
        # float64: a float32 SVD differs between BLAS kernels at 1e-4 of a score, enough to
        # move the classifiers' F1 by 0.02 (docs/REPRODUCIBILITY.md); float64 agrees to 1e-15
        self.model_ = _PCA(n_components=_width(self.n_components, X), svd_solver="full",
                           random_state=self.random_state).fit(X.astype(np.float64))
        # PCA's sign is arbitrary; make the largest loading of each component positive
        # so refits (other BLAS, other machine) give the same picture.
        self.model_.components_ = flip_signs(self.model_.components_)[0]
        self.n_components_ = self.model_.components_.shape[0]

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self.model_.transform(X.astype(np.float64))


class ICA(Representation):
    """FastICA (``whiten='unit-variance'``, logcosh); a non-converged
    fit is reported, not hidden."""

    def __init__(self, n_components: int = 32, random_state: int = 0, max_iter: int = 1000,
                 tol: float = 1e-4) -> None:
        keep_params(self, locals())

    def _fit(self, X: np.ndarray) -> None:
        model = _FastICA(n_components=_width(self.n_components, X), whiten="unit-variance",
                         max_iter=self.max_iter, tol=self.tol, random_state=self.random_state)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(X)
        self.converged_ = not any(issubclass(w.category, ConvergenceWarning) for w in caught)
        self.n_iter_ = int(model.n_iter_)
        # ICA components have arbitrary sign and order; fix the sign like PCA's. On the demo's
        # cohorts FastICA does not converge in max_iter (reported), and where it stops depends
        # on the BLAS kernel's rounding: ICA is the one representation that differs between
        # kernels (docs/REPRODUCIBILITY.md).
        self.signs_ = flip_signs(model.components_)[1]
        self.model_ = model
        self.n_components_ = model.components_.shape[0]

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self.model_.transform(X) * self.signs_
