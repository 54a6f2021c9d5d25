"""Image-retrieval losses, margin schedulers and in-batch miners (docs/notes/RETRIEVAL.md).

Each loss is a pytorch-metric-learning ``BaseMetricLossFunction`` called as
``loss(embeddings, labels, indices_tuple=None)`` on a batch, with PML
``distance=`` and ``reducer=`` objects; miners (PML ``BaseMiner`` subclasses,
or PML's own) pick the triplets; schedulers are separate objects the loss
consults for its margin each epoch; :data:`LOSSES` maps the ``--losses``
names to their registry entries; ``sphr.losses.registry.build_loss(spec, RETRIEVAL)`` makes one.
"""

from sphr.retrieval.losses.base import (
    EuclideanDistance,
    RetrievalLoss,
    all_pair_indices,
    all_triplet_indices,
    batch_stats,
    distance_for,
    pairwise_euclidean,
    pairwise_similarity,
    reducer_for,
    select_triplets,
    triplet_margins,
    triplet_negative_pairs,
)
from sphr.retrieval.losses.builders import DEFAULT_LOSSES, LOSSES, loss_help
from sphr.retrieval.losses.formulas import (
    adatriplet_per_triplet,
    cosine_distance01,
    ocam_per_triplet,
    ocam_violation,
    ocam_violations,
)
from sphr.retrieval.losses.miners import OCAMMiner, TripletMiner, selection_miner
from sphr.retrieval.losses.pairs import ContrastiveLoss, NPLBLoss, OCAMLoss
from sphr.retrieval.losses.schedulers import (
    AutoMargin,
    ConstantMargin,
    DAMSMargin,
    LinearMargin,
    MarginScheduler,
)
from sphr.retrieval.losses.stats import BatchStats
from sphr.retrieval.losses.triplet import AdaTripletLoss, TripletLoss

__all__ = [
    "DEFAULT_LOSSES",
    "LOSSES",
    "AdaTripletLoss",
    "AutoMargin",
    "BatchStats",
    "ConstantMargin",
    "ContrastiveLoss",
    "DAMSMargin",
    "EuclideanDistance",
    "LinearMargin",
    "MarginScheduler",
    "NPLBLoss",
    "OCAMLoss",
    "OCAMMiner",
    "RetrievalLoss",
    "TripletLoss",
    "TripletMiner",
    "adatriplet_per_triplet",
    "all_pair_indices",
    "all_triplet_indices",
    "batch_stats",
    "cosine_distance01",
    "distance_for",
    "loss_help",
    "ocam_per_triplet",
    "ocam_violation",
    "ocam_violations",
    "pairwise_euclidean",
    "pairwise_similarity",
    "reducer_for",
    "select_triplets",
    "selection_miner",
    "triplet_margins",
    "triplet_negative_pairs",
]
