"""The training loop: device-resident data, index-gathered batches, resumable.

Features ``X`` (rows of train.parquet) and the triplet table live on the
device. Each epoch draws one ``torch.randperm`` over the triplets from the
model's generator; each batch is gathered by index (``X[rows]`` with the a, p
and n rows concatenated) and embedded in one forward pass. Loss values stay on
the device and are read once per epoch. No DataLoader, no per-sample Python,
no host-device copies in the loop (pytorch-metric-learning's N-Pair reads its
labels on the host; that is inside the library).

Several models train together (:func:`train_many`) as one stacked network
(:mod:`sphr.train.stacked`); models with the same seed share batches and
dropout masks, exactly as each would draw them alone. Models on different data sets of
one shape (the two sexes) stack too (:func:`train_jobs`), each on its own rows, triplets
and validation split.

With ``compile`` and pure losses, an epoch on a CUDA device is CUDA graph replays
(:mod:`sphr.train.graph`); a stack that mixes pure and other losses then trains as two
stacks, the pure one captured, the other eager, so each model trains as it would alone.
An epoch's loss and validation reach the host in one copy.

A stack (``_Stack``) is composed of named parts, each with declared inputs: its inputs and
random streams (:mod:`sphr.train.stack_data`), the state its epochs change and its
checkpoints (:mod:`sphr.train.checkpoint`) and its epochs and validation
(:mod:`sphr.train.epochs`, with the ``on_epoch`` callback,
:data:`~sphr.train.epochs.EpochCallback`); here the models, losses and optimizer, and the
public functions.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sphr.device import configure_threads, resolve_device
from sphr.errors import ConfigError, InputError
from sphr.losses import BatchObjective, TripletObjective, build_loss, loss_parameters
from sphr.models import SPHREnsemble, SPHRNet
from sphr.train import checkpoint, fused, graph
from sphr.train.checkpoint import CHECKPOINT, StackState
from sphr.train.config import PER_MODEL, SEED, TrainConfig, settings_with
from sphr.train.epochs import EpochCallback, EpochLoop
from sphr.train.seeds import derived_seed, member_seed
from sphr.train.selection import ValidationSplit, split_validation
from sphr.train.stack_data import Prepared, StackInputs, TrainData
from sphr.train.stacked import init_model, stack_params, stacked_forward, unstack
from sphr.train.tracking import TRACK_COLUMNS, RowFacts

log = logging.getLogger(__name__)

#: settings that may differ between models trained as one stack (their fields' role)
_PER_MODEL = (*settings_with(TrainConfig, role=PER_MODEL), *settings_with(TrainConfig, role=SEED))

__all__ = ["CHECKPOINT", "EpochCallback", "TrainData", "TrainResult", "make_loss",
           "member_seed", "train_jobs", "train_many", "train_sphr"]


@dataclass
class TrainResult:
    """A trained model (CPU, eval mode), its per-epoch mean loss and how long it took."""

    model: SPHRNet | SPHREnsemble
    loss_curve: list[float]
    config: TrainConfig
    timings: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    n_triplets: int = 0
    loss_module: TripletObjective | None = None
    #: model selection: best_epoch, epochs_run, val_loss and val_knn_f1 per epoch (empty: none)
    validation: dict[str, Any] = field(default_factory=dict)


def make_loss(cfg: TrainConfig) -> TripletObjective:
    """The config's loss with ``margin`` / ``p`` passed where the loss takes them."""
    accepted = loss_parameters(cfg.loss)
    params = {k: v for k, v in (("margin", cfg.margin), ("p", cfg.p)) if k in accepted}
    return build_loss(cfg.loss, **{**params, **dict(cfg.loss_params)})


