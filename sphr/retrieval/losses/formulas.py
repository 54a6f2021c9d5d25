"""The papers' per-triplet formulas, as plain functions of similarities or distances.

The loss classes gather these quantities from their distance matrix and hand
them here; the tests pin each formula and its gradients. NPLB's formula is
:func:`sphr.losses.nplb_per_triplet`, shared with the tabular stack.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def adatriplet_per_triplet(phi_ap: torch.Tensor, phi_an: torch.Tensor, eps: float, beta: float,
                           lam: float = 1.0) -> torch.Tensor:
    """AdaTriplet Eq. (5) per triplet: [phi_an - phi_ap + eps]_+ + lambda [phi_an - beta]_+."""
    return F.relu(phi_an - phi_ap + eps) + lam * F.relu(phi_an - beta)


def cosine_distance01(cos: torch.Tensor) -> torch.Tensor:
    """OCAM's f(Ei, Ej) = (1 - cos(Ei, Ej)) / 2, in [0, 1]."""
    return (1.0 - cos) / 2.0


def half_distance(d: torch.Tensor) -> torch.Tensor:
    """A distance in [0, 2] (Euclidean on the unit sphere) mapped to [0, 1]: d / 2.

    OCAM's f for a loss given a distance instead of a similarity (not in the paper,
    which uses :func:`cosine_distance01`)."""
    return d / 2.0


def ocam_violation01(f_ap: torch.Tensor, f_an: torch.Tensor, f_pn: torch.Tensor) -> torch.Tensor:
    """The argument of OCAM's hinge from distances in [0, 1]: f_ap - (f_an
    + f_pn)/2 + (1 - f_pn)/2."""
    return f_ap - (f_an + f_pn) / 2.0 + (1.0 - f_pn) / 2.0


def ocam_violation(cos_ap: torch.Tensor, cos_an: torch.Tensor,
                   cos_pn: torch.Tensor) -> torch.Tensor:
    """The argument of OCAM's hinge from cosines: f = (1 - cos) / 2 in :func:`ocam_violation01`."""
    return ocam_violation01(cosine_distance01(cos_ap), cosine_distance01(cos_an),
                            cosine_distance01(cos_pn))


def ocam_per_triplet(cos_ap: torch.Tensor, cos_an: torch.Tensor,
                     cos_pn: torch.Tensor) -> torch.Tensor:
    """OCAM Eq. (4): max(0, f_ap - (f_an + f_pn)/2 + (1 - f_pn)/2); values lie in [0, 1.5]."""
    return F.relu(ocam_violation(cos_ap, cos_an, cos_pn))


def ocam_violations(mat: torch.Tensor, a: torch.Tensor, p: torch.Tensor, n: torch.Tensor,
                    distance: object) -> torch.Tensor:
    """OCAM's hinge argument for triplets (a, p, n) of a PML distance matrix ``mat``.

    A similarity (``distance.is_inverted``, e.g. ``CosineSimilarity``) goes
    through f = (1 - s) / 2 (the paper); a distance through f = d / 2.
    """
    to01 = cosine_distance01 if getattr(distance, "is_inverted", False) else half_distance
    return ocam_violation01(to01(mat[a, p]), to01(mat[a, n]), to01(mat[p, n]))
