"""Batch image transforms in plain torch (no torchvision), run on the training device.

The AdaTriplet authors' training stream (solt) is: resize to 280, noise
(p 0.5, gain 0.3), rotation +-10 degrees, random crop 256, gamma correction
(p 0.5, gamma 0.5-1.5); at test time resize 280 and centre crop 256. Here the
geometric steps (resize, rotation, crop) are folded into one affine
``grid_sample`` per batch, so any input size maps to ``image_size`` in one
bilinear resampling, with the crop covering ``crop_fraction`` (256/280) of the
field of view. Noise is a per-image blend with uniform noise,
``(1 - g) x + g u`` with g ~ U(0, gain) (our reading of solt's gain).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

#: ImageNet statistics (grey: their channel mean): optional pretrained weights see familiar
#: inputs
_MEAN = {1: (0.449,), 3: (0.485, 0.456, 0.406)}
_STD = {1: (0.226,), 3: (0.229, 0.224, 0.225)}


@dataclass
class BatchTransform:
    """uint8 ``(B, C, h, w)`` -> normalized float ``(B, C, image_size, image_size)``."""

    image_size: int
    train: bool = False
    crop_fraction: float = 256 / 280
    noise_p: float = 0.5
    noise_gain: float = 0.3
    rotation_deg: float = 10.0
    gamma_p: float = 0.5
    gamma_range: tuple[float, float] = (0.5, 1.5)

    def __call__(self, images: torch.Tensor,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
        b, c = x.shape[:2]
        dev = x.device

        def rand(*shape: int) -> torch.Tensor:
            return torch.rand(*shape, generator=generator, device=dev)

        s = self.crop_fraction
        if self.train:
            angle = (rand(b) * 2 - 1) * math.radians(self.rotation_deg)
            # the crop window may sit anywhere inside the (resized) image
            shift = (rand(b, 2) * 2 - 1) * (1 - s)
        else:
            angle = torch.zeros(b, device=dev)
            shift = torch.zeros(b, 2, device=dev)
        cos, sin = torch.cos(angle) * s, torch.sin(angle) * s
        theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1),
                             torch.stack([sin, cos, shift[:, 1]], 1)], 1)
        grid = F.affine_grid(theta, [b, c, self.image_size, self.image_size], align_corners=False)
        # Downsampling a large input by grid_sample alone aliases; pre-shrink with area averaging.
        if x.shape[-1] > 2 * self.image_size or x.shape[-2] > 2 * self.image_size:
            x = F.interpolate(x, size=(2 * self.image_size, 2 * self.image_size), mode="area")
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        if self.train:
            if self.noise_p > 0:
                gain = rand(b, 1, 1, 1) * self.noise_gain * (rand(b, 1, 1, 1) < self.noise_p)
                x = (1 - gain) * x + gain * rand(*x.shape)
            if self.gamma_p > 0:
                lo, hi = self.gamma_range
                gamma = lo + (hi - lo) * rand(b, 1, 1, 1)
                gamma = torch.where(rand(b, 1, 1, 1) < self.gamma_p, gamma, torch.ones_like(gamma))
                x = x.clamp(0, 1) ** gamma
        mean = torch.tensor(_MEAN.get(c, (0.5,) * c), device=dev).view(1, c, 1, 1)
        std = torch.tensor(_STD.get(c, (0.25,) * c), device=dev).view(1, c, 1, 1)
        return (x - mean) / std


def to_display(images: torch.Tensor) -> torch.Tensor:
    """uint8 or float images -> float in [0, 1], ``(B, H, W, C)``, for plotting."""
    x = images.float() / 255.0 if images.dtype == torch.uint8 else images.float()
    return x.clamp(0, 1).permute(0, 2, 3, 1)
