"""Training's random streams: each one ``SeedSequence([seed, purpose])`` (sphr.train.seeds)."""

from __future__ import annotations

import numpy as np
import pytest

from sphr.errors import ConfigError
from sphr.train.seeds import PURPOSES, derived_seed, member_seed
from sphr.train.selection import split_validation


def test_every_purpose_is_its_own_stream_and_no_other_seeds_stream():
    """The old offsets made seed 0's ``seed + 1`` stream seed 1's own: no derived stream of
    one seed is the seed itself or a derived stream of a neighbouring seed."""
    assert len(set(PURPOSES.values())) == len(PURPOSES)
    for seed in (0, 1, 2, 41):
        streams = [derived_seed(seed, p) for p in PURPOSES]
        assert len(set(streams)) == len(streams)
        others = {derived_seed(s, p) for s in range(seed - 3, seed + 4) if s >= 0 and s != seed
                  for p in PURPOSES} | set(range(seed - 3, seed + 4))
        assert not others & set(streams), seed
        assert all(0 <= s < 2**31 for s in streams)


def test_a_derived_seed_is_the_seed_sequence_of_seed_and_purpose():
    want = int(np.random.SeedSequence([7, PURPOSES["batches"]]).generate_state(1)[0] % 2**31)
    assert derived_seed(7, "batches") == want
    assert member_seed(7, 0) == 7
    assert member_seed(7, 2) == derived_seed(7, "ensemble_member", 2) != derived_seed(7, "init")
    with pytest.raises(ConfigError, match="unknown seed purpose"):
        derived_seed(0, "validation")
    with pytest.raises(ConfigError, match=">= 0"):
        derived_seed(-1, "init")


def test_the_validation_split_moves_with_its_seed_and_only_with_it():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 400)
    augmented = np.zeros(400, bool)
    triplets = rng.integers(0, 400, (1_000, 3))
    a, b = (split_validation(labels, augmented, triplets, 0.2, seed=0) for _ in range(2))
    c = split_validation(labels, augmented, triplets, 0.2, seed=1)
    np.testing.assert_array_equal(a.validation_rows, b.validation_rows)
    np.testing.assert_array_equal(a.fit_triplets, b.fit_triplets)
    assert not np.array_equal(a.validation_rows, c.validation_rows)
    assert not np.array_equal(a.validation_triplets, c.validation_triplets)
