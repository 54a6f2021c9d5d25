"""Checkpoints of a training stack: its state, saved, loaded and narrowed to some models.

A checkpoint holds everything an epoch changes (weights, optimizer and scheduler, the
generators, the losses' own state, the curves and model selection's record), so a resumed
run ends with the same weights as an uninterrupted one.
"""

from __future__ import annotations

import dataclasses
import io
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sphr.errors import ConfigError
from sphr.train.config import TrainConfig, settings_with
from sphr.train.stack_data import StackInputs

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
#: settings a resumed run may change without changing the result's meaning (their fields'
#: ``resumable``)
_RESUMABLE = settings_with(TrainConfig, resumable=True)


@dataclass
class StackState:
    """What the epochs of a stack change, beside its generators (which its inputs hold,
    :class:`~sphr.train.stack_data.StackInputs`): the models' weights, the optimizer and its
    schedule, the losses (MDR's running statistics and parameters), the epoch and the curves.
    The epochs (:class:`~sphr.train.epochs.EpochLoop`) advance it; a checkpoint saves it."""

    configs: list[TrainConfig]
    params: list[torch.Tensor]
    opt: torch.optim.Adam
    sched: torch.optim.lr_scheduler.StepLR
    losses: list[torch.nn.Module]
    epoch: int = 0
    curve: list[list[float]] = field(default_factory=list)


def stack_state(state: StackState, inputs: StackInputs) -> dict[str, Any]:
    """The checkpoint of a stack as one dict (tensors on the CPU)."""
    v = inputs.validator
    return {"epoch": state.epoch, "configs": [c.to_dict() for c in state.configs],
            "params": [p.detach().cpu() for p in state.params],
            "optimizer": state.opt.state_dict(), "scheduler": state.sched.state_dict(),
            "generators": [g.get_state() for g in inputs.gens],
            "losses": [loss.state_dict() for loss in state.losses], "curve": state.curve,
            "validation": v.state() if v else None}


def save(state: StackState, inputs: StackInputs, directory: Path) -> None:
    from sphr.io import write_bytes

    buf = io.BytesIO()
    torch.save(stack_state(state, inputs), buf)
    write_bytes(buf.getvalue(), directory / CHECKPOINT)


def load(state: StackState, inputs: StackInputs, directory: Path) -> bool:
    """Continue from ``directory``'s checkpoint; False when there is none."""
    path = directory / CHECKPOINT
    if not path.exists():
        return False
    load_state(state, inputs, torch.load(path, map_location=inputs.device, weights_only=True),
               path)
    log.info("resumed from %s at epoch %d", path, state.epoch)
    return True


def load_state(state: StackState, inputs: StackInputs, saved: dict[str, Any],
               path: Path | str = "state") -> None:
    """Continue from :func:`stack_state` (a checkpoint, or a stack narrowed by
    :func:`narrowed`)."""
    old_configs = [TrainConfig.from_dict(d) for d in saved["configs"]]
    for old, new in zip(old_configs, state.configs, strict=False):
        diff = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in _RESUMABLE
                and getattr(old, f.name) != getattr(new, f.name)]
        if diff:
            raise ConfigError(f"{path}: checkpoint was made with other settings ({diff}); "
                              "remove it or train without resume")
    if len(old_configs) != len(state.configs):
        raise ConfigError(f"{path}: checkpoint holds {len(old_configs)} models, "
                          f"not {len(state.configs)}")
    with torch.no_grad():
        for p, q in zip(state.params, saved["params"], strict=True):
            p.copy_(q)
    state.opt.load_state_dict(saved["optimizer"])
    state.sched.load_state_dict(saved["scheduler"])
    for g, s in zip(inputs.gens, saved["generators"], strict=True):
        g.set_state(s.cpu())
    for loss, s in zip(state.losses, saved["losses"], strict=True):
        loss.load_state_dict(s)
    state.epoch, state.curve = int(saved["epoch"]), [list(x) for x in saved["curve"]]
    if inputs.validator is not None and saved.get("validation"):
        inputs.validator.load(saved["validation"], inputs.device)


def narrowed(state: StackState, inputs: StackInputs, keep: Sequence[int]) -> dict[str, Any]:
    """:func:`stack_state` of models ``keep`` alone. Exact: the models share no parameter,
    Adam is element-wise, and batches and dropout masks come from one generator per seed, so
    a model continues as it would have in the whole stack."""
    full = stack_state(state, inputs)
    n_stacked = len(full["params"])
    sizes = [len(list(loss.parameters())) for loss in state.losses]
    starts = np.cumsum([n_stacked, *sizes[:-1]]).tolist()
    old_index = list(range(n_stacked)) + [starts[j] + i for j in keep for i in range(sizes[j])]
    opt = full["optimizer"]
    k = torch.as_tensor(list(keep))
    new_state = {}
    for new, old in enumerate(old_index):
        if old in opt["state"]:
            new_state[new] = {name: (v[k.to(v.device)] if new < n_stacked and v.dim() > 0
                                     else v) for name, v in opt["state"][old].items()}
    groups = [{**opt["param_groups"][0], "params": list(range(len(old_index)))}]
    kept_seeds = list(dict.fromkeys(state.configs[j].seed for j in keep))
    v = full["validation"]
    return {**full, "configs": [full["configs"][j] for j in keep],
            "params": [p[k] for p in full["params"]],
            "optimizer": {"state": new_state, "param_groups": groups},
            "generators": [full["generators"][inputs.seeds.index(s)] for s in kept_seeds],
            "losses": [full["losses"][j] for j in keep],
            "curve": [[row[j] for j in keep] for row in full["curve"]],
            "validation": v and {"history": [[row[j] for j in keep] for row in v["history"]],
                                 "best": [v["best"][j] for j in keep],
                                 "best_params": [v["best_params"][j] for j in keep]}}
