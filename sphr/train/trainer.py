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
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sphr.device import configure_threads, resolve_device
from sphr.errors import ConfigError, InputError
from sphr.losses import TripletObjective, build_loss, loss_parameters
from sphr.models import HIDDEN, SPHREnsemble, SPHRNet
from sphr.train import fused, graph
from sphr.train.config import TrainConfig
from sphr.train.selection import ValidationSplit, Validator, split_validation
from sphr.train.stacked import init_model, stack_params, stacked_forward, unstack
from sphr.train.tracking import TRACK_COLUMNS, RowFacts

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
#: settings that may differ between models trained as one stack
_PER_MODEL = ("loss", "loss_params", "margin", "p", "seed")
#: settings a resumed run may change without changing the result's meaning
_RESUMABLE = ("epochs", "checkpoint_every", "device", "threads", "compile", "cuda_graphs",
              "steps_per_graph")

EpochCallback = Callable[[int, list[float]], None]


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


@dataclass(frozen=True)
class TrainData:
    """One training set: features (rows), triplets (row indices into them) and, for the
    label-reading losses and model selection, each row's class and augmented flag."""

    X: np.ndarray
    triplets: np.ndarray
    labels: np.ndarray | None = None
    augmented: np.ndarray | None = None
    #: per row, what the per-epoch tracking reads beside the class (sphr.train.tracking)
    facts: RowFacts | None = None


@dataclass(frozen=True)
class _Prepared(TrainData):
    """A data set as a stack trains on it: ``triplets`` are its fitting triplets, beside its
    validation split."""

    split: ValidationSplit | None = None


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
        raise InputError("features hold NaN or inf", row=int(np.argwhere(~np.isfinite(X))[0, 0]) + 1)
    t = np.ascontiguousarray(triplets, dtype=np.int64)
    if t.ndim != 2 or t.shape[1] != 3 or len(t) == 0:
        raise InputError(f"triplets must be a non-empty (m, 3) index array, got {t.shape}")
    if t.min() < 0 or t.max() >= X.shape[0]:
        raise InputError(f"triplet indices must lie in [0, {X.shape[0]}), got {t.min()}..{t.max()}")
    if labels is not None:
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != (X.shape[0],):
            raise InputError(f"labels must have one entry per row ({X.shape[0]}), got {labels.shape}")
    return X, t, labels


def _group_key(cfg: TrainConfig) -> tuple[Any, ...]:
    d = dataclasses.asdict(cfg)
    return tuple((k, repr(v)) for k, v in sorted(d.items()) if k not in _PER_MODEL)


@contextlib.contextmanager
def _matmul_precision(device: torch.device, precision: str) -> Iterator[None]:
    if device.type != "cuda":
        yield
        return
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _epochs_bar(start: int, stop: int, desc: str) -> Any:
    try:
        from sphr.progress import progress
    except ImportError:  # tqdm is missing on a bare GPU box: no bar
        return None
    return progress(total=stop, initial=start, desc=desc, unit="epoch")


