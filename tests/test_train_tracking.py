"""SPHR's per-epoch tracking and the severity epoch rule (docs/METHODS.md, "SPHR's stability
from fit to fit"): the statistics, that only training rows reach them, and that the rule keeps
the epoch it says."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_train_selection import _data as selection_data

from sphr.errors import ConfigError
from sphr.survival import c_index
from sphr.train import TrainConfig, train_sphr
from sphr.train.selection import Validator, split_validation
from sphr.train.tracking import (
    TRACK_COLUMNS,
    RowFacts,
    health_distance,
    severity_concordance,
    track_epoch,
)


def _data(n: int = 600, seed: int = 0):
    """Model selection's test cohort (test_train_selection), with ages."""
    X, labels, augmented, triplets = selection_data(n, seed)
    return X, labels, augmented, triplets, np.random.default_rng([seed, 1]).uniform(40, 70, n)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(-5, 5)), min_size=4, max_size=60))
def test_severity_concordance_is_harrells_c_with_the_class_as_the_ordering(rows):
    """The rank-sum form equals Harrell's C (sphr.survival.c_index) with the class code as
    the 'time' (unhealthy first) and every row an event, ties in distance included."""
    labels = np.array([r[0] for r in rows])
    distance = np.array([r[1] for r in rows], float)
    if len(np.unique(labels)) < 2:
        assert np.isnan(severity_concordance(distance, labels))
        return
    expected = c_index(labels.astype(float), np.ones(len(labels), bool), distance)
    assert severity_concordance(distance, labels) == pytest.approx(expected, abs=1e-12)


def test_severity_concordance_is_one_for_a_perfect_ordering_and_zero_reversed():
    labels = np.array([0, 0, 1, 1, 2, 2])
    d = np.array([9.0, 8.0, 5.0, 4.0, 1.0, 0.5])
    assert severity_concordance(d, labels) == 1.0
    assert severity_concordance(-d, labels) == 0.0


def test_health_distance_is_from_the_median_of_the_reference():
    ref = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    z = np.array([[1.0, 1.0], [4.0, 5.0]])
    assert np.allclose(health_distance(z, ref), [0.0, 5.0])
    assert np.isnan(health_distance(z, ref[:0])).all()


def test_track_epoch_reads_the_facts_it_is_given():
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2], 30)
    z = rng.normal(size=(90, 4)) + (2 - y)[:, None]
    age = np.linspace(40, 70, 90)
    death_t = rng.uniform(1, 10, 90)
    death_e = rng.random(90) < 0.3
    facts = RowFacts(age, death_t, death_e)
    out = track_epoch(z, y, facts, z, y, facts)
    assert len(out) == len(TRACK_COLUMNS)
    assert out[0] == out[1] > 0.8  # the sicker classes lie further from the BFH median
    assert np.isfinite(out[2]) and out[2] == out[3]
    assert np.isfinite(out[4])
    bare = track_epoch(z, y, None, z, y, None)
    assert bare[:2] == out[:2] and bare[2:] == (None, None, None)  # not tracked


def test_training_records_the_tracking_per_epoch():
    X, labels, augmented, triplets, age = _data()
    cfg = TrainConfig(epochs=3, batch_size=256, validation_size=0.2, device="cpu",
                      checkpoint_every=0)
    res = train_sphr(X, triplets, cfg, labels=labels, augmented=augmented,
                     facts=RowFacts(age=age))
    for name in TRACK_COLUMNS:
        assert len(res.validation[name]) == 3
    assert all(0 <= c <= 1 for c in res.validation["val_severity_c"])
    assert all(-1 <= r <= 1 for r in res.validation["fit_age_rho"])
    assert all(v is None for v in res.validation["fit_death_c"])  # no follow-up given
    assert res.validation["selection"] == "loss"


def test_the_severity_rule_keeps_the_epoch_with_the_best_validation_severity():
    X, labels, augmented, triplets, _ = _data()
    cfg = TrainConfig(epochs=4, batch_size=256, validation_size=0.2, device="cpu",
                      checkpoint_every=0, selection="severity")
    res = train_sphr(X, triplets, cfg, labels=labels, augmented=augmented)
    sev = res.validation["val_severity_c"]
    assert res.validation["best_epoch"] == int(np.argmax(sev)) + 1
    assert res.validation["best_val_loss"] == res.validation["val_loss"][int(np.argmax(sev))]


