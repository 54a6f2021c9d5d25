"""The generator's Gaussian copula: marker normal scores with a published correlation structure.

Each copula marker's normal score is ``z = loadings @ latents + e``: the latents carry the
health state that drives diagnoses, and the residual ``e`` carries the rest of the marker's
variation, correlated across markers so that the scores' correlation matrix has the targeted
values of docs/SYNTH.md (converted from Spearman to the normal scale) and the latent-implied
values elsewhere. Marginals are applied afterwards (:func:`to_values`), so skew and point
masses survive.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from scipy.special import ndtr, ndtri

from sphr.synth.params import (
    FRAILTY_LOADING,
    LATENTS,
    LIPID_FROM_METABOLIC,
    MARGINALS,
    TARGET_CORRELATIONS,
    Marginal,
)

COPULA_MARKERS: tuple[str, ...] = tuple(MARGINALS)

#: The orthonormal bases generator v2's residuals were drawn in, per sex (docs/SYNTH.md,
#: reproducibility). Any orthonormal basis gives the same residual covariance; v2 used the
#: eigenvectors LAPACK returned under OpenBLAS's Haswell kernels, which are not unique (signs,
#: and whole bases of repeated eigenvalues) and differ under other kernels. Freezing them keeps
#: v2's draws on every machine.
ROTATION_FILE = Path(__file__).with_name("copula_rotation_v2.npz")
#: eigenvalues of the residual covariance are clipped here: it must be positive definite
MIN_EIGENVALUE = 1e-4


@cache
def frozen_rotation(sex: str) -> np.ndarray:
    """Generator v2's (markers, markers) orthonormal basis of ``sex``'s residuals."""
    with np.load(ROTATION_FILE) as saved:
        return saved[sex].copy()


def symmetric_root(cov: np.ndarray) -> np.ndarray:
    """The symmetric square root of ``cov`` with eigenvalues clipped at :data:`MIN_EIGENVALUE`.

    Unlike an eigenvector matrix it is unique, so LAPACK kernels agree on it to rounding."""
    w, v = np.linalg.eigh(cov)
    return (v * np.sqrt(np.clip(w, MIN_EIGENVALUE, None))) @ v.T


def spearman_to_pearson(rho: float) -> float:
    """Normal-scale correlation whose Gaussian copula has Spearman correlation ``rho``."""
    return float(2 * np.sin(np.pi * rho / 6))


def latent_covariance() -> np.ndarray:
    """Covariance of the latents as :func:`sphr.synth.cohort._draw_participants` draws them
    (frailty's small age term left out)."""
    k = len(LATENTS)
    # latents = A @ [frailty, own_1 .. own_k]
    a = np.zeros((k, k + 1))
    for i, name in enumerate(LATENTS):
        g = FRAILTY_LOADING[name]
        a[i, 0], a[i, i + 1] = g, np.sqrt(1 - g * g)
    own, from_met = LIPID_FROM_METABOLIC
    lipid, met = LATENTS.index("lipid"), LATENTS.index("metabolic")
    a[lipid] = own * a[lipid] + from_met * a[met]
    return a @ a.T


@dataclass(frozen=True)
class MarkerCopula:
    """Loadings and the residual's square root for one sex."""

    loadings: np.ndarray  # (markers, latents)
    residual_root: np.ndarray  # (markers, markers): e = N(0, I) @ residual_root.T
    scale: np.ndarray  # (markers,): makes every score's variance 1

    @classmethod
    def build(cls, sex: str) -> MarkerCopula:
        lam = np.array([[MARGINALS[m].loadings.get(lat, 0.0) for lat in LATENTS]
                        for m in COPULA_MARKERS])
        common = lam @ latent_covariance() @ lam.T
        target = common.copy()
        np.fill_diagonal(target, 1.0)
        index = {m: i for i, m in enumerate(COPULA_MARKERS)}
        for t in TARGET_CORRELATIONS:
            if t.target is None or t.sex not in (None, sex):
                continue
            i, j = index[t.a], index[t.b]
            target[i, j] = target[j, i] = spearman_to_pearson(t.target)
        # the residual must be a covariance: clip negative eigenvalues (the targets are then
        # met as closely as the latent structure allows; docs/SYNTH.md reports the result).
        # A unique root times a frozen basis: the draws do not depend on the BLAS kernel.
        rotation = frozen_rotation(sex)
        if rotation.shape != common.shape or not np.allclose(
                rotation @ rotation.T, np.eye(len(rotation)), atol=1e-12):
            raise RuntimeError(
                f"{ROTATION_FILE.name} does not fit the {len(COPULA_MARKERS)} copula markers: "
                "changing the copula is a new generator version (docs/SYNTH.md)")
        root = symmetric_root(target - common) @ rotation
        total = np.diag(common) + (root ** 2).sum(axis=1)
        return cls(lam, root, 1.0 / np.sqrt(total))

    def residuals(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.residual_root.shape[1])) @ self.residual_root.T

    def scores(self, latents: np.ndarray, residuals: np.ndarray) -> np.ndarray:
        """(n, markers) unit-variance normal scores from (n, latents) and residual draws."""
        return (latents @ self.loadings.T + residuals) * self.scale


def lognormal_params(mean: np.ndarray, sd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    sigma2 = np.log1p((sd / mean) ** 2)
    return np.log(mean) - sigma2 / 2, np.sqrt(sigma2)


def to_value(z: np.ndarray, m: Marginal, male: np.ndarray, age: np.ndarray,
             age_centre: float, mean: np.ndarray | None = None) -> np.ndarray:
    """A marker's values from its normal scores through its sex-specific marginal.

    A point mass at zero takes the lowest ``p_zero`` of the scores; the rest are mapped through
    the continuous part, so the copula keeps its rank correlations."""
    mu_sex = np.where(male, m.mean[1], m.mean[0]) if mean is None else mean
    sd_sex = np.where(male, m.sd[1], m.sd[0])
    if m.p_zero > 0:
        u = ndtr(z)
        z = ndtri(np.clip((u - m.p_zero) / (1 - m.p_zero), 1e-12, 1 - 1e-12))
    a = age - age_centre
    if m.kind == "normal":
        value = mu_sex + sd_sex * z + m.age_slope * a
    else:
        mu, sigma = lognormal_params(np.asarray(mu_sex, float), np.asarray(sd_sex, float))
        value = np.exp(mu + sigma * z + m.age_slope * a)
    if m.p_zero > 0:
        value = np.where(u < m.p_zero, 0.0, value)
    return value
