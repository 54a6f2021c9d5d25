"""The epochs of a training stack: one epoch's steps, its validation pass, and the loop.

An epoch draws one permutation of the triplets per generator and takes the batches in
order (eager, as one fused step per batch, or as CUDA graph replays, :mod:`sphr.train.graph`);
its losses and the validation pass reach the host in one copy. :meth:`EpochLoop.fit` runs
epochs until every model stops, writes checkpoints and calls ``on_epoch`` after each.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from sphr.losses.objective import BatchObjective
from sphr.train import fused, graph
from sphr.train.checkpoint import StackState, save
from sphr.train.stack_data import StackInputs
from sphr.train.stacked import stacked_forward

log = logging.getLogger(__name__)

#: ``on_epoch(epoch, losses)``: called after each epoch (and its checkpoint) with the 1-based
#: epoch number and each model's mean training loss of that epoch
EpochCallback = Callable[[int, list[float]], None]


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



class EpochLoop:
    """Epochs and validation of a stack: its state (:class:`~sphr.train.checkpoint.StackState`,
    which the epochs advance), its inputs (:class:`~sphr.train.stack_data.StackInputs`), what
    it minimizes (``objective``) and how a step runs (``forward``, or the compiled ``fused``
    step, or on a device the ``graph`` epoch)."""

    def __init__(self, state: StackState, inputs: StackInputs, objective: BatchObjective,
                 forward: Callable[..., torch.Tensor], fused: fused.FusedStep | None = None,
                 graph: graph.DeviceEpoch | None = None, threads: int | None = None) -> None:
        self.state, self.inputs, self.objective = state, inputs, objective
        self.forward, self.fused, self.graph, self.threads = forward, fused, graph, threads
        self._waiting = len(state.configs)  # models whose patience has not run out

    def _sched_step(self) -> None:
        with warnings.catch_warnings():
            # the fused step updates through torch's functional adam, not Adam.step, which
            # is what the scheduler looks for before it warns of a wrong call order
            warnings.filterwarnings("ignore", re.escape("Detected call of `lr_scheduler.step()`"))
            self.state.sched.step()

    def run_epoch(self) -> torch.Tensor:
        """Train one epoch; each model's mean batch loss (K,), on the device."""
        inp, st = self.inputs, self.state
        cfg = st.configs[0]
        n, bs, k = inp.T.shape[-2], cfg.batch_size, len(st.configs)
        perms = torch.stack([torch.randperm(n, generator=g, device=inp.device) for g in inp.gens])
        if self.graph is not None:
            total = self.graph.run(perms)
            self._sched_step()
            return total
        total = torch.zeros(k, device=inp.device)
        autocast = torch.autocast(inp.device.type, dtype=torch.bfloat16,
                                  enabled=cfg.precision == "bf16")
        n_batches = 0
        for start in range(0, n, bs):
            rows = fused.gather_rows(inp.T, perms[:, start:start + bs], inp.streams)
            b = rows.shape[1] // 3  # (streams, 3b): a..., p..., n...
            if self.fused is not None:
                keys = fused.draw_keys(inp.gens, inp.device)
                total += self.fused(inp.X, inp.rows_per_model(rows), inp.per_model(keys))
                n_batches += 1
                continue
            # draw masks before the forward pass: the generator order is fixed
            masks = inp.masks(3 * b)
            x = inp.rows_per_model(inp.X[rows])
            with autocast:
                z = self.forward(st.params, x, masks)
            lab = inp.rows_per_model(inp.L[rows]) if inp.L is not None else None
            v = self.objective(z.float(), x, lab)
            st.opt.zero_grad(set_to_none=True)
            v.sum().backward()  # models share no parameters: each gets its own gradient
            st.opt.step()
            total += v.detach()
            n_batches += 1
        self._sched_step()
        return total / n_batches

    def _validate(self) -> list[list[torch.Tensor]]:
        """Each data set's validation pass (:meth:`Validator.compute`), on the device."""
        inp = self.inputs
        if len(inp.validators) == 1:
            return [inp.validators[0].compute(self.state.params, self.objective, stacked_forward)]
        out = []
        for v, members, index in zip(inp.validators, inp.members, inp.member_index,
                                     strict=True):
            params = [p.detach().index_select(0, index) for p in self.state.params]
            out.append(v.compute(params, self.objective.subset(members), stacked_forward))
        return out

    def _epoch(self) -> tuple[list[float], list[tuple[float, float]] | None, float]:
        """One epoch: (mean loss per model, (validation loss, kNN F1) per model or None,
        training seconds). Loss and validation reach the host in one copy."""
        clock = graph.EpochClock(self.inputs.device)
        clock.start()
        loss = self.run_epoch()
        clock.stop()
        parts = self._validate() if self.inputs.validator is not None else []
        host = graph.read_host([loss, *(t for ps in parts for t in ps)])  # the one host read
        values = host[0].tolist()
        if not parts:
            return values, None, clock.seconds()
        validation: list[Any] = [None] * len(self.state.configs)
        rest = iter(host[1:])
        for v, members, ps in zip(self.inputs.validators, self.inputs.members, parts,
                                  strict=True):
            for j, value in zip(members, v.finish([next(rest) for _ in ps]), strict=True):
                validation[j] = value
        return values, validation, clock.seconds()

    def done(self) -> list[int]:
        """Models whose patience has run out (their kept weights are final)."""
        v, patience = self.inputs.validator, self.state.configs[0].patience
        if v is None or patience is None or not v.best:
            return []
        return [j for j, (_, e) in enumerate(v.best) if self.state.epoch - e >= patience]

    def _log_waiting(self) -> None:
        """In a stack, say when a model's patience runs out and which ones training waits on
        (one loss whose validation loss keeps improving holds every model's compute)."""
        if len(self.state.configs) == 1:
            return
        done = self.done()
        waiting = [c.loss for j, c in enumerate(self.state.configs) if j not in done]
        if len(waiting) < self._waiting and waiting:
            log.info("epoch %d: %d of %d models done (best epochs %s); training on for %s",
                     self.state.epoch, len(done), len(self.state.configs),
                     [e for _, e in self.inputs.validator.best], ", ".join(waiting))
        self._waiting = len(waiting)

    def fit(self, *, checkpoint_dir: Path | None, on_epoch: EpochCallback | None,
            desc: str, retire: bool = False) -> dict[str, Any]:
        """Train until every model stops (or ``cfg.epochs``). ``retire``: return as soon as
        half the stack or more is done, so the caller can go on with the others alone."""
        cfg = self.state.configs[0]
        bar = _epochs_bar(self.state.epoch, cfg.epochs, desc)
        t0 = time.perf_counter()
        first = self.state.epoch
        epoch_s: list[float] = []
        # resumed from the checkpoint of a fit that had stopped: nothing is left to train
        stop = self.inputs.validator is not None and self.state.epoch > 0 and \
            len(self.done()) == len(self.state.configs)
        with _matmul_precision(self.inputs.device, cfg.precision):
            while self.state.epoch < cfg.epochs and not stop:
                values, validation, seconds = self._epoch()
                epoch_s.append(seconds)
                self.state.epoch += 1
                self.state.curve.append(values)
                if self.inputs.validator is not None:
                    stop = self.inputs.validator.update(self.state.epoch, self.state.params,
                                                        validation)
                    self._log_waiting()
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(loss=" ".join(f"{x:.4g}" for x in values[:4]))
                last = self.state.epoch == cfg.epochs or stop
                every = cfg.checkpoint_every
                if checkpoint_dir is not None and (last or (every and
                                                            self.state.epoch % every == 0)):
                    save(self.state, self.inputs, checkpoint_dir)
                if on_epoch is not None:
                    on_epoch(self.state.epoch, values)
                if retire and not stop and 2 * len(self.done()) >= len(self.state.configs):
                    break
        if bar is not None:
            bar.close()
        if self.inputs.validator is not None and stop:
            log.info("early stop at epoch %d: no better validation loss for %d epochs",
                     self.state.epoch, cfg.patience)
        train_s = time.perf_counter() - t0
        return {"train_s": round(train_s, 3), "epochs_run": self.state.epoch - first,
                "s_per_epoch": round(train_s / max(1, self.state.epoch - first), 4),
                "first_epoch_s": round(epoch_s[0], 4) if epoch_s else None,
                # training alone, per epoch (model selection's validation pass excluded)
                "epoch_s": [round(x, 4) for x in epoch_s],
                "fused_step": self.fused is not None, **self._graph_timings(),
                "models_in_stack": len(self.state.configs), "threads": self.threads}

    def _graph_timings(self) -> dict[str, Any]:
        g = self.graph
        return {"device_epoch": g is not None, "cuda_graphs": g is not None and g.captured,
                "steps_per_graph": g.steps_per_graph if g is not None else None,
                "graph_capture_s": round(g.capture_s, 3) if g is not None else None,
                "graph_failed": next(iter(g.failed.values())) if g is not None and g.failed
                else None}

