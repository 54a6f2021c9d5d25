"""N-Pair, LiftedStruct and InfoNCE (NT-Xent): pytorch-metric-learning's, behind the triplet call.

Each gets the batch's embeddings ``cat(a, p, n)``, their class labels and, as
``indices_tuple``, the batch's offline triplets (positions in the
concatenation), so every loss sees the same triplets as the triplet losses.
Without labels, anchor and positive of triplet i share the pseudo-label i and
each negative gets its own.

Distances (docs/METHODS.md#losses; pytorch-metric-learning normalizes embeddings by
default):
- LiftedStruct (Song et al. 2015) is defined on Euclidean distance:
  ``LpDistance(normalize_embeddings=False)``, negative margin = ``margin``.
- N-Pair (Sohn 2016) is defined on inner products of unnormalized embeddings
  with an L2 penalty on them: ``DotProductSimilarity(normalize_embeddings=False)``
  plus ``LpRegularizer(power=2)`` weighted ``l2_reg`` (0.002 as in Sohn).
  pytorch-metric-learning keeps one anchor-positive pair per distinct label, so
  with our three class labels a batch would contribute at most three pairs:
  N-Pair therefore gets the per-triplet pseudo-labels (each triplet's anchor and
  positive share one label, every other row differs), which gives Sohn's
  construction: b pairs per batch, each against the other pairs' positives.
- InfoNCE / NT-Xent is defined on cosine similarity with a temperature:
  ``CosineSimilarity`` (the library's default), temperature 0.07.

``distance=`` / ``reducer=`` replace these distances and the library's default reducer
(each loss's own, as pytorch-metric-learning builds it); the loss reads them back as
``loss.distance`` / ``loss.reducer``, as every SPHR loss has them (:mod:`sphr.losses.base`).

pytorch-metric-learning is imported when one of these is built, so
``sphr.losses`` imports without it.
"""

from __future__ import annotations

from typing import Any

import torch

from sphr.errors import ConfigError
from sphr.losses.base import Labels, TripletObjective, check_parts, pml_batch


def _pml() -> Any:
    try:
        import pytorch_metric_learning as pml  # noqa: F401
        from pytorch_metric_learning import distances, losses, regularizers
    except ImportError as exc:
        raise ConfigError(f"this loss needs pytorch-metric-learning==2.9.0 ({exc})") from exc
    return distances, losses, regularizers


class _PMLLoss(TripletObjective):
    uses_labels = True

    def __init__(self, inner: torch.nn.Module, hparams: dict[str, object]) -> None:
        super().__init__()
        self.inner = inner
        self._hparams = hparams

    @property
    def distance(self) -> Any:  # the PML loss's own: one object, not a copy
        return self.inner.distance

    @property
    def reducer(self) -> Any:
        return self.inner.reducer

    def hparams(self) -> dict[str, object]:
        return dict(self._hparams)

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor,
                labels: Labels | None = None) -> torch.Tensor:
        emb, lab, indices = pml_batch(anchor, positive, negative, labels)
        return self.inner(emb, lab, indices)


def _named(part: Any, default: str) -> str:
    """A distance's name for :meth:`hparams`: ``default`` for the loss's own."""
    return default if part is None else type(part).__name__


class NPair(_PMLLoss):
    name = "npair"
    uses_labels = False  # per-triplet pseudo-labels: see the module docstring

    def __init__(self, l2_reg: float = 0.002, *, distance: Any = None, reducer: Any = None) -> None:
        check_parts(distance, reducer)
        distances, losses, regularizers = _pml()
        inner = losses.NPairsLoss(
            distance=(distances.DotProductSimilarity(normalize_embeddings=False)
                      if distance is None else distance),
            reducer=reducer,
            embedding_regularizer=regularizers.LpRegularizer(p=2, power=2) if l2_reg else None,
            embedding_reg_weight=float(l2_reg) if l2_reg else 1.0)
        super().__init__(inner, {"l2_reg": float(l2_reg), "distance": _named(distance, "dot")})


class LiftedStruct(_PMLLoss):
    name = "lifted_struct"

    def __init__(self, margin: float = 1.0, pos_margin: float = 0.0, *, distance: Any = None,
                 reducer: Any = None) -> None:
        check_parts(distance, reducer)
        distances, losses, _ = _pml()
        inner = losses.LiftedStructureLoss(
            neg_margin=float(margin), pos_margin=float(pos_margin), reducer=reducer,
            distance=(distances.LpDistance(normalize_embeddings=False, p=2, power=1)
                      if distance is None else distance))
        super().__init__(inner, {"margin": float(margin), "pos_margin": float(pos_margin),
                                 "distance": _named(distance, "euclidean")})


class InfoNCE(_PMLLoss):
    name = "infonce"

    def __init__(self, temperature: float = 0.07, *, distance: Any = None,
                 reducer: Any = None) -> None:
        check_parts(distance, reducer)
        if temperature <= 0:
            raise ConfigError(f"InfoNCE temperature must be positive, got {temperature}")
        distances, losses, _ = _pml()
        inner = losses.NTXentLoss(temperature=float(temperature), reducer=reducer,
                                  distance=distances.CosineSimilarity() if distance is None
                                  else distance)
        super().__init__(inner, {"temperature": float(temperature),
                                 "distance": _named(distance, "cosine")})
