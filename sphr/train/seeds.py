"""Every random stream of training, derived from the one ``seed`` of a :class:`TrainConfig`.

A stream is ``SeedSequence([seed, purpose, *index])`` with a named purpose (:data:`PURPOSES`),
so no two streams of one seed coincide and no stream of seed ``s`` is another seed's stream.
Offsets (the seed plus one for the validation triplets, plus two for the fitting ones ...)
made seed 0's second stream seed 1's first one. docs/REPRODUCIBILITY.md, "Derived seeds",
says which results the change moved.
"""

from __future__ import annotations

import numpy as np

from sphr.errors import ConfigError

#: purpose -> the integer mixed into its stream. Part of every trained model's identity:
#: never renumber one, only add new ones
PURPOSES: dict[str, int] = {
    "ensemble_member": 1,  # the seed of ensemble member m (an index): sphr.models.SPHREnsemble
    "init": 2,  # the network's initial weights
    "batches": 3,  # each epoch's triplet order and the dropout masks
    "validation_split": 4,  # which real rows model selection holds out
    "fit_triplets": 5,  # triplets mined among the fitting rows to replace the dropped ones
    "validation_triplets": 6,  # triplets mined among the held-out rows
    "knn_sample": 7,  # the validation kNN check's sample of a large cohort
}


def derived_seed(seed: int, purpose: str, *index: int) -> int:
    """The 31-bit seed of stream ``purpose`` (and ``index``, e.g. an ensemble member) of
    ``seed``: the first word of ``SeedSequence([seed, PURPOSES[purpose], *index])``."""
    if purpose not in PURPOSES:
        raise ConfigError(f"unknown seed purpose {purpose!r}: choose from {', '.join(PURPOSES)}")
    if int(seed) < 0 or any(int(i) < 0 for i in index):
        raise ConfigError(f"seeds must be >= 0, got {seed} {index}")
    words = [int(seed), PURPOSES[purpose], *map(int, index)]
    return int(np.random.SeedSequence(words).generate_state(1)[0] % 2**31)


def member_seed(seed: int, member: int) -> int:
    """The seed of ensemble member ``member``: ``seed`` itself for member 0 (so member 0 is
    the model trained alone), else stream ``ensemble_member`` of ``seed``."""
    return int(seed) if member == 0 else derived_seed(seed, "ensemble_member", member)
