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
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sphr.errors import ConfigError
from sphr.train.config import TrainConfig

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
#: settings a resumed run may change without changing the result's meaning
_RESUMABLE = ("epochs", "checkpoint_every", "device", "threads", "compile", "cuda_graphs",
              "steps_per_graph")


class StackCheckpoint:
    """The state of a stack (:class:`sphr.train.trainer._Group`) and its checkpoint file."""

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
            raise ConfigError(f"{path}: checkpoint holds {len(saved)} models, "
                              f"not {len(self.configs)}")
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