def _check_inputs(X: np.ndarray, triplets: np.ndarray, labels: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[0] == 0:
        raise InputError(f"features must be a non-empty (rows, features) matrix, got {X.shape}")
    if not np.isfinite(X).all():
        raise InputError("features hold NaN or inf",
                         row=int(np.argwhere(~np.isfinite(X))[0, 0]) + 1)
    t = np.ascontiguousarray(triplets, dtype=np.int64)
    if t.ndim != 2 or t.shape[1] != 3 or len(t) == 0:
        raise InputError(f"triplets must be a non-empty (m, 3) index array, got {t.shape}")
    if t.min() < 0 or t.max() >= X.shape[0]:
        raise InputError(f"triplet indices must lie in [0, {X.shape[0]}), got {t.min()}..{t.max()}")
    if labels is not None:
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != (X.shape[0],):
            raise InputError(f"labels must have one entry per row ({X.shape[0]}), "
                             f"got {labels.shape}")
    return X, t, labels


def _group_key(cfg: TrainConfig) -> tuple[Any, ...]:
    d = dataclasses.asdict(cfg)
    return tuple((k, repr(v)) for k, v in sorted(d.items()) if k not in _PER_MODEL)


class _Stack:
    """K models with the same optimizer settings, trained as one stack, composed of named
    parts with declared inputs: its inputs and random streams (``inputs``,
    :class:`~sphr.train.stack_data.StackInputs`), what its epochs change (``state``,
    :class:`~sphr.train.checkpoint.StackState`, which :mod:`sphr.train.checkpoint` saves and
    loads) and its epochs (``loop``, :class:`~sphr.train.epochs.EpochLoop`); here the models,
    losses and optimizer are made, and the trained models read back."""

    def __init__(self, data: Sequence[Prepared], configs: Sequence[TrainConfig],
                 data_of: Sequence[int] | None = None) -> None:
        """Model ``j`` trains on ``data[data_of[j]]`` (default: every model on ``data[0]``);
        several data sets need one shape (as many features and triplets)."""
        configs = list(configs)
        cfg = configs[0]
        device = resolve_device(cfg.device)
        threads = configure_threads(cfg.threads) if device.type == "cpu" else None
        losses = [make_loss(c).to(device).train() for c in configs]
        self.inputs = inputs = StackInputs(
            data, configs, list(data_of) if data_of is not None else [0] * len(configs), device,
            labels=any(loss.uses_labels for loss in losses))
        self.templates = [init_model(inputs.X.shape[1], derived_seed(c.seed, "init"),
                                     c.out_dim, c.dropout) for c in configs]
        params = stack_params(self.templates, device)
        extra = [p for loss in losses for p in loss.parameters()]
        # fused: one kernel for every parameter (CPU and CUDA), ~2x less optimizer time
        opt = torch.optim.Adam([*params, *extra], lr=cfg.lr, fused=True)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=cfg.lr_step, gamma=cfg.lr_gamma)
        self.state = StackState(configs, params, opt, sched, losses)
        # the loss and the marker-geometry term, as every path and the validation add them
        objective = BatchObjective(losses, geometry=cfg.anchor)
        forward = torch.compile(stacked_forward) if cfg.compile else stacked_forward
        # the whole step as one graph where every loss is a pure function (sphr.train.fused),
        # and on CUDA the whole epoch as graph replays (sphr.train.graph)
        step, epoch = None, None
        if cfg.compile and fused.supports(losses):
            step = fused.FusedStep(params, opt, objective, cfg.dropout,
                                   bf16=cfg.precision == "bf16")
            if graph.wanted(cfg.cuda_graphs, cfg.compile, device):
                epoch = graph.DeviceEpoch(
                    step, inputs.X, inputs.T, inputs.gens, batch_size=cfg.batch_size,
                    n_models=len(configs), maps=inputs.maps(), capture=device.type == "cuda",
                    steps_per_graph=cfg.steps_per_graph)
        self.loop = EpochLoop(self.state, inputs, objective, forward, step, epoch, threads)

    def results(self, timings: dict[str, Any], which: Sequence[int] | None = None
                ) -> list[TrainResult]:
        """Models ``which`` (default all), each with its best validation epoch's weights and
        its curves up to its own stop: the epoch its patience ran out, as trained alone."""
        inp, st = self.inputs, self.state
        v = inp.validator
        done = self.loop.done()
        out = []
        for j in range(len(st.configs)) if which is None else which:
            cfg = st.configs[j]
            end = st.epoch
            validation = {}
            n_triplets = len(inp.data[inp.data_of[j]].triplets)
            if v is not None:
                split = inp.validators[inp.data_of[j]].split
                if j in done:
                    end = int(v.best[j][1]) + cfg.patience
                validation = {"best_epoch": int(v.best[j][1]), "epochs_run": end,
                              "selection": cfg.selection,
                              "best_val_loss": float(v.history[int(v.best[j][1]) - 1][j][0]),
                              "val_loss": [h[j][0] for h in v.history[:end]],
                              "val_knn_f1": [h[j][1] for h in v.history[:end]],
                              **{name: [h[j][2 + i] if len(h[j]) > 2 + i else None
                                        for h in v.history[:end]]
                                 for i, name in enumerate(TRACK_COLUMNS)},
                              "fit_rows": len(split.fit_rows),
                              "validation_rows": len(split.validation_rows),
                              "fit_triplets": len(split.fit_triplets)}
            best = v.best_params[j] if v is not None and v.best_params else None
            stack, k = ([w.unsqueeze(0) for w in best], 0) if best else (st.params, j)
            out.append(TrainResult(
                model=unstack(stack, k, self.templates[j]),
                loss_curve=[row[j] for row in st.curve[:end]], config=cfg, timings=dict(timings),
                device=str(inp.device), n_triplets=n_triplets,
                loss_module=st.losses[j].cpu().eval(), validation=validation))
        return out


