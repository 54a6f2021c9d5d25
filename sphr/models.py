"""The SPHR network (the paper's Appendix K.1; docs/METHODS.md).

``Linear(n, 512) - Dropout - PReLU - Linear(512, 256) - Dropout - PReLU -
Linear(256, 32) - PReLU``. The trainer does not call this module's forward
while training (it runs a stacked, functional copy so several models can
train at once, see :mod:`sphr.train.stacked`); it is the form that is saved,
loaded and used to embed.
"""

from __future__ import annotations

import torch
from torch import nn

#: hidden widths of the paper's network
HIDDEN: tuple[int, int] = (512, 256)


class SPHRNet(nn.Module):
    """The SPHR MLP: ``n_features`` -> 512 -> 256 -> ``out`` with PReLU and dropout."""

    def __init__(self, n_features: int, out: int = 32, dropout: float = 0.1) -> None:
        super().__init__()
        if n_features < 1 or out < 1:
            raise ValueError(f"n_features and out must be positive, got {n_features}, {out}")
        self.n_features, self.out, self.dropout = int(n_features), int(out), float(dropout)
        h1, h2 = HIDDEN
        self.net = nn.Sequential(
            nn.Linear(n_features, h1), nn.Dropout(dropout), nn.PReLU(),
            nn.Linear(h1, h2), nn.Dropout(dropout), nn.PReLU(),
            nn.Linear(h2, out), nn.PReLU(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    @property
    def linears(self) -> list[nn.Linear]:
        return [m for m in self.net if isinstance(m, nn.Linear)]

    @property
    def prelus(self) -> list[nn.PReLU]:
        return [m for m in self.net if isinstance(m, nn.PReLU)]
