"""Model selection: the validation rows never reach training; the best epoch is kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sphr.cohorts.triplets import mine_triplets
from sphr.train import TrainConfig, train_sphr
from sphr.train.selection import Validator, split_validation


def _data(n: int = 600, seed: int = 0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    X = (rng.normal(size=(n, 8)) + labels[:, None] * 0.8).astype(np.float32)
    augmented = np.zeros(n, bool)
    augmented[-60:] = True
    labels[-60:] = 2
    return X, labels, augmented, mine_triplets(labels, 4000, seed=1)


def test_validation_split_keeps_validation_rows_out_of_training_triplets():
    _, labels, augmented, triplets = _data()
    split = split_validation(labels, augmented, triplets, 0.2, seed=0)
    val = set(split.validation_rows.tolist())
    assert val and not val & set(split.fit_rows.tolist())
    assert not np.isin(split.fit_triplets, split.validation_rows).any()
    assert np.isin(split.validation_triplets, split.validation_rows).all()
    assert not augmented[split.validation_rows].any()  # augmented rows always stay in fitting
    for c in range(3):  # stratified: ~20% of each class's real rows
        real = (labels == c) & ~augmented
        assert (labels[split.validation_rows] == c).sum() == pytest.approx(0.2 * real.sum(), abs=1)


def test_training_never_sees_validation_rows():
    """Changing the validation rows' features changes no training step before selection: the
    loss curve is identical."""
    X, labels, augmented, triplets = _data()
    cfg = TrainConfig(epochs=3, batch_size=256, validation_size=0.2, device="cpu",
                      checkpoint_every=0)
    a = train_sphr(X, triplets, cfg, labels=labels, augmented=augmented)
    split = split_validation(labels, augmented, triplets, 0.2, seed=cfg.seed)
    X2 = X.copy()
    X2[split.validation_rows] += 5.0
    b = train_sphr(X2, triplets, cfg, labels=labels, augmented=augmented)
    assert a.loss_curve == b.loss_curve
    assert a.validation["val_loss"] != b.validation["val_loss"]
    assert a.validation["validation_rows"] == len(split.validation_rows)


def test_early_stopping_picks_the_best_epoch_on_a_constructed_example():
    """A validator fed a validation-loss sequence with its minimum at epoch 3 keeps epoch 3's
    weights and stops after ``patience`` epochs without improvement."""
    X, labels, augmented, triplets = _data(200)
    split = split_validation(labels, augmented, triplets, 0.2, seed=0)
    v = Validator(torch.from_numpy(X), labels, augmented, split, patience=2)
    params = [torch.zeros(1, 3)]
    losses = [5.0, 4.0, 1.0, 2.0, 3.0, 0.5]
    stopped = None
    for epoch, value in enumerate(losses, start=1):
        params[0].fill_(float(epoch))
        if v.update(epoch, params, [(value, 0.5)]):
            stopped = epoch
            break
    assert stopped == 5 and v.best[0] == (1.0, 3)
    v.restore(params)
    assert float(params[0][0, 0]) == 3.0  # epoch 3's weights are back


def test_train_reports_model_selection(cohorts_dir, tmp_path):
    from sphr.train import run_train

    cfg = TrainConfig.profile("demo", epochs=3, device="cpu")
    report = run_train(cohorts_dir / "female", tmp_path / "nplb", cfg)
    sel = report["model_selection"]
    assert 1 <= sel["best_epoch"] <= 3 and sel["epochs_run"] == 3
    import pandas as pd

    curve = pd.read_parquet(tmp_path / "nplb" / "loss_curve.parquet")
    assert {"val_loss", "val_knn_f1"} <= set(curve.columns)
    assert curve["val_knn_f1"].between(0, 1).all()


def test_knn_check_uses_a_fixed_sample_on_large_cohorts(monkeypatch):
    """Above KNN_ROWS the kNN check reads a seeded sample of the fitting and validation rows
    (the same for the same seed, only real fitting rows); below it, every row."""
    from sphr.train import selection

    X, labels, augmented, triplets = _data(400)
    split = split_validation(labels, augmented, triplets, 0.2, seed=0)
    full = Validator(torch.from_numpy(X), labels, augmented, split, patience=2)
    n_fit_real = len(np.setdiff1d(split.fit_rows, np.flatnonzero(augmented)))
    assert full.xf.shape[0] == n_fit_real and len(full.yv) == len(split.validation_rows)

    monkeypatch.setattr(selection, "KNN_ROWS", 50)
    a = Validator(torch.from_numpy(X), labels, augmented, split, patience=2)
    b = Validator(torch.from_numpy(X), labels, augmented, split, patience=2)
    assert a.xf.shape[0] == 50 and len(a.yv) == len(a.queries) == 50
    assert torch.equal(a.xf, b.xf) and np.array_equal(a.queries, b.queries)
    real_fit = X[np.setdiff1d(split.fit_rows, np.flatnonzero(augmented))]
    assert all((real_fit == row).all(axis=1).any() for row in a.xf.numpy())
    # the validation loss still reads every validation triplet
    assert len(a.tv) == len(split.validation_triplets)


def test_a_stack_says_which_losses_it_still_trains_for(caplog):
    """In a stack every model keeps its own best epoch, but all train until the last one
    stops: the trainer logs when a model is done and which ones hold the stack."""
    import logging
    from types import SimpleNamespace

    from sphr.train.epochs import EpochLoop

    cfgs = [TrainConfig(loss=x, patience=2, validation_size=0.2) for x in ("triplet", "mdr")]
    state = SimpleNamespace(configs=cfgs, epoch=2)
    inputs = SimpleNamespace(validator=SimpleNamespace(best=[(0.5, 1), (0.4, 2)]))
    loop = EpochLoop(state, inputs, None, None)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="sphr.train.epochs"):  # the stack's epoch loop
        loop._log_waiting()  # epoch 2: nobody done
        state.epoch = 3
        loop._log_waiting()  # triplet's patience ran out
        state.epoch = 4
        loop._log_waiting()  # nothing new, and the last one's stop is no news
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["epoch 3: 1 of 2 models done (best epochs [1, 2]); training on for mdr"]


def test_a_model_that_is_done_keeps_its_best_epoch_while_its_stack_trains_on():
    """Once a model's patience has run out, a later, better epoch (trained only because
    the rest of its stack goes on) is not taken: the model ends as it would alone."""
    X, labels, augmented, triplets = _data(200)
    split = split_validation(labels, augmented, triplets, 0.2, seed=0)
    v = Validator(torch.from_numpy(X), labels, augmented, split, patience=2)
    params = [torch.zeros(2, 3)]
    sequence = [(1.0, 5.0), (2.0, 4.0), (3.0, 3.0), (0.5, 2.0)]  # model 0 done after epoch 3
    for epoch, (a, b) in enumerate(sequence, start=1):
        params[0].fill_(float(epoch))
        assert not v.update(epoch, params, [(a, 0.5), (b, 0.5)])
    assert v.best == [(1.0, 1), (2.0, 4)]
