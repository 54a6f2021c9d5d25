"""Training loop for an embedding network under one retrieval loss, and batched embedding."""

from __future__ import annotations

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
from sphr.retrieval.profiles import Profile

log = logging.getLogger(__name__)


@dataclass
class TrainResult:
    model: EmbeddingNet
    #: one record per epoch: epoch, loss, seconds, images, + the margins in force and easy share
    history: list[dict[str, float]] = field(default_factory=list)
    seconds: float = 0.0
    images: int = 0

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


def train_model(data: RetrievalData, loss: RetrievalLoss, profile: Profile, *, seed: int = 0,
                device: torch.device | str = "cpu", desc: str = "train") -> TrainResult:
    """Train a fresh model with ``loss`` on ``data.train``; deterministic on CPU for a given seed.

    Per epoch: ``len(sampler)`` m-per-class batches (about one pass over the
    training images), augmentation on the device, Adam; then
    ``loss.on_epoch_end()`` advances the margin scheduler.
    """
    device = torch.device(device)
    if device.type == "cuda":
        # conv autotuning and TF32 matmuls: faster, at the price of bit-exact repeatability
        torch.backends.cudnn.benchmark = True
    seed_everything(seed)
    model = build_model(profile.backbone, in_channels=data.channels, dim=profile.dim, weights=profile.weights,
                        width=profile.width, dropout=profile.dropout).to(device)
    loss = loss.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=profile.lr, weight_decay=profile.weight_decay)
    sampler = MPerClassBatchSampler(data.train.labels, profile.m_per_class, profile.batch_size, seed=seed,
                                    batches_per_epoch=profile.batches_per_epoch)
    transform = BatchTransform(image_size_for(data, profile), train=profile.augment)
    gen = torch.Generator(device=device).manual_seed(seed)
    labels_all = torch.as_tensor(data.train.labels, device=device)
    result = TrainResult(model)
    start = time.perf_counter()
    bar = progress(total=profile.epochs * len(sampler), desc=desc, unit="batch")
    for epoch in range(profile.epochs):
        model.train()
        t0, total, n_batches, n_images = time.perf_counter(), 0.0, 0, 0
        for images, idx in _batches(data.train, iter(sampler), profile.workers, device):
            emb = model(transform(images, gen))
            value = loss(emb, labels_all[torch.as_tensor(idx, device=device)])
            opt.zero_grad(set_to_none=True)
            value.backward()
            opt.step()
            total += float(value.detach())
            n_batches += 1
            n_images += len(idx)
            bar.update(1)
        margins_used = loss.margins()
        loss.on_epoch_end()
        record: dict[str, Any] = {"epoch": epoch, "loss": total / max(n_batches, 1),
                                  "seconds": time.perf_counter() - t0, "images": n_images}
        sched = getattr(loss, "scheduler", None)
        if sched is not None and sched.history:
            record.update({k: v for k, v in sched.history[-1].items() if k != "epoch"})
        else:
            record.update(margins_used)
        result.history.append(record)
        result.images += n_images
        if not math.isfinite(record["loss"]):
            log.warning("%s: loss is %s at epoch %d", desc, record["loss"], epoch)
    bar.close()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    result.seconds = time.perf_counter() - start
    return result


@torch.no_grad()
def embed(model: EmbeddingNet, images: ImageSet, transform: BatchTransform, *, device: torch.device | str,
          batch_size: int = 512, workers: int = 0) -> torch.Tensor:
    """L2-normalized embeddings ``(N, D)`` on ``device`` (eval mode, test-time transform)."""
    device = torch.device(device)
    model.eval()
    order = np.arange(len(images))
    batches = [order[i:i + batch_size].tolist() for i in range(0, len(order), batch_size)]
    out = [model(transform(x)) for x, _ in _batches(images, batches, workers, device)]
    return torch.cat(out) if out else torch.zeros(0, model.dim, device=device)
