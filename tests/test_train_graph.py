"""The device-resident epoch (sphr.train.graph) on the CPU: the step that gathers its batch
from device buffers and sums its loss on the device equals today's fused step on the same
masks; a stack of K pure models (losses, seeds, two data sets) equals K models alone; one
host read moves an epoch's results. Capturing it as CUDA graphs needs a GPU
(tests/test_train.py, ``-m gpu``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from compiled_setup import BATCH, FEATURES, PURE_THREE, ROWS, compiled

from sphr.errors import ConfigError
from sphr.losses import BatchObjective, build_loss
from sphr.train import TrainConfig, TrainData, train_jobs, train_many, train_sphr
from sphr.train.fused import FusedStep, draw_keys, gather_rows
from sphr.train.graph import DeviceEpoch, read_host, wanted
from sphr.train.stacked import init_model, stack_params

CPU = torch.device("cpu")
#: seven pure models: the comparison's three pure losses at several settings
SEVEN = (("nplb", {}), ("triplet", {"margin": 0.5}), ("distance_swap", {}), ("nplb", {"p": 4}),
         ("triplet", {}), ("nplb", {"margin": 2.0}), ("distance_swap", {"margin": 0.5}))


def _data(n: int = ROWS, m: int = 600, features: int = FEATURES, seed: int = 0) -> TrainData:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = (rng.normal(size=(n, features)) + y[:, None]).astype(np.float32)
    by = [np.flatnonzero(y == c) for c in range(3)]
    a = rng.integers(0, n, m)
    p = np.array([rng.choice(by[y[i]]) for i in a])
    neg = np.array([rng.choice(np.flatnonzero(y != y[i])) for i in a])
    return TrainData(X, np.stack([a, p, neg], 1), y)


def _stack(seeds, specs, features: int = FEATURES, compile: bool = False):
    params = stack_params([init_model(features, s) for s in seeds], CPU)
    opt = torch.optim.Adam(params, lr=1e-2, fused=True)
    losses = [build_loss(name, **kw) for name, kw in specs]
    return params, opt, FusedStep(params, opt, BatchObjective(losses), dropout=0.1, bf16=False,
                                    compile=compile)


def _reference_epoch(step: FusedStep, X, T, perms, gens, bs: int, seed_of=None):
    """Today's per-batch loop (sphr.train.trainer.run_epoch's fused branch)."""
    total, n_batches = torch.zeros(len(step.objective.losses)), 0
    for start in range(0, T.shape[0], bs):
        rows = gather_rows(T, perms[:, start:start + bs])
        keys = draw_keys(gens, CPU)
        if seed_of is not None:
            rows, keys = rows[seed_of], keys[seed_of]
        total += step(X, rows, keys)
        n_batches += 1
    return total / n_batches


@pytest.mark.parametrize("compile", [False, pytest.param(True, marks=compiled)])
def test_device_epoch_equals_the_per_batch_fused_step_bit_for_bit(compile):
    """Gathering by a device step counter, summing on the device and drawing keys in the
    loop body changes no bit: same batches, masks, gradients, Adam state and loss."""
    # 300 = 2 x 128 + 44: a last, shorter batch. Compiled, each batch shape is a graph of its
    # own for both steps (about 25 s each from a cold cache on 2 cores), so the compiled
    # variant keeps whole batches; the compiled short batch is
    # test_device_epoch_in_the_trainer_is_todays_fused_training_on_the_cpu's
    data = _data(m=2 * BATCH if compile else 300)
    X, T = torch.from_numpy(data.X), torch.from_numpy(data.triplets)
    # the per-batch step is the one tests/test_losses_composition.py and test_train_fused.py
    # compile (tests/compiled_setup.py)
    seeds, specs = (0, 0, 5), PURE_THREE
    seed_of = torch.tensor([0, 0, 1])  # two models share seed 0's batches and masks
    ours_p, _, ours = _stack(seeds, specs, compile=compile)
    ref_p, _, ref = _stack(seeds, specs, compile=compile)
    gens = [torch.Generator().manual_seed(s) for s in (0, 5)]
    ref_gens = [torch.Generator().manual_seed(s) for s in (0, 5)]
    epoch = DeviceEpoch(ours, X, T, gens, batch_size=BATCH, n_models=3,
                        maps=(None, seed_of, seed_of))
    for _ in range(2):
        perms = torch.stack([torch.randperm(len(T), generator=g) for g in gens])
        ref_perms = torch.stack([torch.randperm(len(T), generator=g) for g in ref_gens])
        got = epoch.run(perms)
        expect = _reference_epoch(ref, X, T, ref_perms, ref_gens, BATCH, seed_of)
        assert torch.equal(got, expect)
    # every batch stepped, and nothing to capture on the CPU
    assert int(epoch.index) == -(-len(T) // BATCH) and not epoch.captured
    for p, q in zip(ours_p, ref_p, strict=True):
        assert torch.equal(p, q)
    for a, b in zip(ours.adam_state(), ref.adam_state(), strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_stack_of_seven_pure_models_equals_seven_models_alone():
    """K = 7 (the pure losses at several settings, several seeds) as one device epoch: each
    model as its own epoch would train it (batched products: float rounding only)."""
    data = _data()
    X, T = torch.from_numpy(data.X), torch.from_numpy(data.triplets)
    seeds = (0, 1, 2, 0, 3, 1, 4)
    distinct = list(dict.fromkeys(seeds))
    seed_of = torch.tensor([distinct.index(s) for s in seeds])
    params, _, step = _stack(seeds, SEVEN)
    gens = [torch.Generator().manual_seed(s) for s in distinct]
    epoch = DeviceEpoch(step, X, T, gens, batch_size=128, n_models=7,
                        maps=(None, seed_of, seed_of))
    curves = [epoch.run(torch.stack([torch.randperm(len(T), generator=g) for g in gens]))
              for _ in range(2)]
    for j, (seed, spec) in enumerate(zip(seeds, SEVEN, strict=True)):
        alone_p, _, alone = _stack((seed,), (spec,))
        g = [torch.Generator().manual_seed(seed)]
        one = DeviceEpoch(alone, X, T, g, batch_size=128, n_models=1)
        for c in curves:
            value = one.run(torch.stack([torch.randperm(len(T), generator=g[0])]))
            assert torch.allclose(value[0], c[j], rtol=1e-5, atol=1e-6), spec
        for p, q in zip(params, alone_p, strict=True):
            assert torch.allclose(p[j], q[0], atol=1e-5), spec


def test_several_data_sets_gather_their_own_rows():
    """Streams (data set, seed): each gathers its own triplets at its seed's positions."""
    T = torch.stack([torch.arange(30).reshape(10, 3), 100 + torch.arange(30).reshape(10, 3)])
    perm = torch.tensor([[3, 1], [7, 2]])  # seeds 0 and 1, batch of 2
    streams = (torch.tensor([0, 1, 1]), torch.tensor([0, 0, 1]))
    rows = gather_rows(T, perm, streams)
    assert rows.tolist() == [[9, 3, 10, 4, 11, 5], [109, 103, 110, 104, 111, 105],
                             [121, 106, 122, 107, 123, 108]]
    assert torch.equal(gather_rows(T[0], perm), torch.stack([rows[0], gather_rows(
        T[0], perm[1:])[0]]))


