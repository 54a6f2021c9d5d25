"""The compiled fast path: one training step (gather, dropout, forward, loss, gradients, Adam)
as one graph.

With ``compile=True`` the eager step (autograd's ``backward`` then ``Adam.step``) leaves a
third of a batch-256 step to Python and dispatch: measured on a 2-core AMX CPU at bf16,
1.42 s per 100,000-triplet epoch with the forward compiled alone, 0.81 s with the whole
step in one graph (``torch.func.grad_and_value`` for the gradients, torch's own
functional ``adam`` for the update, on the optimizer's own state, so checkpoints and
resumes are shared with the eager path).

Dropout masks here come from a counter-based hash (:func:`hashed_masks`) keyed by one
draw per step from each model's generator, not from the generator's bits: inductor fuses
the hash into the forward kernel, while drawing the bits costs 0.5 ms a step (a third of
the compiled step). Same seed, same masks; models sharing a seed share them, as in the
eager path. Both paths keep each unit with probability ``round(keep * 2^16) / 2^16``.

:meth:`FusedStep.at` is the same step reading its batch from device buffers (the epoch's
permutation, a step counter) and adding its loss to a device sum: what
:mod:`sphr.train.graph` captures as CUDA graphs.

Only losses marked ``pure`` (tensor functions of the three embeddings, no labels,
parameters, running statistics or host reads: Triplet, Distance Swap, NPLB) take this path;
the others compile the forward pass alone (:mod:`sphr.train.epochs`).
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any

import torch
from torch.optim.adam import adam

from sphr.losses.objective import BatchObjective
from sphr.models import HIDDEN
from sphr.train.stacked import stacked_forward

#: largest seed key drawn per step (keys are int32)
_KEY_MAX = 2**31 - 1


def supports(losses: Sequence[torch.nn.Module]) -> bool:
    """True when every loss is a pure tensor function of (anchor, positive, negative)."""
    return all(getattr(loss, "pure", False) for loss in losses)


def _mix32(h: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer finalizer (xor-shift-multiply, constant 0x45d9f3b). int32 products
    wrap; the shifts are logical (masked), so eager and compiled code give the same bits."""
    h = h ^ ((h >> 16) & 0xFFFF)
    h = h * 0x45D9F3B
    h = h ^ ((h >> 16) & 0xFFFF)
    h = h * 0x45D9F3B
    return h ^ ((h >> 16) & 0xFFFF)


def hashed_masks(keys: torch.Tensor, m: int, kept: int) -> list[torch.Tensor]:
    """Scaled dropout masks (K, m, width) of both hidden layers from int32 ``keys`` (K,).

    Unit ``i`` of layer ``l`` is kept when the low 16 bits of
    ``mix(i + mix(2 * key + l))`` fall below ``kept``.
    """
    out = []
    for layer, width in enumerate(HIDDEN):
        salt = _mix32(keys.to(torch.int32) * 2 + layer).reshape(-1, 1, 1)
        idx = torch.arange(m * width, dtype=torch.int32, device=keys.device).reshape(1, m, width)
        u = _mix32(idx + salt) & 0xFFFF
        out.append((u < kept).to(torch.float32) * (65536 / kept))
    return out


def gather_rows(T: torch.Tensor, perm: torch.Tensor,
                streams: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
    """A batch's rows (S, 3b), each stream's a..., p..., n... rows into the feature matrix.

    ``T``: the triplets (n, 3) of one data set, whose streams are the seeds; ``perm`` (seeds,
    b) the batch's positions in each seed's permutation. Several data sets: ``T`` (D, n, 3)
    and ``streams`` = (data set, seed) of each stream, as device index tensors.
    """
    tri = T[perm] if streams is None else T[streams[0].unsqueeze(1), perm[streams[1]]]
    return tri.transpose(1, 2).reshape(tri.shape[0], -1)


#: code copies of the compiled steps, one per kind of step (see :func:`_compiled`)
_CODES: dict[tuple[Any, ...], types.CodeType] = {}


def _compiled(method: Any, kind: tuple[Any, ...]) -> Any:
    """``torch.compile`` of a bound method through a code object shared by steps of one kind.

    Dynamo keeps compiled graphs per code object, guarded on what ``self`` holds: each
    distinct step compiled in a process (stack size, losses, batch shapes; a narrowed
    stack, a stacked benchmark) adds to one cache, and past torch's recompile limit (8
    entries) the step silently runs uncompiled (seen: a two-data-set stack with retiring and
    its models trained alone; on CUDA an uncompiled step is not capturable either). One
    code copy per ``kind`` (stack size, loss types, dropout, precision) keeps each cache
    small, while steps of one kind still reuse each other's graphs when dynamo's guards pass.
    """
    fn = method.__func__
    code = _CODES.setdefault((fn.__qualname__, *kind), fn.__code__.replace())
    own = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                             fn.__closure__)
    return torch.compile(types.MethodType(own, method.__self__), dynamic=False)


