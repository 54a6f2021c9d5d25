"""The raw representation and the sign convention the linear baselines share.

The interface every representation implements (``fit`` / ``transform`` / ``save`` /
``load``, :class:`~sphr.representation.Representation`) lives in the shared module
:mod:`sphr.representation`, so that the training stage (SPHR) and the risk stage implement
the same one; it is re-exported here for the baselines' modules.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.extmath import svd_flip

from sphr.representation import Representation, as_matrix, keep_params

__all__ = ["Raw", "Representation", "as_matrix", "flip_signs", "keep_params"]


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