def test_two_data_sets_train_as_one_stack_as_each_alone():
    """Two data sets of one shape (the two sexes): one stack, each model on its own rows,
    triplets and validation split, with early stopping and retiring: as alone."""
    women, men = _data(240, seed=0), _data(300, seed=1)
    base = {"epochs": 6, "batch_size": 128, "device": "cpu", "threads": 1,
            "checkpoint_every": 0, "validation_size": 0.2, "patience": 2}
    jobs = [(d, TrainConfig(**base, loss=loss)) for d in (women, men)
            for loss in ("triplet", "nplb", "mdr")]
    stacked = train_jobs(jobs)
    assert {r.timings["models_in_stack"] for r in stacked} >= {6}
    for (d, c), r in zip(jobs, stacked, strict=True):
        alone = train_sphr(d.X, d.triplets, c, labels=d.labels)
        for key in ("best_epoch", "epochs_run", "validation_rows", "fit_triplets"):
            assert r.validation[key] == alone.validation[key], (c.loss, key)
        for v, w in zip(alone.model.state_dict().values(), r.model.state_dict().values(),
                        strict=True):
            assert torch.allclose(v, w, atol=1e-4), c.loss
        assert np.allclose(alone.loss_curve, r.loss_curve, rtol=1e-4, atol=1e-5), c.loss
    # another number of triplets: stacks of their own
    other = _data(240, m=500, seed=2)
    mixed = train_jobs([(women, jobs[0][1]), (other, jobs[0][1])])
    assert [r.timings["models_in_stack"] for r in mixed] == [1, 1]


@compiled
def test_device_epoch_in_the_trainer_is_todays_fused_training_on_the_cpu():
    """cuda_graphs="on" runs the device-resident epoch on the CPU (uncaptured): the same
    bits as the per-batch fused step ("off"), and "auto" leaves the CPU on the latter."""
    d = _data(m=300)
    cfg = TrainConfig(epochs=3, batch_size=BATCH, device="cpu", threads=1, checkpoint_every=0,
                      compile=True, validation_size=0.2, patience=2)
    runs = {m: train_sphr(d.X, d.triplets, dataclasses.replace(cfg, cuda_graphs=m),
                          labels=d.labels) for m in ("off", "on", "auto")}
    assert runs["on"].timings["device_epoch"] and not runs["on"].timings["cuda_graphs"]
    assert not runs["auto"].timings["device_epoch"] and runs["auto"].timings["fused_step"]
    for mode in ("on", "auto"):
        assert runs[mode].loss_curve == runs["off"].loss_curve
        assert runs[mode].validation == runs["off"].validation
        for v, w in zip(runs["off"].model.state_dict().values(),
                        runs[mode].model.state_dict().values(), strict=True):
            assert torch.equal(v, w)


