"""Embedding networks in plain torch: a small CNN, ResNet-18 (no torchvision), an
L2-normalized head.

ResNet-18 uses torchvision's parameter names, so a torchvision ``resnet18``
state dict saved to a local file loads as it is (``weights=PATH``); nothing
is downloaded. For grey inputs the RGB ``conv1`` kernels are summed over
their input channels, which gives a grey image the response the RGB network
gives the same image repeated on three channels.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from sphr.errors import ConfigError, InputError

BACKBONES: tuple[str, ...] = ("small_cnn", "resnet18")


def _conv_bn(c_in: int, c_out: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out),
                         nn.ReLU(inplace=True))


class SmallCNN(nn.Module):
    """Four 3x3 conv layers (stride-2 stem, two max-pools), pooled to ``pool x pool``.

    About 17 M multiply-adds for a 64x64 image, so the embedded sets train in
    CPU-minutes. Keeping a 2x2 spatial grid (not global pooling) leaves the
    head some layout information, which subject matching uses.
    """

    def __init__(self, in_channels: int = 1, width: int = 32, pool: int = 2) -> None:
        super().__init__()
        w = width
        self.features = nn.Sequential(
            _conv_bn(in_channels, w * 3 // 4, stride=2),
            _conv_bn(w * 3 // 4, w), nn.MaxPool2d(2),
            _conv_bn(w, 2 * w), nn.MaxPool2d(2),
            _conv_bn(2 * w, 4 * w),
        )
        self.pool = pool
        self.out_features = 4 * w * pool * pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(F.adaptive_avg_pool2d(self.features(x), self.pool), 1)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, c_in: int, c_out: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample: nn.Module | None = None
        if stride != 1 or c_in != c_out:
            self.downsample = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False),
                                            nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """ResNet-18 (He et al. 2016) feature extractor, torchvision layout,
    global average pooled (512)."""

    def __init__(self, in_channels: int = 3) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = nn.Sequential(BasicBlock(64, 64), BasicBlock(64, 64))
        self.layer2 = nn.Sequential(BasicBlock(64, 128, 2), BasicBlock(128, 128))
        self.layer3 = nn.Sequential(BasicBlock(128, 256, 2), BasicBlock(256, 256))
        self.layer4 = nn.Sequential(BasicBlock(256, 512, 2), BasicBlock(512, 512))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.out_features = 512
        for m in self.modules():  # torchvision's initialization
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return torch.flatten(self.avgpool(x), 1)


def load_resnet_weights(model: ResNet18, path: str | Path) -> list[str]:
    """Load a torchvision-style ResNet-18 state dict from a local file;
    returns the keys ignored (fc.*)."""
    path = Path(path)
    if not path.exists():
        raise InputError("weights file not found", file=path)
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    state = {k.removeprefix("module.").removeprefix("backbone."): v for k, v in state.items()}
    ignored = [k for k in state if k.startswith("fc.")]
    state = {k: v for k, v in state.items() if not k.startswith("fc.")}
    w = state.get("conv1.weight")
    c_in = model.conv1.weight.shape[1]
    if w is not None and w.shape[1] != c_in:
        if c_in == 1 and w.shape[1] == 3:
            state["conv1.weight"] = w.sum(1, keepdim=True)
        else:
            raise InputError(f"conv1 has {w.shape[1]} input channels, the model {c_in}", file=path,
                             field="conv1.weight")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise InputError(f"not a ResNet-18 state dict: missing {missing[:3]}..., unexpected "
                         f"{unexpected[:3]}...", file=path)
    return ignored


class EmbeddingNet(nn.Module):
    """backbone -> (dropout) -> Linear(features, dim) -> L2 normalization.

    ``code_bits`` adds one Linear(features, S) head per code length S (OCAM's
    S-output layer, Eq. 2: the code is the sign of the output); ``detach_codes``
    feeds them detached features, so they learn without moving the backbone.
    """

    def __init__(self, backbone: nn.Module, dim: int = 128, dropout: float = 0.0, *,
                 code_bits: tuple[int, ...] = (), detach_codes: bool = True) -> None:
        super().__init__()
        self.backbone = backbone
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.head = nn.Linear(backbone.out_features, dim)  # type: ignore[arg-type]
        self.dim = dim
        self.code_bits = tuple(int(b) for b in code_bits)
        self.detach_codes = detach_codes
        self.code_heads = nn.ModuleDict({
            str(b): nn.Linear(backbone.out_features, b)  # type: ignore[arg-type]
            for b in self.code_bits})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.head(self.dropout(self.backbone(x))), dim=1)

    def forward_all(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[int, torch.Tensor]]:
        """The D-d embedding and, per code length S, the L2-normalized S-d head output (its
        sign: the code)."""
        f = self.dropout(self.backbone(x))
        emb = F.normalize(self.head(f), dim=1)
        fc = f.detach() if self.detach_codes else f
        return emb, {int(b): F.normalize(h(fc), dim=1) for b, h in self.code_heads.items()}


def build_model(backbone: str = "small_cnn", *, in_channels: int = 1, dim: int = 128,
                weights: str | Path | None = None, width: int = 32, dropout: float = 0.0,
                code_bits: tuple[int, ...] = (), detach_codes: bool = True) -> EmbeddingNet:
    """An embedding network; ``weights`` (ResNet-18 only) is a local state-dict file;
    ``code_bits``: S-output code heads (see :class:`EmbeddingNet`)."""
    if backbone == "small_cnn":
        if weights is not None:
            raise ConfigError("weights can only be loaded into resnet18")
        net: nn.Module = SmallCNN(in_channels, width=width)
    elif backbone == "resnet18":
        net = ResNet18(in_channels)
        if weights is not None:
            load_resnet_weights(net, weights)  # type: ignore[arg-type]
    else:
        raise ConfigError(f"unknown backbone {backbone!r}: use one of {', '.join(BACKBONES)}")
    return EmbeddingNet(net, dim=dim, dropout=dropout, code_bits=code_bits,
                        detach_codes=detach_codes)