def _split(data: TrainData, cfg: TrainConfig, seed: int) -> ValidationSplit | None:
    if cfg.validation_size == 0:
        return None
    if data.labels is None:
        raise ConfigError("model selection (validation_size > 0) needs the row labels")
    aug = (np.zeros(data.labels.size, bool) if data.augmented is None
           else np.asarray(data.augmented, bool))
    return split_validation(data.labels, aug, data.triplets, cfg.validation_size, seed=seed)


def _prepare(datasets: Sequence[TrainData], configs: Sequence[TrainConfig],
             data_of: Sequence[int], split_seeds: Sequence[int]
             ) -> tuple[list[Prepared], list[int]]:
    """One prepared data set per (data set, split seed) its models use, and each model's
    position among them: a model's validation split is its own seed's, as trained alone
    (models of one seed share it, as an ensemble's members do)."""
    keys: list[tuple[int, int | None]] = []
    for j, d in enumerate(data_of):
        keys.append((d, split_seeds[j] if configs[j].validation_size else None))
    unique = list(dict.fromkeys(keys))
    prepared = []
    for d, seed in unique:
        data = datasets[d]
        split = _split(data, configs[keys.index((d, seed))], seed) if seed is not None else None
        prepared.append(Prepared(data.X, split.fit_triplets if split is not None else
                                 data.triplets, data.labels, data.augmented, data.facts,
                                 split))
    return prepared, [unique.index(k) for k in keys]


def _train_group(data: list[Prepared], configs: Sequence[TrainConfig], data_of: list[int],
                 checkpoint_dir: Path | None, resume: bool, on_epoch: EpochCallback | None,
                 retire: bool, t0: float) -> list[TrainResult]:
    group = _Stack(data, configs, data_of)
    ckpt = checkpoint_dir
    resumed = bool(resume and ckpt is not None and checkpoint.load(group.state, group.inputs,
                                                                   ckpt))
    setup_s = time.perf_counter() - t0
    desc = "train " + ",".join(dict.fromkeys(c.loss for c in configs))
    # without checkpoints, models that are done leave the stack once half of it is: one loss
    # whose validation loss keeps improving (MDR at the paper profile, docs/METHODS.md)
    # then trains alone instead of holding every model's compute
    retire = (retire and ckpt is None and group.inputs.validator is not None
              and configs[0].patience is not None)
    index = list(range(len(configs)))  # position in ``configs`` of each model in the stack
    out: dict[int, TrainResult] = {}
    while True:
        timings = group.loop.fit(checkpoint_dir=ckpt, on_epoch=on_epoch, desc=desc,
                                 retire=retire)
        epoch, stacked = group.state.epoch, group.state.configs
        timings.update(setup_s=round(setup_s, 3),
                       resumed_from_epoch=epoch - timings["epochs_run"] if resumed else None)
        done = group.loop.done()
        if not retire or len(done) in (0, len(stacked)) or epoch >= configs[0].epochs:
            out.update(zip(index, group.results(timings), strict=True))
            return [out[i] for i in range(len(configs))]
        keep = [j for j in range(len(stacked)) if j not in done]
        state = checkpoint.narrowed(group.state, group.inputs, keep)
        out.update(zip([index[j] for j in done], group.results(timings, done), strict=True))
        log.info("epoch %d: %s leave the stack; %s train on", epoch,
                 ", ".join(stacked[j].loss for j in done), ", ".join(stacked[j].loss for j in keep))
        index = [index[j] for j in keep]
        # a narrower stack is a new one (its step compiled and its graphs captured anew)
        data_of = group.inputs.data_of
        kept_data = list(dict.fromkeys(data_of[j] for j in keep))
        group = _Stack([group.inputs.data[d] for d in kept_data], [stacked[j] for j in keep],
                       [kept_data.index(data_of[j]) for j in keep])
        checkpoint.load_state(group.state, group.inputs, state)