@compiled
def test_a_mixed_stack_trains_its_pure_losses_apart_where_graphs_apply(tmp_path):
    """Where the device-resident epoch applies, the pure losses' models form a stack of their
    own (captured on CUDA) and the others train eagerly: each as it would alone. Resumed
    from a checkpoint, the pure stack ends with the same weights."""
    # 640 = 5 x 128 triplets: whole batches only, so each compiled step is compiled for one
    # batch shape, not two (a cold cache compiled each twice: 161 s of a 2-core box's make
    # test); the short last batch is test_device_epoch_equals_the_per_batch_fused_step's
    d = _data(m=5 * BATCH)
    cfg = TrainConfig(epochs=2, batch_size=BATCH, device="cpu", threads=1, checkpoint_every=1,
                      compile=True, cuda_graphs="on")
    # two NPLB models (seeds 0 and 1; a stack of losses is test_device_epoch_equals_the_...'s)
    # around MDR, whose labels keep it out of the fused step
    configs = [dataclasses.replace(cfg, loss="nplb"), dataclasses.replace(cfg, loss="mdr"),
               dataclasses.replace(cfg, loss="nplb", seed=1)]
    many = train_many(d.X, d.triplets, configs, labels=d.labels)
    assert [r.timings["models_in_stack"] for r in many] == [2, 1, 2]
    assert [r.timings["device_epoch"] for r in many] == [True, False, True]
    for c, r in zip(configs, many, strict=True):
        # alone on the per-batch fused step, which gives the device epoch's bits (test above):
        # the step test_train_fused.py's compiled training builds
        alone = train_sphr(d.X, d.triplets, dataclasses.replace(c, cuda_graphs="off"),
                           labels=d.labels)
        for v, w in zip(alone.model.state_dict().values(), r.model.state_dict().values(),
                        strict=True):
            assert torch.allclose(v, w, atol=1e-5), c.loss
    short = [dataclasses.replace(c, epochs=1) for c in configs]
    train_many(d.X, d.triplets, short, labels=d.labels, checkpoint_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["group0_0", "group0_1"]
    resumed = train_many(d.X, d.triplets, configs, labels=d.labels, checkpoint_dir=tmp_path,
                         resume=True)
    for r, s in zip(many, resumed, strict=True):
        assert s.timings["resumed_from_epoch"] == 1
        for v, w in zip(r.model.state_dict().values(), s.model.state_dict().values(),
                        strict=True):
            assert torch.equal(v, w)


def test_read_host_moves_every_dtype_in_one_copy():
    tensors = [torch.tensor(1.5), torch.arange(3, dtype=torch.int64),
               torch.randn(2, 5).to(torch.bfloat16), torch.arange(7, dtype=torch.int32),
               torch.randn(3, 1, 2)]
    out = read_host(tensors, pack=True)
    assert all(a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
               for a, b in zip(tensors, out, strict=True))
    assert read_host(tensors)[0] is tensors[0]  # CPU tensors: nothing to move


def test_the_device_knn_votes_as_scikit_learn():
    """The validation kNN check on the device (CUDA's default) gives scikit-learn's F1."""
    from sphr.cohorts.triplets import mine_triplets
    from sphr.train.selection import Validator, split_validation
    from sphr.train.stacked import stacked_forward

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 500)
    X = torch.from_numpy((rng.normal(size=(500, 8)) + labels[:, None]).astype(np.float32))
    augmented = np.zeros(500, bool)
    split = split_validation(labels, augmented, mine_triplets(labels, 2000, seed=1), 0.2, 0)
    params = stack_params([init_model(8, s) for s in range(3)], CPU)
    losses = [build_loss(x) for x in ("nplb", "triplet", "mdr")]
    on_host = Validator(X, labels, augmented, split, 2, knn_on_device=False)
    on_device = Validator(X, labels, augmented, split, 2, knn_on_device=True)
    a = on_host(params, BatchObjective(losses), stacked_forward)
    b = on_device(params, BatchObjective(losses), stacked_forward)
    assert a == b


def test_the_cuda_graph_settings():
    assert TrainConfig().cuda_graphs == "auto" and TrainConfig().steps_per_graph == 1
    for bad in ({"cuda_graphs": "yes"}, {"steps_per_graph": 0}):
        with pytest.raises(ConfigError):
            TrainConfig(**bad)
    cuda, cpu = torch.device("cuda"), CPU
    assert wanted("auto", True, cuda) and not wanted("auto", True, cpu)
    assert wanted("on", True, cpu) and not wanted("off", True, cuda)
    assert not wanted("auto", False, cuda)  # the graph is the compiled, fused step's
