"""Training loop for an embedding network under one retrieval loss, and batched embedding."""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sphr.device import seed_everything
from sphr.progress import progress
from sphr.retrieval.backbones import EmbeddingNet, build_model
from sphr.retrieval.data.core import ImageSet, RetrievalData
from sphr.retrieval.data.sampler import MPerClassBatchSampler
from sphr.retrieval.data.transforms import BatchTransform
from sphr.retrieval.losses.base import RetrievalLoss
from sphr.retrieval.metrics import map_score
from sphr.retrieval.monitor import CollapseMonitor
from sphr.retrieval.profiles import Profile

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    model: EmbeddingNet
    #: one record per epoch: epoch, loss, seconds, images, + the margins in force and easy share,
    #: the collapse monitor (neg_cos, eff_rank, collapsed) and val_mAP when there is a
    #: validation split
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    images: int = 0
    #: the epoch with the best validation mAP and the model's weights after it (None: no validation)
    best_epoch: int | None = None
    best_state: dict[str, torch.Tensor] | None = None
    #: epochs whose training batches looked collapsed (see ``sphr.retrieval.monitor``)
    collapsed_epochs: int = 0

    @property
    def images_per_s(self) -> float:
        return self.images / self.seconds if self.seconds > 0 else math.nan


def image_size_for(data: RetrievalData, profile: Profile) -> int:
    kind = data.name if data.name in profile.image_size else "manifest"
    return int(profile.image_size.get(kind, data.native_size))


def _batches(images: ImageSet, batches: Iterator[list[int]] | list[list[int]], workers: int,
             device: torch.device) -> Iterator[tuple[torch.Tensor, np.ndarray]]:
    """(uint8 images on device, indices) per batch; a DataLoader reads files when not in memory."""
    pin = device.type == "cuda"
    if images.in_memory:
        for idx in batches:
            x = images.batch(idx)
            yield (x.pin_memory() if pin else x).to(device, non_blocking=pin), np.asarray(idx)
        return
    batches = list(batches)
    loader = torch.utils.data.DataLoader(images.images, batch_sampler=batches, num_workers=workers,
                                         pin_memory=pin)
    for idx, x in zip(batches, loader, strict=True):
        yield x.to(device, non_blocking=pin), np.asarray(idx)


@dataclass
class _Step:
    """One optimisation step on a batch: the model, its losses, the optimiser, the training
    augmentation with its own generator, and the collapse monitor that watches every batch."""

    model: EmbeddingNet
    loss: RetrievalLoss
    code_losses: dict[int, RetrievalLoss]
    opt: torch.optim.Optimizer
    transform: BatchTransform
    gen: torch.Generator
    labels: torch.Tensor  # every training image's label, on the device
    monitor: CollapseMonitor

    def __call__(self, images: torch.Tensor, idx: np.ndarray) -> float:
        labels = self.labels[torch.as_tensor(idx, device=self.labels.device)]
        x = self.transform(images, self.gen)
        if self.code_losses:
            emb, codes = self.model.forward_all(x)
            value = self.loss(emb, labels)
            for bits, code_loss in self.code_losses.items():
                value = value + code_loss(codes[bits], labels)
        else:
            emb = self.model(x)
            value = self.loss(emb, labels)
        self.opt.zero_grad(set_to_none=True)
        value.backward()
        self.opt.step()
        self.monitor.update(emb, labels)
        return float(value.detach())

    def end_epoch(self) -> dict[str, Any]:
        """Advance the margin schedulers; the margins the epoch trained with and the monitor's
        verdict, for the epoch's record."""
        margins_used = self.loss.margins()
        self.loss.on_epoch_end()
        for code_loss in self.code_losses.values():
            code_loss.on_epoch_end()
        record: dict[str, Any] = {}
        sched = getattr(self.loss, "scheduler", None)
        if sched is not None and sched.history:
            record.update({k: v for k, v in sched.history[-1].items() if k != "epoch"})
        else:
            record.update(margins_used)
        return record


def _train_epoch(step: _Step, images: ImageSet, sampler: MPerClassBatchSampler, workers: int,
                 device: torch.device, bar: Any) -> tuple[float, int, int]:
    """(summed loss, batches, images) of one pass of the sampler's batches."""
    step.model.train()
    total, n_batches, n_images = 0.0, 0, 0
    for batch, idx in _batches(images, iter(sampler), workers, device):
        total += step(batch, idx)
        n_batches += 1
        n_images += len(idx)
        bar.update(1)
    return total, n_batches, n_images