class _Group:
    """K models with the same optimizer settings, trained as one stack."""

    def __init__(self, data: Sequence[_Prepared], configs: Sequence[TrainConfig],
                 data_of: Sequence[int] | None = None) -> None:
        """Model ``j`` trains on ``data[data_of[j]]`` (default: every model on ``data[0]``);
        several data sets need one shape (as many features and triplets)."""
        self.configs = list(configs)
        cfg = self.configs[0]
        self.device = resolve_device(cfg.device)
        self.threads = configure_threads(cfg.threads) if self.device.type == "cpu" else None
        self.data = list(data)
        self.data_of = list(data_of) if data_of is not None else [0] * len(self.configs)
        self._load_data()
        self.losses = [make_loss(c).to(self.device).train() for c in self.configs]
        need_labels = any(loss.uses_labels for loss in self.losses)
        self.L = None
        if need_labels and all(d.labels is not None for d in data):
            self.L = torch.from_numpy(np.concatenate([d.labels for d in data])).to(self.device)
        self.templates = [init_model(self.X.shape[1], c.seed, c.out_dim, c.dropout)
                          for c in self.configs]
        self.params = stack_params(self.templates, self.device)
        extra = [p for loss in self.losses for p in loss.parameters()]
        # fused: one kernel for every parameter (CPU and CUDA), ~2x less optimizer time
        self.opt = torch.optim.Adam([*self.params, *extra], lr=cfg.lr, fused=True)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=cfg.lr_step,
                                                     gamma=cfg.lr_gamma)
        self._generators()
        self.epoch = 0
        self.curve: list[list[float]] = []
        self.forward = torch.compile(stacked_forward) if cfg.compile else stacked_forward
        # the whole step as one graph where every loss is a pure function (sphr.train.fused),
        # and on CUDA the whole epoch as graph replays (sphr.train.graph)
        self.fused = None
        self.graph: graph.DeviceEpoch | None = None
        if cfg.compile and fused.supports(self.losses):
            self.fused = fused.FusedStep(self.params, self.opt, self.losses, cfg.dropout,
                                         bf16=cfg.precision == "bf16")
            if graph.wanted(cfg.cuda_graphs, cfg.compile, self.device):
                self.graph = graph.DeviceEpoch(
                    self.fused, self.X, self.T, self.gens, batch_size=cfg.batch_size,
                    n_models=len(self.configs), maps=self._maps(),
                    capture=self.device.type == "cuda", steps_per_graph=cfg.steps_per_graph)
        self._validators()
        self._waiting = len(self.configs)  # models whose patience has not run out

    def _load_data(self) -> None:
        """Features and triplets on the device; several data sets: one feature matrix (each
        set's rows after the previous set's) and triplets (D, n, 3) indexing into it."""
        if len(self.data) == 1:
            self.X = torch.from_numpy(self.data[0].X).to(self.device)
            self.T = torch.from_numpy(self.data[0].triplets).to(self.device)
            self.row_starts = [0]
            return
        if len({len(d.triplets) for d in self.data}) != 1:
            raise ConfigError("data sets of one stack need as many triplets each")
        self.row_starts = np.cumsum([0] + [len(d.X) for d in self.data[:-1]]).tolist()
        self.X = torch.from_numpy(np.concatenate([d.X for d in self.data])).to(self.device)
        self.T = torch.from_numpy(np.stack([d.triplets + s for d, s in
                                            zip(self.data, self.row_starts, strict=True)]
                                           )).to(self.device)

    def _generators(self) -> None:
        """One generator per distinct seed: models sharing a seed share batches and masks
        (on other data sets, the same positions in their own triplets). A stream is a
        (data set, seed) pair: one batch of rows per stream."""
        dev = self.device
        self.seeds = list(dict.fromkeys(c.seed for c in self.configs))
        self._seed_pos = [self.seeds.index(c.seed) for c in self.configs]
        self.seed_of = torch.tensor(self._seed_pos, device=dev)
        self.gens = [torch.Generator(device=dev).manual_seed(int(s)) for s in self.seeds]
        self._seeds_in_order = [c.seed for c in self.configs] == self.seeds
        self.streams: tuple[torch.Tensor, torch.Tensor] | None = None
        self._stream_pos = self._seed_pos
        if len(self.data) > 1:
            pairs = list(dict.fromkeys(zip(self.data_of, self._seed_pos, strict=True)))
            self._stream_pos = [pairs.index(p) for p in zip(self.data_of, self._seed_pos,
                                                            strict=True)]
            self.streams = (torch.tensor([d for d, _ in pairs], device=dev),
                            torch.tensor([g for _, g in pairs], device=dev))
        self.stream_of = torch.tensor(self._stream_pos, device=dev)

    def _maps(self) -> tuple[Any, Any, Any]:
        """(streams, stream_of, seed_of) for :meth:`FusedStep.at`: None where a model's
        stream or seed is its own position (no copy)."""
        k = len(self.configs)
        seed_of = None if len(self.gens) == k and self._seeds_in_order else self.seed_of
        if self.streams is None:
            return None, seed_of, seed_of
        own = self._stream_pos == list(range(k))
        return self.streams, None if own else self.stream_of, seed_of

    def _validators(self) -> None:
        """One validator per data set; the first keeps every model's record (history, best
        epoch and weights)."""
        cfg = self.configs[0]
        self.validators: list[Validator] = []
        for d, s in zip(self.data, self.row_starts, strict=True):
            if d.split is not None:
                rows = self.X[s:s + len(d.X)]  # a view: this data set's rows
                self.validators.append(Validator(rows, d.labels, d.augmented, d.split,
                                                 cfg.patience, cfg.batch_size,
                                                 selection=cfg.selection, facts=d.facts))
        self.validator = self.validators[0] if self.validators else None
        self._members = [[j for j, x in enumerate(self.data_of) if x == d]
                         for d in range(len(self.validators))]
        self._member_index = [torch.tensor(m, device=self.device) for m in self._members]

    # ------------------------------------------------------------ checkpoints
    def state(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "configs": [c.to_dict() for c in self.configs],
                "params": [p.detach().cpu() for p in self.params],
                "optimizer": self.opt.state_dict(), "scheduler": self.sched.state_dict(),
                "generators": [g.get_state() for g in self.gens],
                "losses": [loss.state_dict() for loss in self.losses], "curve": self.curve,
                "validation": self.validator.state() if self.validator else None}

    def save(self, directory: Path) -> None:
        from sphr.io import write_bytes

        buf = io.BytesIO()
        torch.save(self.state(), buf)
        write_bytes(buf.getvalue(), directory / CHECKPOINT)

    def load(self, directory: Path) -> bool:
        path = directory / CHECKPOINT
        if not path.exists():
            return False
        self.load_state(torch.load(path, map_location=self.device, weights_only=True), path)
        log.info("resumed from %s at epoch %d", path, self.epoch)
        return True

    def load_state(self, state: dict[str, Any], path: Path | str = "state") -> None:
        """Continue from :meth:`state` (a checkpoint, or a stack narrowed by :meth:`narrowed`)."""
        saved = [TrainConfig.from_dict(d) for d in state["configs"]]
        for old, new in zip(saved, self.configs, strict=False):
            diff = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in _RESUMABLE
                    and getattr(old, f.name) != getattr(new, f.name)]
            if diff:
                raise ConfigError(f"{path}: checkpoint was made with other settings ({diff}); "
                                  "remove it or train without resume")
        if len(saved) != len(self.configs):
            raise ConfigError(f"{path}: checkpoint holds {len(saved)} models, not {len(self.configs)}")
        with torch.no_grad():
            for p, q in zip(self.params, state["params"], strict=True):
                p.copy_(q)
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        for g, s in zip(self.gens, state["generators"], strict=True):
            g.set_state(s.cpu())
        for loss, s in zip(self.losses, state["losses"], strict=True):
            loss.load_state_dict(s)
        self.epoch, self.curve = int(state["epoch"]), [list(x) for x in state["curve"]]
        if self.validator is not None and state.get("validation"):
            self.validator.load(state["validation"], self.device)

    def narrowed(self, keep: Sequence[int]) -> dict[str, Any]:
        """:meth:`state` of models ``keep`` alone. Exact: the models share no parameter,
        Adam is element-wise, and batches and dropout masks come from one generator per
        seed, so a model continues as it would have in the whole stack."""
        state = self.state()
        n_stacked = len(state["params"])
        sizes = [len(list(loss.parameters())) for loss in self.losses]
        starts = np.cumsum([n_stacked, *sizes[:-1]]).tolist()
        old_index = list(range(n_stacked)) + [starts[j] + i for j in keep for i in range(sizes[j])]
        opt = state["optimizer"]
        k = torch.as_tensor(list(keep))
        new_state = {}
        for new, old in enumerate(old_index):
            if old in opt["state"]:
                new_state[new] = {name: (v[k.to(v.device)] if new < n_stacked and v.dim() > 0
                                         else v) for name, v in opt["state"][old].items()}
        groups = [{**opt["param_groups"][0], "params": list(range(len(old_index)))}]
        kept_seeds = list(dict.fromkeys(self.configs[j].seed for j in keep))
        v = state["validation"]
        return {**state, "configs": [state["configs"][j] for j in keep],
                "params": [p[k] for p in state["params"]],
                "optimizer": {"state": new_state, "param_groups": groups},
                "generators": [state["generators"][self.seeds.index(s)] for s in kept_seeds],
                "losses": [state["losses"][j] for j in keep],
                "curve": [[row[j] for j in keep] for row in state["curve"]],
                "validation": v and {"history": [[row[j] for j in keep] for row in v["history"]],
                                     "best": [v["best"][j] for j in keep],
                                     "best_params": [v["best_params"][j] for j in keep]}}

    def done(self) -> list[int]:
        """Models whose patience has run out (their kept weights are final)."""
        v, patience = self.validator, self.configs[0].patience
        if v is None or patience is None or not v.best:
            return []
        return [j for j, (_, e) in enumerate(v.best) if self.epoch - e >= patience]

    # ------------------------------------------------------------ one epoch
    def _masks(self, m: int) -> list[torch.Tensor] | None:
        """Scaled dropout masks for both hidden layers, one draw per seed.

        16 random bits per unit: one int64 draw covers four units, ~3.6x faster
        than ``torch.rand`` on the CPU (``bernoulli_`` is slower still). The keep
        probability is round(keep * 2^16) / 2^16, within 1e-5 of ``1 - dropout``.
        Masks are drawn before the forward pass, in a fixed order per generator.
        """
        cfg = self.configs[0]
        if cfg.dropout == 0:
            return None
        kept = round((1.0 - cfg.dropout) * 65536)
        # fp32 even under bf16: 65536 / kept = 1.1111 is 1.109375 in bf16, a 0.16% bias
        # on every kept activation; the product is cast back by the next matmul's autocast
        dtype = torch.float32
        masks = []
        for width in HIDDEN:
            bits = torch.stack([
                torch.randint(-2**63, 2**63 - 1, (m, width // 4), generator=g,
                              device=self.device, dtype=torch.int64).view(torch.int16)
                for g in self.gens])
            mask = (bits < kept - 32768).to(dtype).mul_(65536 / kept)
            masks.append(self._per_model(mask))
        return masks

    def _per_model(self, t: torch.Tensor) -> torch.Tensor:
        """Per-seed rows (seeds, ...) -> per-model (K, ...); no copy when there is one of each."""
        if t.shape[0] == len(self.configs):
            return t if len(self.gens) == len(self.configs) and self._seeds_in_order else t[self.seed_of]
        return t[self.seed_of]

    def _rows_per_model(self, t: torch.Tensor) -> torch.Tensor:
        """Per-stream rows (streams, ...) -> per-model (K, ...)."""
        if self.streams is None:
            return self._per_model(t)
        return t if self._stream_pos == list(range(len(self.configs))) else t[self.stream_of]

    def _sched_step(self) -> None:
        with warnings.catch_warnings():
            # the fused step updates through torch's functional adam, not Adam.step, which
            # is what the scheduler looks for before it warns of a wrong call order
            warnings.filterwarnings("ignore", re.escape("Detected call of `lr_scheduler.step()`"))
            self.sched.step()

    def run_epoch(self) -> torch.Tensor:
        """Train one epoch; each model's mean batch loss (K,), on the device."""
        cfg = self.configs[0]
        n, bs, k = self.T.shape[-2], cfg.batch_size, len(self.configs)
        perms = torch.stack([torch.randperm(n, generator=g, device=self.device) for g in self.gens])
        if self.graph is not None:
            total = self.graph.run(perms)
            self._sched_step()
            return total
        total = torch.zeros(k, device=self.device)
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16,
                                  enabled=cfg.precision == "bf16")
        n_batches = 0
        for start in range(0, n, bs):
            rows = fused.gather_rows(self.T, perms[:, start:start + bs], self.streams)
            b = rows.shape[1] // 3  # (streams, 3b): a..., p..., n...
            if self.fused is not None:
                keys = fused.draw_keys(self.gens, self.device)
                total += self.fused(self.X, self._rows_per_model(rows), self._per_model(keys))
                n_batches += 1
                continue
            # draw masks before the forward pass: the generator order is fixed
            masks = self._masks(3 * b)
            x = self._rows_per_model(self.X[rows])
            with autocast:
                z = self.forward(self.params, x, masks)
            z = z.float()
            lab = self.L[rows] if self.L is not None else None
            values = []
            for j, loss in enumerate(self.losses):
                s = self._stream_pos[j]
                labels = None
                if lab is not None and loss.uses_labels:
                    labels = (lab[s, :b], lab[s, b:2 * b], lab[s, 2 * b:])
                values.append(loss(z[j, :b], z[j, b:2 * b], z[j, 2 * b:], labels))
            v = torch.stack(values)
            self.opt.zero_grad(set_to_none=True)
            v.sum().backward()  # models share no parameters: each gets its own gradient
            self.opt.step()
            total += v.detach()
            n_batches += 1
        self._sched_step()
        return total / n_batches

    def _validate(self) -> list[list[torch.Tensor]]:
        """Each data set's validation pass (:meth:`Validator.compute`), on the device."""
        if len(self.validators) == 1:
            return [self.validator.compute(self.params, self.losses, stacked_forward)]
        out = []
        for v, members, index in zip(self.validators, self._members, self._member_index,
                                     strict=True):
            params = [p.detach().index_select(0, index) for p in self.params]
            out.append(v.compute(params, [self.losses[j] for j in members], stacked_forward))
        return out

    def _epoch(self) -> tuple[list[float], list[tuple[float, float]] | None, float]:
        """One epoch: (mean loss per model, (validation loss, kNN F1) per model or None,
        training seconds). Loss and validation reach the host in one copy."""
        clock = graph.EpochClock(self.device)
        clock.start()
        loss = self.run_epoch()
        clock.stop()
        parts = self._validate() if self.validator is not None else []
        host = graph.read_host([loss, *(t for ps in parts for t in ps)])  # the one host read
        values = host[0].tolist()
        if not parts:
            return values, None, clock.seconds()
        validation: list[Any] = [None] * len(self.configs)
        rest = iter(host[1:])
        for v, members, ps in zip(self.validators, self._members, parts, strict=True):
            for j, value in zip(members, v.finish([next(rest) for _ in ps]), strict=True):
                validation[j] = value
        return values, validation, clock.seconds()

    def _log_waiting(self) -> None:
        """In a stack, say when a model's patience runs out and which ones training waits on
        (one loss whose validation loss keeps improving holds every model's compute)."""
        if len(self.configs) == 1:
            return
        done = self.done()
        waiting = [c.loss for j, c in enumerate(self.configs) if j not in done]
        if len(waiting) < self._waiting and waiting:
            log.info("epoch %d: %d of %d models done (best epochs %s); training on for %s",
                     self.epoch, len(done), len(self.configs),
                     [e for _, e in self.validator.best], ", ".join(waiting))
        self._waiting = len(waiting)

    def fit(self, *, checkpoint_dir: Path | None, on_epoch: EpochCallback | None,
            desc: str, retire: bool = False) -> dict[str, Any]:
        """Train until every model stops (or ``cfg.epochs``). ``retire``: return as soon as
        half the stack or more is done, so the caller can go on with the others alone."""
        cfg = self.configs[0]
        bar = _epochs_bar(self.epoch, cfg.epochs, desc)
        t0 = time.perf_counter()
        first = self.epoch
        epoch_s: list[float] = []
        stop = False
        with _matmul_precision(self.device, cfg.precision):
            while self.epoch < cfg.epochs and not stop:
                values, validation, seconds = self._epoch()
                epoch_s.append(seconds)
                self.epoch += 1
                self.curve.append(values)
                if self.validator is not None:
                    stop = self.validator.update(self.epoch, self.params, validation)
                    self._log_waiting()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=" ".join(f"{x:.4g}" for x in values[:4]))
                last = self.epoch == cfg.epochs or stop
                every = cfg.checkpoint_every
                if checkpoint_dir is not None and (last or (every and self.epoch % every == 0)):
                    self.save(checkpoint_dir)
                if on_epoch is not None:
                    on_epoch(self.epoch, values)
                if retire and not stop and 2 * len(self.done()) >= len(self.configs):
                    break
        if bar is not None:
            bar.close()
        if self.validator is not None and stop:
            log.info("early stop at epoch %d: no better validation loss for %d epochs",
                     self.epoch, cfg.patience)
        train_s = time.perf_counter() - t0
        return {"train_s": round(train_s, 3), "epochs_run": self.epoch - first,
                "s_per_epoch": round(train_s / max(1, self.epoch - first), 4),
                "first_epoch_s": round(epoch_s[0], 4) if epoch_s else None,
                # training alone, per epoch (model selection's validation pass excluded)
                "epoch_s": [round(x, 4) for x in epoch_s],
                "fused_step": self.fused is not None, **self._graph_timings(),
                "models_in_stack": len(self.configs), "threads": self.threads}

    def _graph_timings(self) -> dict[str, Any]:
        g = self.graph
        return {"device_epoch": g is not None, "cuda_graphs": g is not None and g.captured,
                "steps_per_graph": g.steps_per_graph if g is not None else None,
                "graph_capture_s": round(g.capture_s, 3) if g is not None else None,
                "graph_failed": next(iter(g.failed.values())) if g is not None and g.failed
                else None}

    def results(self, timings: dict[str, Any], which: Sequence[int] | None = None
                ) -> list[TrainResult]:
        """Models ``which`` (default all), each with its best validation epoch's weights and
        its curves up to its own stop: the epoch its patience ran out, as trained alone."""
        v = self.validator
        done = self.done()
        out = []
        for j in range(len(self.configs)) if which is None else which:
            cfg = self.configs[j]
            end = self.epoch
            validation = {}
            n_triplets = len(self.data[self.data_of[j]].triplets)
            if v is not None:
                split = self.validators[self.data_of[j]].split
                if j in done:
                    end = int(v.best[j][1]) + cfg.patience
                best_epoch = int(v.best[j][1])
                validation = {"best_epoch": best_epoch, "epochs_run": end,
                              "selection": cfg.selection,
                              "best_val_loss": float(v.history[best_epoch - 1][j][0]),
                              "val_loss": [h[j][0] for h in v.history[:end]],
                              "val_knn_f1": [h[j][1] for h in v.history[:end]],
                              **{name: [h[j][2 + i] if len(h[j]) > 2 + i else float("nan")
                                        for h in v.history[:end]]
                                 for i, name in enumerate(TRACK_COLUMNS)},
                              "fit_rows": len(split.fit_rows),
                              "validation_rows": len(split.validation_rows),
                              "fit_triplets": len(split.fit_triplets)}
            best = v.best_params[j] if v is not None and v.best_params else None
            stack, k = ([w.unsqueeze(0) for w in best], 0) if best else (self.params, j)
            out.append(TrainResult(
                model=unstack(stack, k, self.templates[j]),
                loss_curve=[row[j] for row in self.curve[:end]], config=cfg, timings=dict(timings),
                device=str(self.device), n_triplets=n_triplets,
                loss_module=self.losses[j].cpu().eval(), validation=validation))
        return out