def _substacks(configs: Sequence[TrainConfig]) -> list[list[int]]:
    """The stack as one, or where the device-resident epoch applies (:mod:`sphr.train.graph`)
    and it mixes pure and other losses: the pure losses' models (captured) apart from the
    others (eager), so that each model trains as it would alone."""
    everyone = list(range(len(configs)))
    cfg = configs[0]
    if not graph.wanted(cfg.cuda_graphs, cfg.compile, resolve_device(cfg.device)):
        return [everyone]
    pure = [bool(getattr(make_loss(c), "pure", False)) for c in configs]
    if all(pure) or not any(pure):
        return [everyone]
    return [[j for j in everyone if pure[j]], [j for j in everyone if not pure[j]]]


def _train_stack(datasets: Sequence[TrainData], configs: Sequence[TrainConfig],
                 data_of: Sequence[int], checkpoint_dir: Path | None, resume: bool,
                 on_epoch: EpochCallback | None, retire: bool,
                 split_seeds: Sequence[int] | None = None) -> list[TrainResult]:
    """Train models ``configs`` (model ``j`` on ``datasets[data_of[j]]``, its validation
    split drawn from ``split_seeds[j]``, default its own seed) as one stack."""
    t0 = time.perf_counter()
    seeds = [c.seed for c in configs] if split_seeds is None else list(split_seeds)
    prepared, data_of = _prepare(datasets, configs, data_of, seeds)
    parts = _substacks(configs)
    out: dict[int, TrainResult] = {}
    for p, members in enumerate(parts):
        ckpt = checkpoint_dir
        if ckpt is not None and len(parts) > 1:
            ckpt = ckpt.parent / f"{ckpt.name}_{p}"
        used = list(dict.fromkeys(data_of[j] for j in members))
        results = _train_group([prepared[d] for d in used], [configs[j] for j in members],
                               [used.index(data_of[j]) for j in members], ckpt, resume,
                               on_epoch, retire, t0)
        out.update(zip(members, results, strict=True))
    return [out[j] for j in range(len(configs))]


def train_sphr(X: np.ndarray, triplets: np.ndarray, config: TrainConfig | None = None, *,
               labels: np.ndarray | None = None, checkpoint_dir: str | Path | None = None,
               resume: bool = False, on_epoch: EpochCallback | None = None,
               augmented: np.ndarray | None = None, facts: RowFacts | None = None
               ) -> TrainResult:
    """Train one SPHR model on ``triplets`` (row indices into ``X``).

    ``labels`` (one class per row of ``X``) feed the pytorch-metric-learning
    losses. With ``checkpoint_dir`` a checkpoint is written every
    ``config.checkpoint_every`` epochs and at the end; ``resume=True`` continues
    from it and ends with the same weights as an uninterrupted run.
    ``on_epoch(epoch, [loss])`` is called after each epoch (and its checkpoint).
    With ``config.validation_size`` > 0, a share of the real rows (``augmented`` marks
    the others) is held out and the best validation epoch kept (:mod:`sphr.train.selection`);
    ``facts`` (ages, death follow-up per row) feed its per-epoch tracking
    (:mod:`sphr.train.tracking`). ``config.ensemble`` > 1 trains that many seeds as one
    :class:`~sphr.models.SPHREnsemble`.
    """
    config = config or TrainConfig()
    X, t, labels = _check_inputs(X, triplets, labels)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    data = TrainData(X, t, labels, augmented, facts)
    if config.ensemble > 1:
        return _train_ensemble(data, config, ckpt, resume, on_epoch)
    return _train_stack([data], [config], [0], ckpt, resume, on_epoch, retire=True)[0]


