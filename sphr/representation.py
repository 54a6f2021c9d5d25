"""The one interface of every representation: ``fit`` / ``transform`` / ``save`` / ``load``.

A representation maps the normalized cohort features (one row per participant) to an
embedding. It is fitted on the rows its stage says (training rows; the risk stage's
spaces on bona fide healthy rows) and then applied, row by row, to anyone: ``transform``
never looks at other rows of its input, so a test participant's embedding cannot depend on
other test participants (``tests/test_baselines.py`` checks this for every representation).

Who implements it: the baselines (raw, PCA, ICA, DiffMap, DeepPatient; ``sphr.baselines``),
SPHR (:class:`sphr.train.embedding.SPHREmbedding`) and the risk stage's marker-space and
whitening transforms (``sphr.risk.spaces``). Every stage may import this module; it imports
no stage, so the evaluation and the risk stage treat every representation alike.

scikit-learn style: parameters in ``__init__`` stored unchanged (``get_params``, ``clone``),
fitted attributes end in ``_`` (``n_features_in_`` at least), input validated with
:func:`as_matrix`. ``save`` / ``load`` default to a joblib pickle (``model.joblib`` of
``sphr baselines``); a representation with a file format of its own (SPHR's ``model.pt``)
overrides both.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from sphr.errors import InputError
from sphr.io import write_bytes

R = TypeVar("R", bound="Representation")


def as_matrix(X: np.ndarray, *, what: str = "X") -> np.ndarray:
    """A finite 2-D float array; a clear error instead of a NaN deep inside a solver."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise InputError(f"{what} must be a 2-D array (participants x features), "
                         f"got shape {X.shape}")
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
    """Base class: subclasses implement ``_fit`` and ``_transform`` on checked arrays.

    ``fit(X, **fit_params)`` hands the keyword arguments to ``_fit`` (the ages of the
    reference rows, for a space whose reference is young); ``transform`` returns
    ``output_dtype`` (float32 embeddings; the risk stage's spaces keep float64 distances).
    """

    #: embedding width; ``None`` means "same as the input" (the raw representation)
    n_components: int | None = None
    #: dtype of ``transform``'s result
    output_dtype: ClassVar[type] = np.float32

    def fit(self: R, X: np.ndarray, y: None = None, **fit_params: Any) -> R:
        X = as_matrix(X, what=f"{type(self).__name__}.fit input")
        self.n_features_in_ = X.shape[1]
        self._fit(X, **fit_params)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "n_features_in_")
        X = as_matrix(X, what=f"{type(self).__name__}.transform input")
        if X.shape[1] != self.n_features_in_:
            raise InputError(
                f"{type(self).__name__} was fitted on {self.n_features_in_} features, "
                f"got {X.shape[1]}"
            )
        return np.ascontiguousarray(self._transform(X), dtype=self.output_dtype)

    def _fit(self, X: np.ndarray) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _transform(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def save(self, path: str | Path) -> Path:
        """The fitted representation as one file (a joblib pickle), written atomically."""
        import joblib

        check_is_fitted(self, "n_features_in_")
        buf = io.BytesIO()
        joblib.dump(self, buf)
        return write_bytes(buf.getvalue(), path)

    @classmethod
    def load(cls: type[R], path: str | Path) -> R:
        """A representation saved by :meth:`save`; an ``InputError`` names a missing file or
        one that holds something else."""
        import joblib

        path = Path(path)
        if not path.is_file():
            raise InputError(f"missing representation file {path.name}", file=path)
        model = joblib.load(path)
        if not isinstance(model, cls):
            raise InputError(f"not a {cls.__name__} (holds a {type(model).__name__})", file=path)
        return model