def _split(triplets: np.ndarray, labels: np.ndarray | None, augmented: np.ndarray | None,
           cfg: TrainConfig) -> ValidationSplit | None:
    if cfg.validation_size == 0:
        return None
    if labels is None:
        raise ConfigError("model selection (validation_size > 0) needs the row labels")
    aug = np.zeros(labels.size, bool) if augmented is None else np.asarray(augmented, bool)
    return split_validation(labels, aug, triplets, cfg.validation_size, seed=cfg.seed)


def _train_group(data: list[_Prepared], configs: Sequence[TrainConfig], data_of: list[int],
                 checkpoint_dir: Path | None, resume: bool, on_epoch: EpochCallback | None,
                 retire: bool, t0: float) -> list[TrainResult]:
    group = _Group(data, configs, data_of)
    ckpt = checkpoint_dir
    resumed = bool(resume and ckpt is not None and group.load(ckpt))
    setup_s = time.perf_counter() - t0
    desc = "train " + ",".join(dict.fromkeys(c.loss for c in configs))
    # without checkpoints, models that are done leave the stack once half of it is: one loss
    # whose validation loss keeps improving (MDR at the paper profile, docs/METHODS.md)
    # then trains alone instead of holding every model's compute
    retire = (retire and ckpt is None and group.validator is not None
              and configs[0].patience is not None)
    index = list(range(len(configs)))  # position in ``configs`` of each model in the stack
    out: dict[int, TrainResult] = {}
    while True:
        timings = group.fit(checkpoint_dir=ckpt, on_epoch=on_epoch, desc=desc, retire=retire)
        timings.update(setup_s=round(setup_s, 3),
                       resumed_from_epoch=group.epoch - timings["epochs_run"] if resumed else None)
        done = group.done()
        if not retire or len(done) in (0, len(group.configs)) or group.epoch >= configs[0].epochs:
            out.update(zip(index, group.results(timings), strict=True))
            return [out[i] for i in range(len(configs))]
        keep = [j for j in range(len(group.configs)) if j not in done]
        state = group.narrowed(keep)
        out.update(zip([index[j] for j in done], group.results(timings, done), strict=True))
        log.info("epoch %d: %s leave the stack; %s train on", group.epoch,
                 ", ".join(group.configs[j].loss for j in done),
                 ", ".join(group.configs[j].loss for j in keep))
        index = [index[j] for j in keep]
        # a narrower stack is a new one (its step compiled and its graphs captured anew)
        kept_data = list(dict.fromkeys(group.data_of[j] for j in keep))
        group = _Group([group.data[d] for d in kept_data], [group.configs[j] for j in keep],
                          [kept_data.index(group.data_of[j]) for j in keep])
        group.load_state(state)


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
                 on_epoch: EpochCallback | None, retire: bool) -> list[TrainResult]:
    """Train models ``configs`` (model ``j`` on ``datasets[data_of[j]]``) as one stack."""
    t0 = time.perf_counter()
    prepared = []
    for d, data in enumerate(datasets):
        # the models of a stack share each data set's split: the first of its configs seeds it
        split = _split(data.triplets, data.labels, data.augmented, configs[list(data_of).index(d)])
        prepared.append(_Prepared(data.X, split.fit_triplets if split is not None else
                                  data.triplets, data.labels, data.augmented, data.facts,
                                  split))
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
    (:mod:`sphr.train.tracking`).
    """
    config = config or TrainConfig()
    X, t, labels = _check_inputs(X, triplets, labels)
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    data = TrainData(X, t, labels, augmented, facts)
    if config.ensemble > 1:
        return _train_ensemble(data, config, ckpt, resume, on_epoch)
    return _train_stack([data], [config], [0], ckpt, resume, on_epoch, retire=True)[0]


def member_seed(seed: int, member: int) -> int:
    """The seed of ensemble member ``member``: ``seed`` itself for member 0 (so member 0 is the
    model trained alone), else the first 31-bit word of ``SeedSequence([seed, member])``."""
    if member == 0:
        return seed
    return int(np.random.SeedSequence([seed, member]).generate_state(1)[0] % 2**31)


def _train_ensemble(data: TrainData, config: TrainConfig, ckpt: Path | None, resume: bool,
                    on_epoch: EpochCallback | None) -> TrainResult:
    """``config.ensemble`` members, one stack (they share the data and model selection's
    validation split, and differ in initialization and batch order), as one
    :class:`~sphr.models.SPHREnsemble`; curves and timings are member 0's, each member's
    chosen epoch is in ``validation["members"]``."""
    configs = [dataclasses.replace(config, ensemble=1, seed=member_seed(config.seed, m))
               for m in range(config.ensemble)]
    results = _train_stack([data], configs, [0] * len(configs), ckpt, resume, on_epoch,
                           retire=True)
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
