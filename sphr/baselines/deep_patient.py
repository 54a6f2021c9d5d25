"""DeepPatient (Miotto et al. 2016): three stacked denoising autoencoders, unsupervised.

As in the authors' code: tied weights, sigmoid units, cross-entropy
reconstruction of inputs min-max scaled to [0, 1] (scaler fitted on the
training rows; values outside the training range are clipped), masking noise
(each input entry zeroed with probability 5%), greedy layer-wise training (layer
l is trained on the clean codes of layer l-1), no fine-tuning. Widths 500-500-32:
the paper's 500 units, with the last layer 32 wide to match SPHR's d
(docs/METHODS.md#representations-compared).

**Decision** (neither paper gives an optimizer): Adam, lr 1e-3, batch 256,
``epochs`` per layer. Data live on the device; batches are index gathers.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from sphr.baselines.base import Representation, keep_params
from sphr.baselines.config import BaselinesConfig
from sphr.device import resolve_device
from sphr.progress import progress


class DeepPatient(Representation):
    def __init__(self, hidden: tuple[int, ...] = (500, 500, 32), noise: float = 0.05,
                 epochs: int = BaselinesConfig.deep_patient_epochs, batch_size: int = 256,
                 lr: float = 1e-3, random_state: int = 0, device: str = "auto") -> None:
        keep_params(self, locals())

    @property
    def n_components(self) -> int:  # type: ignore[override]
        return int(self.hidden[-1])

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return np.clip((X - self.min_) / self.range_, 0.0, 1.0).astype(np.float32)

    def _fit(self, X: np.ndarray) -> None:
        if not 0.0 <= self.noise < 1.0:
            from sphr.errors import ConfigError

            raise ConfigError(f"DeepPatient noise must be in [0, 1), got {self.noise}")
        dev = resolve_device(self.device)
        self.min_ = X.min(axis=0)
        rng_ = X.max(axis=0) - self.min_
        self.range_ = np.where(rng_ > 0, rng_, 1.0)
        gen = torch.Generator(device=dev).manual_seed(int(self.random_state))
        init_gen = torch.Generator().manual_seed(int(self.random_state))
        codes = torch.from_numpy(self._scale(X)).to(dev)
        self.layers_: list[tuple[np.ndarray, np.ndarray]] = []
        self.loss_curve_: list[list[float]] = []
        n = codes.shape[0]
        for width in self.hidden:
            n_in = codes.shape[1]
            # Glorot-uniform x4, the usual init for sigmoid autoencoders (Theano dA)
            bound = 4.0 * math.sqrt(6.0 / (n_in + width))
            W = ((torch.rand(n_in, width, generator=init_gen) * 2 - 1) * bound).to(dev)
            W.requires_grad_(True)
            b_h = torch.zeros(width, device=dev, requires_grad=True)
            b_v = torch.zeros(n_in, device=dev, requires_grad=True)
            opt = torch.optim.Adam([W, b_h, b_v], lr=self.lr)
            curve = []
            for _ in progress(range(self.epochs), desc=f"DeepPatient layer {len(self.layers_) + 1}",
                              unit="epoch"):
                perm = torch.randperm(n, generator=gen, device=dev)
                total = torch.zeros((), device=dev)
                for start in range(0, n, self.batch_size):
                    x = codes[perm[start:start + self.batch_size]]
                    keep = torch.rand(x.shape, generator=gen, device=dev) >= self.noise
                    h = torch.sigmoid((x * keep) @ W + b_h)
                    logits = h @ W.T + b_v  # tied weights
                    loss = F.binary_cross_entropy_with_logits(logits, x,
                                                              reduction="none").sum(1).mean()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    total += loss.detach() * x.shape[0]
                curve.append(float(total) / n)  # one sync per epoch, not per batch
            with torch.no_grad():
                codes = torch.sigmoid(codes @ W + b_h)
            self.layers_.append((W.detach().cpu().numpy(), b_h.detach().cpu().numpy()))
            self.loss_curve_.append(curve)
        self.n_components_ = int(self.hidden[-1])

    def _transform(self, X: np.ndarray) -> np.ndarray:
        dev = resolve_device(self.device)
        out = []
        with torch.no_grad():
            for start in range(0, X.shape[0], 65536):
                h = torch.from_numpy(self._scale(X[start:start + 65536])).to(dev)
                for W, b in self.layers_:
                    h = torch.sigmoid(h @ torch.from_numpy(W).to(dev) + torch.from_numpy(b).to(dev))
                out.append(h.cpu().numpy())
        return np.concatenate(out, axis=0)
