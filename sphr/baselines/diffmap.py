"""Diffusion maps (pydiffmap) fitted on a seeded landmark subsample, Nystroem to everyone.

pydiffmap builds a k-nearest-neighbour kernel on all the points it is fitted on
and solves a sparse eigenproblem; its cost grows with n * k, so on a whole
cohort (100,000+ participants) it takes minutes and GBs. The diffusion
coordinates are a smooth function of the data, so we fit on ``n_landmarks``
training participants drawn with a seeded generator and extend to every other
participant (training or test) with the Nystroem formula pydiffmap itself uses
for out-of-sample points:

    phi(y) = sum_j P(y, x_j) phi(x_j),   P(y, .) = row-normalized K(y, x_j) q(x_j)^-alpha

over the k nearest landmarks x_j. We apply that same formula to the landmarks
too, so the map is one function of a participant's own features (pydiffmap's
``transform`` returns the eigenvectors themselves for the fitting points, a
slightly different value for the same person). Eigenvectors have no sign; we
make each one's largest-magnitude landmark value positive. ARPACK gets a seeded
start vector, so a refit gives the same coordinates.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sps
import scipy.sparse.linalg as spsl
from pydiffmap.diffusion_map import DiffusionMap as _DiffusionMap
from pydiffmap.kernel import Kernel

from sphr.baselines.base import Representation, flip_signs, keep_params
from sphr.baselines.config import BaselinesConfig
from sphr.errors import InputError


class _SeededDiffusionMap(_DiffusionMap):
    """pydiffmap's DiffusionMap with a fixed ARPACK start vector (its own call passes none)."""

    def __init__(self, kernel_object: Kernel, *, seed: int, **kwargs) -> None:
        super().__init__(kernel_object, **kwargs)
        self.seed = seed

    def _make_diffusion_coords(self, L):
        v0 = np.random.default_rng(self.seed).uniform(0.5, 1.5, L.shape[0])
        evals, evecs = spsl.eigs(L, k=self.n_evecs + 1, which="LR", v0=v0)
        ix = evals.argsort()[::-1][1:]  # drop the trivial eigenvalue 0 (constant vector)
        evals = np.real(evals[ix])
        evecs = np.real(evecs[:, ix])
        dmap = evecs @ np.diag(np.sqrt(-1.0 / evals))
        return dmap, evecs, evals


class DiffMap(Representation):
    """Diffusion-map coordinates (``n_components`` of them) with a Nystroem extension.

    ``alpha`` is pydiffmap's normalization exponent (0.5, its default: the paper
    does not say); ``k`` the kernel's nearest neighbours; ``epsilon='bgh'`` picks
    the bandwidth by Berry-Giannakis-Harlim on the landmarks.
    """

    def __init__(self, n_components: int = 32, k: int = 64, alpha: float = 0.5,
                 epsilon: str | float = "bgh",
                 n_landmarks: int = BaselinesConfig.diffmap_landmarks,
                 chunk_size: int = 20_000, n_jobs: int | None = 1, random_state: int = 0) -> None:
        keep_params(self, locals())

    def _fit(self, X: np.ndarray) -> None:
        n = X.shape[0]
        if n < 4:
            raise InputError(f"DiffMap needs at least 4 training participants, got {n}")
        rng = np.random.default_rng(self.random_state)
        if n > self.n_landmarks:
            idx = np.sort(rng.choice(n, size=self.n_landmarks, replace=False))
        else:
            idx = np.arange(n)
        landmarks = np.ascontiguousarray(X[idx], dtype=np.float64)
        m = landmarks.shape[0]
        # ARPACK (non-symmetric) needs k < m - 1; the trivial eigenvector takes one more
        n_evecs = int(min(self.n_components, m - 3))
        kernel = Kernel(kernel_type="gaussian", k=min(self.k, m), epsilon=self.epsilon,
                        neighbor_params={"n_jobs": self.n_jobs})
        dmap = _SeededDiffusionMap(kernel, seed=self.random_state, alpha=self.alpha,
                                   n_evecs=n_evecs)
        dmap.fit(landmarks)

        # Nystroem on the landmarks themselves, then the sign rule on those values,
        # so that sign is decided on exactly the map we apply to everyone.
        self.neighbors_ = dmap.local_kernel.neigh
        self.epsilon_ = float(dmap.epsilon_fitted)
        self.right_norm_vec_ = np.asarray(dmap.right_norm_vec, dtype=np.float64)
        self.eigenvalues_ = np.asarray(dmap.evals, dtype=np.float64)
        self.intrinsic_dim_ = dmap.local_kernel.d
        self.coords_ = np.asarray(dmap.dmap, dtype=np.float64)
        # columns of the landmark map are the rows flip_signs sees
        self.coords_ = self.coords_ * flip_signs(self._nystroem(landmarks).T)[1]
        self.landmark_index_ = idx
        self.n_components_ = n_evecs

    def _nystroem(self, Y: np.ndarray) -> np.ndarray:
        dist = self.neighbors_.kneighbors_graph(Y, mode="distance").tocsr()
        sq = dist.data**2
        # exp(-(d^2 - min d^2) / 4 eps): the per-row constant cancels in the row
        # normalization and keeps far-away participants from underflowing to 0/0.
        row_min = np.minimum.reduceat(sq, dist.indptr[:-1])
        sq -= np.repeat(row_min, np.diff(dist.indptr))
        K = sps.csr_matrix((np.exp(-sq / (4.0 * self.epsilon_)), dist.indices, dist.indptr),
                           shape=dist.shape)
        K = K @ sps.diags(self.right_norm_vec_)  # right_norm_vec_ is already q^-alpha
        row_sum = np.asarray(K.sum(axis=1)).ravel()
        P = sps.diags(1.0 / row_sum) @ K
        return np.asarray(P @ self.coords_)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        out = np.empty((X.shape[0], self.n_components_), dtype=np.float32)
        for start in range(0, X.shape[0], self.chunk_size):
            chunk = np.asarray(X[start:start + self.chunk_size], dtype=np.float64)
            out[start:start + chunk.shape[0]] = self._nystroem(chunk)
        return out
