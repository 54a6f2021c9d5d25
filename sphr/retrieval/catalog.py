"""The loss names, their defaults and one-line descriptions, without importing torch.

``sphr retrieval --help`` lists these; :mod:`sphr.retrieval.losses.builders`
builds the losses from the same entries, so names, defaults and help text
live in one place.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class LossEntry(NamedTuple):
    description: str
    defaults: dict[str, Any]
    #: the margin scheduler family ("" when the loss has none)
    scheduler: str


_AT = {"selection": "semihard", "reduction": "nonzero"}  # the AdaTriplet authors' protocol
_DAMS = {"swap": True, "selection": "all", "reduction": "mean"}  # the DAMS paper's protocol
#: AutoMargin warm-up: off by default (the paper); profiles below the paper budget switch it on
_WARMUP = {"warmup_epochs": 0, "warmup_until_delta": False}

LOSS_CATALOG: dict[str, LossEntry] = {
    "triplet": LossEntry(
        "Triplet* on cosine similarity, eps 0.25, semihard in-batch triplets, mean over non-zero "
        "terms (AdaTriplet paper Eq. 3 and its authors' code)",
        {"margin": 0.25, "swap": False, **_AT}, "constant"),
    "triplet_euclidean": LossEntry(
        "Triplet on Euclidean distance of L2-normalized embeddings, margin 0.3, all in-batch "
        "triplets, mean (NPLB Eq. 1: NPLB without its regularizer)",
        {"margin": 0.3, "swap": False, "selection": "all", "reduction": "mean"}, "constant"),
    "triplet_automargin": LossEntry(
        "Triplet* (cosine) with AutoMargin eps = mean(delta)/K_delta (K_delta 2, eps0 0.25), "
        "updated per epoch (AdaTriplet paper, Table 1b); warmup_epochs / warmup_until_delta "
        "hold eps0",
        {"k_delta": 2.0, "eps0": 0.25, "per_batch": False, **_WARMUP, **_AT}, "automargin"),
    "adatriplet": LossEntry(
        "AdaTriplet, fixed eps 0.25, beta 0, lambda 1, semihard in-batch triplets",
        {"eps": 0.25, "beta": 0.0, "lam": 1.0, **_AT}, "constant"),
    "adatriplet_automargin": LossEntry(
        "AdaTriplet + AutoMargin (K_delta 2, K_an 2, eps0 0.25, beta0 0), updated once per epoch "
        "from the previous epoch's in-batch statistics (per_batch=true: every batch); "
        "warmup_epochs=K / warmup_until_delta=true hold eps0, beta0 first",
        {"k_delta": 2.0, "k_an": 2.0, "eps0": 0.25, "beta0": 0.0, "lam": 1.0, "per_batch": False,
         **_WARMUP, **_AT},
        "automargin"),
    "triplet_constant": LossEntry(
        "Euclidean triplet with distance swap (min), constant mu 0.3, all in-batch triplets, mean "
        "(DAMS paper baseline)",
        {"margin": 0.3, **_DAMS}, "constant"),
    "triplet_linear": LossEntry(
        "Euclidean triplet + swap, Linear scheduler: mu0 0, +0.01 per epoch over paper_epochs 100 "
        "(DAMS paper); below the paper budget the step is scaled to reach mu0 + 0.01 * 100 in "
        "the run",
        {"mu0": 0.0, "step": 0.01, "paper_epochs": 100, **_DAMS}, "linear"),
    "triplet_dams": LossEntry(
        "Euclidean triplet + swap, DAMS: mu0 0, +0.01 after an epoch whose easy share > 0.95 "
        "(step scaled like Linear's below the paper budget; mu0 is the paper's ablation knob)",
        {"mu0": 0.0, "step": 0.01, "threshold": 0.95, "paper_epochs": 100, **_DAMS}, "dams"),
    "ocam": LossEntry(
        "OCAM: f = (1 - cos)/2, adaptive margin (1 - f_pn)/2, all in-batch triplets, mean",
        {"selection": "all", "reduction": "mean"}, ""),
    "nplb": LossEntry(
        "NPLB: Euclidean triplet (margin 0.3) + (d_pn - d_an)^2 on L2-normalized embeddings, all "
        "in-batch triplets, mean",
        {"margin": 0.3, "p": 2, "selection": "all", "reduction": "mean"}, "constant"),
    "contrastive": LossEntry(
        "Contrastive on all in-batch pairs, Euclidean, pos margin 0, neg margin 1 "
        "(pytorch-metric-learning defaults), mean over non-zero terms",
        {"pos_margin": 0.0, "neg_margin": 1.0, "reduction": "nonzero"}, ""),
}

#: the losses the acceptance comparison runs by default
DEFAULT_LOSSES: tuple[str, ...] = ("triplet", "adatriplet_automargin", "triplet_constant",
                                   "triplet_linear", "triplet_dams", "ocam", "nplb", "contrastive")


def loss_help() -> str:
    """One line per loss, for ``sphr retrieval --help``."""
    return "\n".join(f"  {name:<22} {e.description}" for name, e in LOSS_CATALOG.items())
