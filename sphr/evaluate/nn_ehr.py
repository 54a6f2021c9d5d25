"""NN for EHR (Chen et al. 2020a, as the paper uses it; docs/METHODS.md): feature attention,
then an MLP.

    e     = V tanh(W x + b)          (one score per input feature)
    alpha = softmax(e)               (per-patient feature importances, sum to 1)
    x'    = n * alpha * x            (n = number of features)
    y     = MLP(x')                  (ReLU hidden layers, softmax output)

The factor n makes uniform attention the identity map; it is absorbed by the
MLP's first layer, so the model class is exactly the paper's ``x' = alpha * x``, but
the first layer does not start with inputs shrunk n-fold. Inputs are
standardized with the mean and SD of the model's own training rows.

Training per the paper (K.5.1): Adam, lr 1e-3, L2 penalty 1e-3 (Adam's coupled
``weight_decay``), 100 epochs, cross-entropy. **Decision**: batch 512, shuffled
each epoch (the paper gives none); hidden widths attention 32, MLP 64-32.

:func:`fit_predict_many` trains several independent models at once: weights are
stacked along a leading model axis and every layer is one ``bmm``, each model
with its own training rows, permutation and initialization. Adam is
element-wise and the summed loss separates, so this is exactly M separate
trainings, run as one (the protocol trains 5 splits x 2 tasks per
representation this way; on CUDA the data stay on the device and batches are
index gathers).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from sphr.device import resolve_device
from sphr.evaluate.config import NNForEHRConfig


def _uniform(gen: torch.Generator, M: int, fan_in: int, *shape: int) -> torch.Tensor:
    # torch.nn.Linear's default init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), per model
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(M, *shape, generator=gen) * 2 - 1) * bound


class _StackedNet:
    """M attention-MLPs as stacked tensors (leading axis = model)."""

    def __init__(self, M: int, d: int, C: int, cfg: NNForEHRConfig, gen: torch.Generator,
                 device: torch.device) -> None:
        a = cfg.attention_hidden
        shapes: list[tuple[int, int]] = [(d, a), (a, d)]
        widths = [d, *cfg.hidden, C]
        shapes += list(itertools.pairwise(widths))
        self.weights, self.biases = [], []
        for i, (fan_in, fan_out) in enumerate(shapes):
            self.weights.append(
                _uniform(gen, M, fan_in, fan_in, fan_out).to(device).requires_grad_()
            )
            if i == 1:  # V: the attention scores need no bias (softmax is shift-invariant)
                self.biases.append(None)
            else:
                self.biases.append(_uniform(gen, M, fan_in, 1, fan_out).to(device).requires_grad_())
        self.d = d

    def parameters(self) -> list[torch.Tensor]:
        return [*self.weights, *(b for b in self.biases if b is not None)]

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(torch.baddbmm(self.biases[0], x, self.weights[0]))
        return torch.softmax(torch.bmm(h, self.weights[1]), dim=-1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        h = self.attention(x) * x * self.d
        n_layers = len(self.weights) - 2
        for i in range(n_layers):
            h = torch.baddbmm(self.biases[2 + i], h, self.weights[2 + i])
            if i < n_layers - 1:
                h = torch.relu(h)
        return h


@dataclass
class StackedModels:
    """M fitted models: the stacked net and each model's standardization."""

    net: _StackedNet
    mean: torch.Tensor  # (M, 1, d)
    sd: torch.Tensor  # (M, 1, d)
    mask: torch.Tensor  # (M, 1, C): -inf on classes a model does not have
    device: torch.device

    def predict_proba(self, m: int, X: np.ndarray) -> np.ndarray:
        """Class probabilities of model ``m`` for the rows of ``X``."""
        with torch.no_grad():
            x = torch.as_tensor(np.array(X, dtype=np.float32)).to(self.device)
            out = []
            for start in range(0, x.shape[0], 65536):
                xb = ((x[start:start + 65536] - self.mean[m]) / self.sd[m])[None]
                out.append(torch.softmax(_slice(self.net, m)(xb) + self.mask[m:m + 1], -1)[0])
            return torch.cat(out).cpu().numpy()

    def predict(self, m: int, X: np.ndarray) -> np.ndarray:
        return self.predict_proba(m, X).argmax(axis=1)