def test_the_severity_rule_on_a_constructed_sequence():
    """Fed a tracking sequence with its best validation severity at epoch 2, the validator
    keeps epoch 2 whatever the validation loss says, and stops after ``patience``."""
    X, labels, augmented, triplets, _ = _data(200)
    split = split_validation(labels, augmented, triplets, 0.2, seed=0)
    v = Validator(torch.from_numpy(X), labels, augmented, split, patience=2,
                  selection="severity")
    params = [torch.zeros(1, 3)]
    severity = [0.6, 0.7, 0.65, 0.64, 0.9]
    stopped = None
    losses = [5, 4, 1, 0.5, 0.1]
    for epoch, (value, loss) in enumerate(zip(severity, losses, strict=True), start=1):
        params[0].fill_(float(epoch))
        if v.update(epoch, params, [(loss, 0.5, value, value, 0, 0, 0.5)]):
            stopped = epoch
            break
    assert stopped == 4 and v.best[0][1] == 2
    with pytest.raises(ConfigError, match="selection"):
        Validator(torch.from_numpy(X), labels, augmented, split, patience=2, selection="f1")
    with pytest.raises(ConfigError, match="validation_size"):
        TrainConfig(selection="severity")


def test_tracking_reads_no_row_outside_training():
    """The validator sees only the training matrix: deaths of people outside it (a held-out
    fold) cannot reach the tracking, and changing a training row's death moves it."""
    from sphr.train.run import row_facts

    train = pd.DataFrame({"eid": [1, 2, 3, 4], "age_years": [50.0, 60, 55, 45],
                          "augmented": [False, False, False, True]})
    death = pd.DataFrame({"eid": [1, 2, 3, 99], "time_years": [3.0, 8.0, 5.0, 0.5],
                          "event": [1, 0, 1, 1]})
    facts = row_facts(train, death)
    assert np.array_equal(facts.death_event, [True, False, True, False])
    assert np.isnan(facts.death_time[3])  # an augmented row is no one: no follow-up
    other = death.copy()
    other.loc[other["eid"] == 99, ["time_years", "event"]] = [9.0, 0]  # held-out person
    same = row_facts(train, other)
    assert np.array_equal(same.death_time, facts.death_time, equal_nan=True)
    assert np.array_equal(same.death_event, facts.death_event)
    assert row_facts(train).death_time is None


def test_an_ensemble_embeds_its_members_side_by_side_and_its_distance_is_their_rms(tmp_path):
    """Remedy R2: member 0 is the model trained alone with the same seed; the ensemble's
    embedding is the members' side by side over sqrt(K); the health distance is the root mean
    square of the members'; it survives a save and load."""
    from sphr.models import SPHREnsemble
    from sphr.train.model_io import embed, load_model, save_model
    from sphr.train.trainer import member_seed

    X, labels, augmented, triplets, _ = _data(300)
    cfg = TrainConfig(epochs=2, batch_size=256, validation_size=0.2, device="cpu",
                      checkpoint_every=0)
    k = 3
    ens = train_sphr(X, triplets, TrainConfig(**{**cfg.__dict__, "ensemble": k}),
                     labels=labels, augmented=augmented)
    assert isinstance(ens.model, SPHREnsemble) and ens.model.out == k * 32
    assert [m["seed"] for m in ens.validation["members"]] == [member_seed(0, m)
                                                               for m in range(k)]
    alone = train_sphr(X, triplets, cfg, labels=labels, augmented=augmented)
    z_alone = embed(alone.model, X, device="cpu")
    members = [embed(m, X, device="cpu") for m in ens.model.members]
    assert np.allclose(members[0], z_alone, atol=1e-5)  # a stack trains as alone
    z = embed(ens.model, X, device="cpu")
    assert np.allclose(z, np.concatenate(members, axis=1) / np.sqrt(k), atol=1e-6)
    ref = labels == 2
    d = health_distance(z, z[ref])
    d_members = np.stack([health_distance(m, m[ref]) for m in members])
    assert np.allclose(d, np.sqrt((d_members ** 2).mean(axis=0)), atol=1e-5)
    save_model(ens.model, ens.config, [f"f{i}" for i in range(X.shape[1])], tmp_path)
    assert np.array_equal(embed(load_model(tmp_path), X, device="cpu"), z)


def test_the_same_seed_trains_the_same_ensemble_bit_for_bit():
    from sphr.train.model_io import embed

    X, labels, augmented, triplets, _ = _data(300)
    cfg = TrainConfig(epochs=2, batch_size=256, validation_size=0.2, device="cpu",
                      checkpoint_every=0, ensemble=2)
    a = train_sphr(X, triplets, cfg, labels=labels, augmented=augmented)
    b = train_sphr(X, triplets, cfg, labels=labels, augmented=augmented)
    assert np.array_equal(embed(a.model, X, device="cpu"), embed(b.model, X, device="cpu"))
    with pytest.raises(ConfigError, match="ensemble"):
        TrainConfig(ensemble=0)
