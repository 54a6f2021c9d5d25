"""What training minimizes for a stack of models, in one place: each model's loss of a batch
plus the weighted terms of the registry's ``term`` domain (today one: ``geometry``, the
marker-geometry stress of :mod:`sphr.losses.anchor`, weighted by ``TrainConfig.anchor``).

The per-batch step (:mod:`sphr.train.epochs`), the compiled step (:mod:`sphr.train.fused`,
which traces it; the CUDA graphs replay that) and model selection's validation loss
(:mod:`sphr.train.selection`) all call :class:`BatchObjective`, so the validation loss is the
training objective by construction.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from sphr.losses.registry import REGISTRY, TERM


class BatchObjective:
    """``objective(z, x, labels)`` -> each model's value (K,) of a batch laid out as the
    trainer gathers it: ``z`` (K, 3b, d) embeddings and ``x`` (K, 3b, n) inputs, anchors then
    positives then negatives along the rows; ``labels`` (K, 3b) the rows' classes, read by
    the losses that use labels (None: no loss does, or none are known).

    ``geometry`` > 0 adds that weight times the registry's ``geometry`` term."""

    def __init__(self, losses: Sequence[nn.Module], geometry: float = 0.0) -> None:
        self.losses = list(losses)
        self.geometry = float(geometry)
        self.term = REGISTRY.build("geometry", TERM, weight=self.geometry) if geometry else None

    def subset(self, models: Sequence[int]) -> BatchObjective:
        """The objective of models ``models`` of the stack alone."""
        return BatchObjective([self.losses[j] for j in models], self.geometry)

    def __call__(self, z: torch.Tensor, x: torch.Tensor, labels: torch.Tensor | None = None
                 ) -> torch.Tensor:
        b = z.shape[-2] // 3
        values = []
        for j, loss in enumerate(self.losses):
            lab = None
            if labels is not None and loss.uses_labels:
                lab = (labels[j, :b], labels[j, b:2 * b], labels[j, 2 * b:])
            values.append(loss(z[j, :b], z[j, b:2 * b], z[j, 2 * b:], lab))
        v = torch.stack(values)
        return v if self.term is None else v + self.term(z, x)