def train_many(X: np.ndarray, labels: Sequence[np.ndarray], train_idx: Sequence[np.ndarray], *,
               n_classes: Sequence[int], config: NNForEHRConfig | None = None, seed: int = 0,
               device: str | torch.device = "auto") -> StackedModels:
    """Train model m on ``X[train_idx[m]]`` with labels ``labels[m][train_idx[m]]``.

    All models must have the same number of training rows (the protocol's
    splits do); ``n_classes[m]`` is 2 or 3. Rows of ``X`` outside every
    ``train_idx[m]`` are never read.
    """
    cfg = config or NNForEHRConfig()
    M = len(train_idx)
    if not (len(labels) == len(n_classes) == M) or M == 0:
        raise ValueError("labels, train_idx and n_classes need one entry per model")
    n_tr = {len(t) for t in train_idx}
    if len(n_tr) != 1:
        raise ValueError(f"models need equal training sizes to train together, got {sorted(n_tr)}")
    n_tr = n_tr.pop()
    dev = resolve_device(device)
    C = int(max(n_classes))
    Xt = torch.as_tensor(np.array(X, dtype=np.float32)).to(dev)
    tr = torch.from_numpy(np.stack([np.asarray(t, dtype=np.int64) for t in train_idx])).to(dev)
    Y = torch.from_numpy(np.stack([np.asarray(y, dtype=np.int64) for y in labels])).to(dev)
    # per-model standardization from that model's training rows only
    Xtr = Xt[tr]  # (M, n_tr, d)
    mean = Xtr.mean(dim=1, keepdim=True)
    sd = Xtr.std(dim=1, keepdim=True)
    sd = torch.where(sd > 0, sd, torch.ones_like(sd))
    del Xtr
    mask = torch.zeros(M, 1, C, device=dev)
    for m, c in enumerate(n_classes):
        mask[m, :, int(c):] = float("-inf")
    Ytr = torch.gather(Y, 1, tr)  # (M, n_tr)

    gen = torch.Generator().manual_seed(int(seed))
    net = _StackedNet(M, Xt.shape[1], C, cfg, gen, dev)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    perm_gen = torch.Generator(device=dev).manual_seed(int(seed) + 1)
    rows = torch.arange(M, device=dev)[:, None]
    for _ in range(cfg.epochs):
        order = torch.argsort(torch.rand(M, n_tr, generator=perm_gen, device=dev), dim=1)
        for start in range(0, n_tr, cfg.batch_size):
            pos = order[:, start:start + cfg.batch_size]  # (M, B) positions in each model's rows
            x = (Xt[tr[rows, pos]] - mean) / sd
            logits = net(x) + mask
            # per-model mean loss, summed: each model gets exactly its own gradient
            loss = F.cross_entropy(logits.reshape(-1, C), Ytr[rows, pos].reshape(-1),
                                   reduction="none").view(M, -1).mean(dim=1).sum()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    for p in net.parameters():
        p.requires_grad_(False)
    return StackedModels(net=net, mean=mean, sd=sd, mask=mask, device=dev)


def fit_predict_many(X: np.ndarray, labels: Sequence[np.ndarray], train_idx: Sequence[np.ndarray],
                     test_idx: Sequence[np.ndarray], *, n_classes: Sequence[int],
                     config: NNForEHRConfig | None = None, seed: int = 0,
                     device: str | torch.device = "auto") -> list[np.ndarray]:
    """:func:`train_many`, then model m predicts ``X[test_idx[m]]``."""
    if len(test_idx) != len(train_idx):
        raise ValueError("test_idx needs one entry per model")
    models = train_many(X, labels, train_idx, n_classes=n_classes, config=config, seed=seed,
                        device=device)
    return [models.predict(m, X[np.asarray(te)]) for m, te in enumerate(test_idx)]


def _slice(net: _StackedNet, m: int) -> _StackedNet:
    """Model ``m`` alone (views of the stacked tensors)."""
    one = object.__new__(_StackedNet)
    one.weights = [w[m:m + 1] for w in net.weights]
    one.biases = [None if b is None else b[m:m + 1] for b in net.biases]
    one.d = net.d
    return one
