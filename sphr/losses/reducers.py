"""The tabular losses' default reducer: the mean over the batch's triplets.

A reducer turns the per-triplet losses into one number (pytorch-metric-learning's
composition, docs/METHODS.md#losses). :class:`Mean` is PML's ``MeanReducer`` as a plain
tensor function: it reads the per-triplet losses alone (:meth:`Mean.reduce_losses`), so the
compiled training step traces it (``sphr.train.fused``), and answers PML's call
``reducer(loss_dict, embeddings, labels)`` too. Any PML reducer (``AvgNonZeroReducer``,
``ThresholdReducer``, ...) goes where it goes: the loss hands it PML's loss dict
(``TripletObjective.reduce``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn


class TensorReducer(nn.Module):
    """A reducer that needs the per-triplet losses only: no indices, embeddings or labels."""

    #: a plain tensor function (no statistics or host reads): the fused step traces it
    pure = True

    def reduce_losses(self, losses: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, loss_dict: dict[str, dict[str, Any]], embeddings: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> torch.Tensor:
        (info,) = loss_dict.values()  # PML's reducers take one sub-loss at a time
        return self.reduce_losses(info["losses"])


class Mean(TensorReducer):
    """The mean of the per-triplet losses (PML's ``MeanReducer``; every triplet counts, as in
    ``nn.TripletMarginLoss``)."""

    def reduce_losses(self, losses: torch.Tensor) -> torch.Tensor:
        return losses.mean()