def train_model(data: RetrievalData, loss: RetrievalLoss, profile: Profile, *, seed: int = 0,
                device: torch.device | str = "cpu", desc: str = "train",
                val: ImageSet | None = None,
                code_losses: dict[int, RetrievalLoss] | None = None) -> TrainResult:
    """Train a fresh model with ``loss`` on ``data.train``; deterministic on CPU for a given seed.

    Before the first epoch the loss learns the budget (``set_budget``: epochs,
    batches, ``profile.scale_schedules``). Per epoch: ``len(sampler)``
    m-per-class batches (about one pass over the training images),
    augmentation on the device, Adam; then ``loss.on_epoch_end()`` advances
    the margin scheduler, the collapse monitor reports (a warning when the
    epoch's batches look collapsed), and with ``val`` the validation mAP is
    measured and the best epoch's weights kept. ``code_losses`` (S -> a loss
    of the same kind) train the model's S-output code heads.
    """
    device = torch.device(device)
    if device.type == "cuda":
        # conv autotuning and TF32 matmuls: faster, at the price of bit-exact repeatability
        torch.backends.cudnn.benchmark = True
    # seeded before the model is built: its initial weights come from the global generator
    seed_everything(seed)
    code_losses = {int(b): c.to(device) for b, c in (code_losses or {}).items()}
    model = build_model(profile.backbone, in_channels=data.channels, dim=profile.dim,
                        weights=profile.weights, width=profile.width, dropout=profile.dropout,
                        code_bits=tuple(sorted(code_losses)),
                        detach_codes=profile.code_heads_detach).to(device)
    loss = loss.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=profile.lr, weight_decay=profile.weight_decay)
    sampler = MPerClassBatchSampler(data.train.labels, profile.m_per_class, profile.batch_size,
                                    seed=seed, batches_per_epoch=profile.batches_per_epoch)
    for lo in (loss, *code_losses.values()):
        lo.set_budget(profile.epochs, len(sampler), scale=profile.scale_schedules)
    step = _Step(model, loss, code_losses, opt,
                 BatchTransform(image_size_for(data, profile), train=profile.augment),
                 torch.Generator(device=device).manual_seed(seed),
                 torch.as_tensor(data.train.labels, device=device), CollapseMonitor())
    eval_transform = BatchTransform(image_size_for(data, profile))
    result = TrainResult(model)
    best_map = -math.inf
    warned = False
    start = time.perf_counter()
    bar = progress(total=profile.epochs * len(sampler), desc=desc, unit="batch")
    for epoch in range(profile.epochs):
        t0 = time.perf_counter()
        total, n_batches, n_images = _train_epoch(step, data.train, sampler, profile.workers,
                                                  device, bar)
        margins = step.end_epoch()
        record: dict[str, Any] = {"epoch": epoch, "loss": total / max(n_batches, 1),
                                  "seconds": time.perf_counter() - t0, "images": n_images}
        record.update(margins)
        health = step.monitor.end_epoch()
        record.update(health.as_dict())
        if health.collapsed and not warned:
            log.warning("%s: embedding collapse at epoch %d (mean negative-pair cosine %.3f, "
                        "effective rank %.1f)", desc, epoch, health.mean_negative_cosine,
                        health.effective_rank)
            warned = True
        if val is not None and len(val):
            emb_val = embed(model, val, eval_transform, device=device,
                            batch_size=profile.eval_batch_size, workers=profile.workers)
            record["val_mAP"] = map_score(emb_val, val.labels, val.years)
            if math.isfinite(record["val_mAP"]) and record["val_mAP"] > best_map:
                best_map = record["val_mAP"]
                result.best_epoch = epoch
                result.best_state = copy.deepcopy(model.state_dict())
        result.history.append(record)
        result.images += n_images
        if not math.isfinite(record["loss"]):
            log.warning("%s: loss is %s at epoch %d", desc, record["loss"], epoch)
    bar.close()
    result.collapsed_epochs = step.monitor.epochs_collapsed
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    result.seconds = time.perf_counter() - start
    return result


@torch.no_grad()
def embed(model: EmbeddingNet, images: ImageSet, transform: BatchTransform, *,
          device: torch.device | str, batch_size: int = 512, workers: int = 0) -> torch.Tensor:
    """L2-normalized embeddings ``(N, D)`` on ``device`` (eval mode, test-time transform)."""
    return embed_all(model, images, transform, device=device, batch_size=batch_size,
                     workers=workers)[0]


@torch.no_grad()
def embed_all(model: EmbeddingNet, images: ImageSet, transform: BatchTransform, *,
              device: torch.device | str, batch_size: int = 512,
              workers: int = 0) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
    """The embeddings and, per code head S, its ``(N, S)`` outputs (empty without code heads)."""
    device = torch.device(device)
    model.eval()
    order = np.arange(len(images))
    batches = [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    bits = getattr(model, "code_bits", ())
    embs: list[torch.Tensor] = []
    codes: dict[int, list[torch.Tensor]] = {b: [] for b in bits}
    for x, _ in _batches(images, batches, workers, device):
        if bits:
            e, c = model.forward_all(transform(x))
            for b in bits:
                codes[b].append(c[b])
        else:
            e = model(transform(x))
        embs.append(e)
    if not embs:
        empty = {b: torch.zeros(0, b, device=device) for b in bits}
        return torch.zeros(0, model.dim, device=device), empty
    return torch.cat(embs), {b: torch.cat(v) for b, v in codes.items()}