class FusedStep:
    """One compiled training step for a stack of pure-loss models; ``__call__`` returns the
    (K,) loss values of the batch and updates the parameters and Adam's state in place.
    ``compile=False`` runs the same step eagerly (tests)."""

    def __init__(self, params: list[torch.Tensor], opt: torch.optim.Adam,
                 objective: BatchObjective, dropout: float, bf16: bool,
                 compile: bool = True) -> None:
        self.params, self.opt, self.objective = params, opt, objective
        # the same storage outside autograd: func.grad differentiates them inside the step,
        # and Adam writes into them in place
        self.leaves = [p.detach() for p in params]
        self.kept = round((1.0 - dropout) * 65536) if dropout > 0 else None
        self.bf16 = bf16
        group = opt.param_groups[0]
        self.hyper = {"beta1": group["betas"][0], "beta2": group["betas"][1],
                      "eps": group["eps"], "weight_decay": group["weight_decay"]}
        dev = params[0].device
        for p in params:  # the optimizer's own state, as torch.optim.Adam lays it out
            if not opt.state[p]:
                opt.state[p] = {"step": torch.zeros((), dtype=torch.float32, device=dev),
                                "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
        # on CUDA the step is captured as a CUDA graph (sphr.train.graph): Adam's capturable
        # form keeps the bias corrections on the device, where the plain form hands addcdiv_ a
        # tensor-valued step size; with the plain form torch 2.11 failed to capture the step
        # on an H200, with this one it captures (docs/BENCHMARKS.md). The CPU keeps the plain
        # form, so its results stay bit for bit.
        self.capturable = dev.type == "cuda"
        self._lr = float(group["lr"])
        self.lr = torch.tensor(self._lr, device=dev)
        self._grad = torch.func.grad_and_value(self._objective, has_aux=True)
        # torch.compile is lazy: a step never called is never compiled
        kind = (len(params), params[0].shape[0],
                tuple(type(x).__name__ for x in objective.losses), self.kept, bf16,
                objective.geometry, self.capturable)
        self._step = _compiled(self._update, kind) if compile else self._update
        self._step_at = _compiled(self._update_at, kind) if compile else self._update_at

    def _objective(self, params: list[torch.Tensor], x: torch.Tensor, keys: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        masks = hashed_masks(keys, x.shape[1], self.kept) if self.kept is not None else None
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            z = stacked_forward(params, x, masks)
        values = self.objective(z.float(), x)  # pure losses: no labels
        return values.sum(), values

    def _update(self, params: list[torch.Tensor], X: torch.Tensor, rows: torch.Tensor,
                keys: torch.Tensor, lr: torch.Tensor, exp_avgs: list[torch.Tensor],
                exp_avg_sqs: list[torch.Tensor], steps: list[torch.Tensor]) -> torch.Tensor:
        grads, (_, values) = self._grad(params, X[rows], keys)
        with torch.no_grad():
            adam(params, list(grads), exp_avgs, exp_avg_sqs, [], steps, foreach=False,
                 capturable=self.capturable, amsgrad=False, lr=lr, maximize=False,
                 **self.hyper)
        return values

    def _update_at(self, params: list[torch.Tensor], X: torch.Tensor, T: torch.Tensor,
                   perm: torch.Tensor, index: torch.Tensor, keys: torch.Tensor,
                   total: torch.Tensor, lr: torch.Tensor, exp_avgs: list[torch.Tensor],
                   exp_avg_sqs: list[torch.Tensor], steps: list[torch.Tensor], b: int, bs: int,
                   maps: tuple[Any, Any, Any]) -> None:
        # the batch's slice of the permutation from the device step counter: nothing the host
        # computes per step, so one captured graph serves every step of the epoch
        offsets = index * bs + torch.arange(b, device=perm.device)
        streams, stream_of, seed_of = maps
        rows = gather_rows(T, perm[:, offsets], streams)
        if stream_of is not None:
            rows = rows[stream_of]
        if seed_of is not None:
            keys = keys[seed_of]
        total.add_(self._update(params, X, rows, keys, lr, exp_avgs, exp_avg_sqs, steps))
        index.add_(1)

    def sync_lr(self) -> None:
        """Copy the optimizer's learning rate into the step's device ``lr`` when it changed."""
        lr = float(self.opt.param_groups[0]["lr"])
        if lr != self._lr:  # the scheduler stepped: lr is a tensor input, so no recompilation
            self._lr = lr
            self.lr.fill_(lr)

    def adam_state(self) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
        """Adam's exp_avg, exp_avg_sq and step tensors, in parameter order."""
        state = [self.opt.state[p] for p in self.params]
        return ([s["exp_avg"] for s in state], [s["exp_avg_sq"] for s in state],
                [s["step"] for s in state])

    def __call__(self, X: torch.Tensor, rows: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """``rows`` (K, 3b): each model's a..., p..., n... rows; ``keys`` (K,) int32."""
        self.sync_lr()
        return self._step(self.leaves, X, rows, keys, self.lr, *self.adam_state())

    def at(self, X: torch.Tensor, T: torch.Tensor, perm: torch.Tensor, index: torch.Tensor,
           keys: torch.Tensor, total: torch.Tensor, *, b: int, bs: int,
           maps: tuple[Any, Any, Any] = (None, None, None)) -> None:
        """Step number ``index`` (a (1,) int64 device counter, advanced in place) of an epoch:
        the batch is positions ``index * bs`` ... ``+ b`` of ``perm`` (seeds, n) into ``T``;
        ``keys`` (seeds,) int32; the batch's (K,) loss is added to ``total``. ``maps``:
        (streams, stream_of, seed_of), the streams of several data sets (see
        :func:`gather_rows`) and the stream and seed of each model (None: one each, in order).
        The caller calls :meth:`sync_lr` when the learning rate may have changed."""
        self._step_at(self.leaves, X, T, perm, index, keys, total, self.lr, *self.adam_state(),
                      b, bs, maps)


def draw_keys(gens: Sequence[torch.Generator], device: torch.device) -> torch.Tensor:
    """One int32 mask key per generator, drawn in generator order."""
    return torch.cat([torch.randint(0, _KEY_MAX, (1,), generator=g, device=device,
                                    dtype=torch.int32) for g in gens])
