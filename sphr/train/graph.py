"""The compiled step's whole epoch on the device, replayed as CUDA graphs.

On an H100 the fused step (:mod:`sphr.train.fused`) costs 2.4 ms a batch-256 step against a
0.2 ms matrix-product floor: the GPU waits on the host's kernel launches. Here everything a
step reads sits in a static device buffer (the epoch's permutation, a step counter, the
Adam state, the learning rate, the loss sum), the step gathers its batch by that counter
(:meth:`~sphr.train.fused.FusedStep.at`) and draws its dropout keys from each model's
generator on the device, so one captured CUDA graph serves every step of every epoch: an
epoch is ``randperm`` per seed, a few fills and one replay per ``steps_per_graph`` steps
(the last, shorter batch has a graph of its own). Each graph has its own memory pool.
Measured on an H200 (``benchmarks/gpu_check.sh``, docs/BENCHMARKS.md): 35 ms a batch-256
epoch of 391 steps against 346 ms for the same step uncaptured.

The keys are the same draws as the per-batch path's (a generator registered with a graph
advances by the graph's draws at each replay, as the eager calls would), so both paths
train on the same batches and masks. A step runs directly (warm-up: compilation, cuBLAS
handles) before its graph is captured; if a capture fails, that batch shape goes on with
direct calls, and the trainer's timings say why (``graph_failed``): the first error in the
capture, and any graph break of the compiled step (eager Python there may read the host).

:func:`read_host` moves everything an epoch reports (mean loss, validation) in one
device-to-host copy; :class:`EpochClock` times an epoch with CUDA events, without a sync.
On the CPU there is nothing to capture: :class:`DeviceEpoch` runs the same steps uncaptured
(``cuda_graphs="on"``; ``"auto"`` leaves the CPU on the per-batch path).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import torch

from sphr.train.fused import FusedStep, draw_keys

log = logging.getLogger(__name__)

#: direct calls of a batch shape before its graph is captured
WARMUP_STEPS = 2


def wanted(setting: str, compile: bool, device: torch.device) -> bool:
    """Does the device-resident epoch apply (it needs the compiled, fused step)?"""
    return compile and (setting == "on" or (setting == "auto" and device.type == "cuda"))


def capture_supported() -> bool:
    """CUDA graphs with generators of our own (torch registers them with a graph)."""
    return torch.cuda.is_available() and hasattr(torch.cuda.CUDAGraph, "register_generator_state")


class DeviceEpoch:
    """One epoch of :class:`FusedStep` steps over device buffers; CUDA graphs with ``capture``.

    ``T``: the triplets (n, 3), or (D, n, 3) for several data sets with ``maps[0]`` their
    streams (see :func:`sphr.train.fused.gather_rows`); ``gens``: one generator per seed.
    """

    def __init__(self, step: FusedStep, X: torch.Tensor, T: torch.Tensor,
                 gens: Sequence[torch.Generator], *, batch_size: int, n_models: int,
                 maps: tuple[Any, Any, Any] = (None, None, None), capture: bool = False,
                 steps_per_graph: int = 1) -> None:
        self.step, self.X, self.T, self.gens, self.maps = step, X, T, list(gens), maps
        self.bs, self.n = batch_size, T.shape[-2]
        self.steps_per_graph = steps_per_graph
        dev = X.device
        self.perm = torch.zeros((len(self.gens), self.n), dtype=torch.int64, device=dev)
        self.index = torch.zeros(1, dtype=torch.int64, device=dev)
        self.total = torch.zeros(n_models, dtype=torch.float32, device=dev)
        self.capture = capture and dev.type == "cuda"
        #: why capture failed, per batch size (that shape then runs directly)
        self.failed: dict[int, str] = {}
        self.graphs: dict[tuple[int, int], Any] = {}
        self._warm: dict[int, int] = {}
        self._state_ids: list[int] = []
        self.capture_s = 0.0

    @property
    def captured(self) -> bool:
        """True once a step runs as a graph replay."""
        return bool(self.graphs)

    def run(self, perms: torch.Tensor) -> torch.Tensor:
        """Train one epoch on ``perms`` (seeds, n); the (K,) mean batch loss, on the device."""
        self.perm.copy_(perms)
        self.index.zero_()
        self.total.zero_()
        self.step.sync_lr()
        ids = [id(t) for ts in self.step.adam_state() for t in ts]
        if ids != self._state_ids:  # Adam's state was replaced (a resume): graphs read the old
            self.graphs.clear()
            self._state_ids = ids
        full, tail = divmod(self.n, self.bs)
        self._steps(full, self.bs)
        if tail:
            self._steps(1, tail)
        return self.total / (full + (1 if tail else 0))

    def _body(self, b: int) -> None:
        keys = draw_keys(self.gens, self.X.device)
        self.step.at(self.X, self.T, self.perm, self.index, keys, self.total, b=b, bs=self.bs,
                     maps=self.maps)

    def _steps(self, count: int, b: int) -> None:
        # the full batch shape warms up twice (a recompilation on a second call stays out
        # of the capture); the last, shorter batch comes once an epoch and warms up once
        warmup = WARMUP_STEPS if b == self.bs else 1
        while count:
            if not self.capture or b in self.failed or self._warm.get(b, 0) < warmup:
                self._direct(b)
                count -= 1
                if self.capture and b != self.bs and self._warm.get(b, 0) >= warmup:
                    self._capture(b, 1)  # now, so the next epoch only replays it
                continue
            s = self.steps_per_graph if count >= self.steps_per_graph else 1
            graph = self.graphs.get((b, s))
            if graph is None:
                graph = self._capture(b, s)
            if graph is None:  # capture failed: this shape runs directly from here on
                continue
            graph.replay()
            count -= s

    def _direct(self, b: int) -> None:
        if not self.capture or b in self.failed:
            self._body(b)
            return
        # warm-up on a side stream, as torch's graph recipe has it: lazy initialisations
        # (compilation, cuBLAS workspaces) stay out of the graph's stream
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._body(b)
        torch.cuda.current_stream().wait_stream(side)
        self._warm[b] = self._warm.get(b, 0) + 1

    def _capture(self, b: int, s: int) -> Any:
        t0 = time.perf_counter()
        try:
            graph = torch.cuda.CUDAGraph()
            for g in self.gens:  # their draws in the graph advance them at each replay
                graph.register_generator_state(g)
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                for _ in range(s):
                    self._body(b)
        except Exception as err:  # any failure: this shape trains on without a graph
            self.failed[b] = capture_failure(err)
            log.warning("CUDA graph capture of the batch-%d step failed (%s); it runs "
                        "uncaptured from here on", b, self.failed[b])
            end_generator_capture(self.gens)
            return None
        self.graphs[(b, s)] = graph
        self.capture_s += time.perf_counter() - t0
        return graph


def capture_failure(err: BaseException) -> str:
    """Why a capture failed, in one line: the error, the one that invalidated the capture
    before it (a failed capture's own error only says "a previous error during capture"),
    and the compiled code's graph breaks (eager Python inside a step, where a host read
    breaks a capture)."""
    from torch._dynamo.utils import counters

    why = f"{type(err).__name__}: {err}".splitlines()[0]
    if err.__context__ is not None:
        first = err.__context__
        why += f"; first {type(first).__name__}: {str(first).splitlines()[0] if str(first) else ''}"
    breaks = dict(counters["graph_break"])
    if breaks:
        why += f"; graph breaks: {breaks}"
    return why


def end_generator_capture(gens: Sequence[torch.Generator]) -> None:
    """Take ``gens`` and torch's default CUDA generator out of capture mode after a capture
    that raised.

    torch closes a generator's capture when the capture ends cleanly; one that raised leaves
    it open, and its next draw outside a graph fails ("Offset increment outside graph capture
    encountered unexpectedly"): the direct steps meant to carry on, and every later use of the
    default generator in the process. An empty capture of the same generators ends cleanly
    and closes them; it draws nothing, so their streams continue where they were."""
    import warnings

    graph = torch.cuda.CUDAGraph()
    for g in gens:
        graph.register_generator_state(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the CUDA graph is empty": that is the point
        with torch.cuda.graph(graph):
            pass
    del graph


def read_host(tensors: Sequence[torch.Tensor], pack: bool | None = None) -> list[torch.Tensor]:
    """``tensors`` on the host, moved in one device-to-host copy: their bytes concatenated on
    the device, copied once, split and viewed back. CPU tensors are returned as they are
    (``pack=True`` packs them anyway, for tests)."""
    tensors = list(tensors)
    if pack is None:
        pack = any(t.device.type != "cpu" for t in tensors)
    if not tensors or not pack:
        return tensors
    flat = [t.detach().contiguous().reshape(-1).view(torch.uint8) for t in tensors]
    host = torch.cat(flat).cpu()
    out, start = [], 0
    for t, f in zip(tensors, flat, strict=True):
        # clone: a view's storage offset must be a multiple of its element size
        out.append(host[start:start + f.numel()].clone().view(t.dtype).reshape(t.shape))
        start += f.numel()
    return out


class EpochClock:
    """Seconds of an epoch's training: CUDA events on a CUDA device (read after the epoch's
    one host read, so timing adds no sync), the host clock on the CPU."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self._events: list[Any] = []
        self._t = 0.0

    def start(self) -> None:
        if self.cuda:
            self._events = [torch.cuda.Event(enable_timing=True)]
            self._events[0].record()
        else:
            self._t = time.perf_counter()

    def stop(self) -> None:
        if self.cuda:
            self._events.append(torch.cuda.Event(enable_timing=True))
            self._events[1].record()
        else:
            self._t = time.perf_counter() - self._t

    def seconds(self) -> float:
        if not self.cuda:
            return self._t
        self._events[1].synchronize()  # already passed: the epoch's host read waited for it
        return self._events[0].elapsed_time(self._events[1]) / 1000.0
