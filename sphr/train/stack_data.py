"""The inputs of a training stack: its data sets on the device and its random streams.

A stack (:class:`sphr.train.trainer._Stack`) trains K models at once. This part holds what
they train on: the feature rows and triplets of each data set, one generator per distinct
seed (models sharing a seed share batches and dropout masks), the (data set, seed) streams
that say which batch each model reads, and the validators of model selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sphr.errors import ConfigError
from sphr.models import HIDDEN
from sphr.train.config import TrainConfig
from sphr.train.seeds import derived_seed
from sphr.train.selection import ValidationSplit, Validator
from sphr.train.tracking import RowFacts


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
class Prepared(TrainData):
    """A data set as a stack trains on it: ``triplets`` are its fitting triplets, beside its
    validation split."""

    split: ValidationSplit | None = None



class StackInputs:
    """Data sets, generators and streams of a stack of models ``configs``: model ``j``
    trains on ``data[data_of[j]]``; ``labels``: the rows' classes go to the device too (a
    loss of the stack reads them)."""

    def __init__(self, data: Sequence[Prepared], configs: Sequence[TrainConfig],
                 data_of: Sequence[int], device: torch.device, labels: bool = False) -> None:
        self.configs, self.data, self.data_of = list(configs), list(data), list(data_of)
        self.device = device
        self._load_data()
        self.L: torch.Tensor | None = None
        if labels and all(d.labels is not None for d in self.data):
            self.L = torch.from_numpy(np.concatenate([d.labels for d in self.data])).to(device)
        self._generators()
        self._validators()

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
        self.gens = [torch.Generator(device=dev).manual_seed(derived_seed(s, "batches"))
                     for s in self.seeds]
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

    def maps(self) -> tuple[Any, Any, Any]:
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
        self.members = [[j for j, x in enumerate(self.data_of) if x == d]
                         for d in range(len(self.validators))]
        self.member_index = [torch.tensor(m, device=self.device) for m in self.members]

    def masks(self, m: int) -> list[torch.Tensor] | None:
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
            masks.append(self.per_model(mask))
        return masks

    def per_model(self, t: torch.Tensor) -> torch.Tensor:
        """Per-seed rows (seeds, ...) -> per-model (K, ...); no copy when there is one of each."""
        if t.shape[0] == len(self.configs):
            own = len(self.gens) == len(self.configs) and self._seeds_in_order
            return t if own else t[self.seed_of]
        return t[self.seed_of]

    def rows_per_model(self, t: torch.Tensor) -> torch.Tensor:
        """Per-stream rows (streams, ...) -> per-model (K, ...)."""
        if self.streams is None:
            return self.per_model(t)
        return t if self._stream_pos == list(range(len(self.configs))) else t[self.stream_of]

