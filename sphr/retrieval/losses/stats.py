"""What a loss tells its margin scheduler about a batch: :class:`BatchStats`.

Its own module so that the losses (:mod:`sphr.retrieval.losses.base`, which hold a
scheduler) and the schedulers (:mod:`sphr.retrieval.losses.schedulers`, which read the
statistics) both import it and neither imports the other's module back.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class BatchStats:
    """Detached statistics of one batch, handed to a margin scheduler before the loss is computed.

    ``effective_margins``: delta of every in-batch triplet (not only the mined
    ones), in the loss's distance, swap applied when the loss swaps.
    ``negative_similarities``: cosine similarity of the de-duplicated negative pairs.
    """

    effective_margins: torch.Tensor
    negative_similarities: torch.Tensor
