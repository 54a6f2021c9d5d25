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


class SPHREnsemble(nn.Module):
    """K SPHR networks trained from K seeds as one model (docs/METHODS.md, "SPHR's stability
    from fit to fit", remedy R2): the embedding is the members' embeddings side by side, each
    divided by sqrt(K), so a Euclidean distance in it is the root mean square of the members'
    distances, and a coordinate-wise reference (a median) is the members' references side by
    side."""

    def __init__(self, members: list[SPHRNet]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one member")
        first = members[0]
        if any((m.n_features, m.out) != (first.n_features, first.out) for m in members):
            raise ValueError("ensemble members must have the same input and output widths")
        self.members = nn.ModuleList(members)
        self.n_features, self.dropout = first.n_features, first.dropout
        self.out = first.out * len(members)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(len(self.members)) ** -0.5
        return torch.cat([m(x) for m in self.members], dim=1) * scale

