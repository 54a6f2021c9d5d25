"""K copies of the SPHR network as stacked tensors, run in one batched forward pass.

Parameter ``i`` of every model is stacked along a new first axis, and each
Linear becomes one ``baddbmm`` over the K models, so K models cost one set of
kernel launches. With K = 1 this is the single-model trainer (the same code
path). Adam is element-wise, so Adam on the stacked tensors updates each model
exactly as it would alone.

Dropout masks are drawn by the trainer from each model's own generator and
passed in, so a model's randomness does not depend on what it is trained with.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from sphr.models import SPHRNet

#: state_dict keys of SPHRNet in forward order: (weight, bias, prelu) per layer
LAYERS: tuple[tuple[str, str, str], ...] = (
    ("net.0.weight", "net.0.bias", "net.2.weight"),
    ("net.3.weight", "net.3.bias", "net.5.weight"),
    ("net.6.weight", "net.6.bias", "net.7.weight"),
)
KEYS: tuple[str, ...] = tuple(k for layer in LAYERS for k in layer)


def init_model(n_features: int, seed: int, out: int = 32, dropout: float = 0.1) -> SPHRNet:
    """torch's default initialization under ``seed``, without touching the global RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return SPHRNet(n_features, out=out, dropout=dropout)


def stack_params(models: Sequence[SPHRNet], device: torch.device) -> list[torch.Tensor]:
    states = [m.state_dict() for m in models]
    return [torch.stack([s[k].detach() for s in states]).to(device).requires_grad_(True)
            for k in KEYS]


def unstack(params: Sequence[torch.Tensor], k: int, template: SPHRNet) -> SPHRNet:
    """Model ``k`` of the stack as a CPU :class:`SPHRNet` in eval mode."""
    net = SPHRNet(template.n_features, out=template.out, dropout=template.dropout)
    net.load_state_dict({key: p[k].detach().cpu().clone() for key, p in zip(KEYS, params,
                                                                           strict=True)})
    return net.eval()


def _prelu(h: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    # F.prelu takes one weight per channel (dim 1): put the model axis there. The
    # native kernel is ~2.5x faster forward+backward than a torch.where formula.
    return F.prelu(h.transpose(0, 1), a.reshape(-1)).transpose(0, 1)


def stacked_forward(params: Sequence[torch.Tensor], x: torch.Tensor,
                    masks: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """``x`` (K, M, n) -> (K, M, out). ``masks``: scaled dropout masks of the two hidden layers."""
    if x.shape[0] == 1:
        return _single_forward(params, x, masks)
    h = x
    for i in range(len(LAYERS)):
        w, b, a = params[3 * i: 3 * i + 3]
        h = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
        if masks is not None and i < len(masks):
            h = h * masks[i]  # Linear - Dropout - PReLU, as in the paper's network
        h = _prelu(h, a)
    return h


def _single_forward(params: Sequence[torch.Tensor], x: torch.Tensor,
                    masks: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """One model: 2-D ``addmm`` and contiguous PReLU, no batched-matmul layout copies."""
    h = x[0]
    for i in range(len(LAYERS)):
        w, b, a = params[3 * i: 3 * i + 3]
        h = torch.addmm(b[0], h, w[0].t())
        if masks is not None and i < len(masks):
            h = h * masks[i][0]
        h = F.prelu(h, a.reshape(-1))
    return h.unsqueeze(0)
