"""Image-retrieval losses, margin schedulers and in-batch miners (docs/RETRIEVAL.md).

Each loss is a small ``torch.nn.Module`` called as ``loss(embeddings, labels)``
on a batch; schedulers are separate objects the loss consults for its margin
each epoch; :data:`LOSSES` maps the ``--losses`` names to configured instances.
"""

from sphr.retrieval.losses.base import (
    BatchStats,
    RetrievalLoss,
    all_pair_indices,
    all_triplet_indices,
    pairwise_euclidean,
    pairwise_similarity,
    select_triplets,
    triplet_negative_pairs,
)
from sphr.retrieval.losses.miners import TripletMiner, pml_triplet_miner
from sphr.retrieval.losses.pairs import (
    ContrastiveLoss,
    NPLBLoss,
    OCAMLoss,
    cosine_distance01,
    ocam_per_triplet,
)
from sphr.retrieval.losses.registry import (
    DEFAULT_LOSSES,
    LOSSES,
    LossSpec,
    build_loss,
    loss_help,
    parse_loss_spec,
)
from sphr.retrieval.losses.schedulers import (
    AutoMargin,
    ConstantMargin,
    DAMSMargin,
    LinearMargin,
    MarginScheduler,
)
from sphr.retrieval.losses.triplet import (
    AdaTripletLoss,
    TripletLoss,
    adatriplet_per_triplet,
    effective_margins,
)

__all__ = [
    "DEFAULT_LOSSES",
    "LOSSES",
    "AdaTripletLoss",
    "AutoMargin",
    "BatchStats",
    "ConstantMargin",
    "ContrastiveLoss",
    "DAMSMargin",
    "LinearMargin",
    "LossSpec",
    "MarginScheduler",
    "NPLBLoss",
    "OCAMLoss",
    "RetrievalLoss",
    "TripletLoss",
    "TripletMiner",
    "adatriplet_per_triplet",
    "all_pair_indices",
    "all_triplet_indices",
    "build_loss",
    "cosine_distance01",
    "effective_margins",
    "loss_help",
    "ocam_per_triplet",
    "pairwise_euclidean",
    "pairwise_similarity",
    "parse_loss_spec",
    "pml_triplet_miner",
    "select_triplets",
    "triplet_negative_pairs",
]