def _train_ensemble(data: TrainData, config: TrainConfig, ckpt: Path | None, resume: bool,
                    on_epoch: EpochCallback | None) -> TrainResult:
    """``config.ensemble`` members, one stack (they share the data and model selection's
    validation split, and differ in initialization and batch order), as one
    :class:`~sphr.models.SPHREnsemble`; curves and timings are member 0's, each member's
    chosen epoch is in ``validation["members"]``."""
    configs = [dataclasses.replace(config, ensemble=1, seed=member_seed(config.seed, m))
               for m in range(config.ensemble)]
    results = _train_stack([data], configs, [0] * len(configs), ckpt, resume, on_epoch,
                           retire=True, split_seeds=[config.seed] * len(configs))
    validation = dict(results[0].validation)
    if validation:
        validation["members"] = [
            {"seed": c.seed, **{k: r.validation.get(k) for k in
                                ("best_epoch", "epochs_run", "best_val_loss")}}
            for c, r in zip(configs, results, strict=True)]
    return dataclasses.replace(results[0], model=SPHREnsemble([r.model for r in results]),
                               config=config, validation=validation)


def train_many(X: np.ndarray, triplets: np.ndarray, configs: Sequence[TrainConfig], *,
               labels: np.ndarray | None = None, stack: bool = True,
               checkpoint_dir: str | Path | None = None, resume: bool = False,
               augmented: np.ndarray | None = None, retire: bool = True) -> list[TrainResult]:
    """Train one model per config on the same data; results in the order of ``configs``.

    ``retire``: with model selection and no checkpoints, models that are done leave the
    stack once half of it is, and the others train on without them (the same results).

    Configs that differ only in loss, loss parameters, margin, p or seed are
    trained as one stack (one batched forward/backward per step); the others
    in separate stacks. Each model ends as it would trained alone with
    :func:`train_sphr` (up to float rounding). ``stack=False`` trains one at a time.
    """
    X, t, labels = _check_inputs(X, triplets, labels)
    data = TrainData(X, t, labels, augmented)
    return _run_jobs([(data, c) for c in configs], stack, checkpoint_dir, resume, retire)


def train_jobs(jobs: Sequence[tuple[TrainData, TrainConfig]], *, stack: bool = True,
               checkpoint_dir: str | Path | None = None, resume: bool = False,
               retire: bool = True) -> list[TrainResult]:
    """Train one model per (data, config); results in the order of ``jobs``.

    As :func:`train_many`, on several data sets: jobs whose configs differ only in loss,
    loss parameters, margin, p or seed, and whose data have as many features and triplets
    (the two sexes of a cohort), train as one stack, each model on its own data set's rows,
    triplets and validation split (the same :class:`TrainData` object is one data set).
    Each model ends as it would trained alone (up to float rounding).
    """
    checked: dict[int, TrainData] = {}
    for data, _ in jobs:
        if id(data) not in checked:
            X, t, labels = _check_inputs(data.X, data.triplets, data.labels)
            checked[id(data)] = TrainData(X, t, labels, data.augmented, data.facts)
    return _run_jobs([(checked[id(data)], cfg) for data, cfg in jobs], stack, checkpoint_dir,
                     resume, retire)


def _run_jobs(jobs: Sequence[tuple[TrainData, TrainConfig]], stack: bool,
              checkpoint_dir: str | Path | None, resume: bool, retire: bool
              ) -> list[TrainResult]:
    """:func:`train_jobs` on checked data: one stack per group of stackable jobs."""
    groups: dict[Any, list[int]] = {}
    for i, (data, cfg) in enumerate(jobs):
        key = (_group_key(cfg), data.X.shape[1], len(data.triplets)) if stack else i
        groups.setdefault(key, []).append(i)
    out: list[TrainResult | None] = [None] * len(jobs)
    for g, idx in enumerate(groups.values()):
        ckpt = Path(checkpoint_dir) / f"group{g}" if checkpoint_dir is not None else None
        ids = list(dict.fromkeys(id(jobs[i][0]) for i in idx))
        data = {id(jobs[i][0]): jobs[i][0] for i in idx}
        results = _train_stack([data[x] for x in ids], [jobs[i][1] for i in idx],
                               [ids.index(id(jobs[i][0])) for i in idx], ckpt, resume, None,
                               retire)
        for i, res in zip(idx, results, strict=True):
            out[i] = res
    return [r for r in out if r is not None]
