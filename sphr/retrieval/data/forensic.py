"""A synthetic forensic-matching set: knee-like radiographs of subjects at baseline and follow-ups.

Each subject has a fixed anatomy drawn from a seeded shape model (femoral
condyles and notch, tibial plateau and spines, fibula, patella, shaft and
flare widths, trabecular texture, bone islands) and a subject-specific
progression over the years: joint-space narrowing (medial faster than
lateral), subchondral sclerosis, growing osteophytes, bone density loss and a
slow drift of the trabecular texture. Every image adds acquisition
variation: pose (rotation, shift, scale), soft tissue, exposure, gamma, blur
and noise. The task is the AdaTriplet one: given a follow-up image, find the
same subject's baseline image among all baselines.

Deterministic: subject ``s`` and visit ``v`` draw from ``default_rng([seed, s, v, ...])``,
so the set depends only on the seed and the sizes, not on generation order.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy import ndimage

from sphr.retrieval.data.core import ImageSet, RetrievalData, split_by_group


@dataclass(frozen=True)
class ForensicConfig:
    n_subjects: int = 300
    years: tuple[float, ...] = (0.0, 1.0, 2.0, 4.0, 8.0)
    size: int = 64
    #: share of follow-up visits that are missing (the baseline is always there)
    missing_rate: float = 0.1
    #: scales acquisition variation and progression speed together
    difficulty: float = 1.0
    seed: int = 0


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -30, 30)))


def _field(rng: np.random.Generator, size: int, sigma: float) -> np.ndarray:
    """Smoothed white noise with unit standard deviation (trabecular-like texture)."""
    f = ndimage.gaussian_filter(rng.standard_normal((size, size)), sigma, mode="wrap")
    return f / (f.std() + 1e-8)


def _subject(seed: int, s: int, size: int) -> dict:
    r = np.random.default_rng([seed, s, 7919])
    k = size / 64.0
    p = {
        "cx": size / 2 + r.normal(0, 1.0) * k,
        "y0": size / 2 + r.normal(0, 1.5) * k,
        "wf": r.uniform(8, 12) * k, "wf_flare": r.uniform(3, 8) * k, "lf": r.uniform(8, 14) * k,
        "wt": r.uniform(8, 12) * k, "wt_flare": r.uniform(3, 8) * k, "lt": r.uniform(8, 14) * k,
        "notch_h": r.uniform(1.5, 4.0) * k, "notch_w": r.uniform(2.0, 4.0) * k,
        "round_f": r.uniform(0.01, 0.03) / k, "asym": r.normal(0, 1.0) * k,
        "plateau": r.uniform(0.0, 0.015) / k, "tilt": r.normal(0, 0.06),
        "spine_h": r.uniform(1.0, 3.0) * k,
        "fib_side": r.choice([-1.0, 1.0]), "fib_in": r.uniform(0, 3) * k,
        "fib_top": r.uniform(7, 12) * k,
        "fib_w": r.uniform(1.8, 3.0) * k,
        "pat_dx": r.normal(0, 2) * k, "pat_dy": r.uniform(8, 14) * k, "pat_rx": r.uniform(5, 8) * k,
        "pat_ry": r.uniform(4, 6) * k, "pat_i": r.uniform(0.05, 0.15),
        "rho": r.uniform(0.35, 0.55), "cortex": r.uniform(0.1, 0.2),
        "tex_sigma": r.uniform(1.0, 2.0) * k, "tex_amp": r.uniform(0.08, 0.18),
        "jsw_med": r.uniform(3.5, 6.5) * k, "jsw_lat": r.uniform(3.5, 6.5) * k,
        # progression, per year
        "narrow_med": r.uniform(0, 0.35) * k, "narrow_lat": r.uniform(0, 0.15) * k,
        "sclerosis": r.uniform(0, 0.04), "osteo_rate": r.uniform(0, 0.35) * k,
        "density_loss": r.uniform(0, 0.02), "tex_drift": r.uniform(0.01, 0.04),
    }
    p["texture"] = _field(r, size, p["tex_sigma"])
    n_islands = 1 + r.poisson(2)
    p["islands"] = [
        (
            p["cx"] + r.uniform(-10, 10) * k,
            p["y0"] + r.choice([-1, 1]) * r.uniform(4, 14) * k,
            r.uniform(1.0, 2.5) * k,
            r.choice([-1, 1]) * r.uniform(0.1, 0.25),
        )
        for _ in range(n_islands)
    ]
    n_osteo = r.integers(1, 5)
    p["osteophytes"] = [
        (
            p["cx"] + r.choice([-1, 1]) * (p["wf"] + p["wf_flare"] + r.uniform(-1, 1) * k),
            p["y0"] + r.choice([-1, 1]) * r.uniform(1, 4) * k,
        )
        for _ in range(n_osteo)
    ]
    return p


def _anatomy(p: dict, t: float, u: np.ndarray, v: np.ndarray, texture: np.ndarray,
             speed: float) -> np.ndarray:
    """Bone image at year t, evaluated at anatomy coordinates (u, v)."""
    cx, y0 = p["cx"], p["y0"]
    du = u - cx
    side = _sig(du / 1.5)  # 0 medial (left), 1 lateral (right)
    jsw_med = max(0.5, p["jsw_med"] - speed * p["narrow_med"] * t)
    jsw_lat = max(0.5, p["jsw_lat"] - speed * p["narrow_lat"] * t)
    jsw = jsw_med * (1 - side) + jsw_lat * side
    y_f = (y0 - jsw / 2 - p["notch_h"] * np.exp(-(du / p["notch_w"]) ** 2)
           - p["round_f"] * du ** 2 + p["asym"] * np.tanh(du / 4))
    w_f = p["wf"] + p["wf_flare"] * _sig((v - (y0 - p["lf"])) / 3)
    femur = _sig((y_f - v) / 0.7) * _sig((w_f - np.abs(du)) / 0.7)
    y_t = (y0 + jsw / 2 + p["plateau"] * du ** 2 + p["tilt"] * du
           - p["spine_h"] * np.exp(-(du / 2.0) ** 2))
    w_t = p["wt"] + p["wt_flare"] * _sig(((y0 + p["lt"]) - v) / 3)
    tibia = _sig((v - y_t) / 0.7) * _sig((w_t - np.abs(du)) / 0.7)
    xf = cx + p["fib_side"] * (p["wt"] + p["wt_flare"] - p["fib_in"])
    fibula = _sig((v - (y0 + p["fib_top"])) / 0.7) * _sig((p["fib_w"] - np.abs(u - xf)) / 0.6)
    bone = np.clip(femur + tibia + fibula, 0, 1)
    # Cortex: the soft masks' edge band (m(1-m) peaks on the boundary) is drawn brighter.
    rim = 4 * (femur * (1 - femur) + tibia * (1 - tibia) + fibula * (1 - fibula))
    density = p["rho"] * (1 - speed * p["density_loss"] * t)
    img = bone * density * (1 + p["tex_amp"] * texture) + p["cortex"] * np.clip(rim, 0, 1)
    # subchondral sclerosis: a band next to both joint surfaces gets denser with time
    band = np.exp(-((v - y_f) / 3.0) ** 2) * femur + np.exp(-((v - y_t) / 3.0) ** 2) * tibia
    img += speed * p["sclerosis"] * t * band
    for ix, iy, rad, inten in p["islands"]:
        img += inten * bone * np.exp(-((u - ix) ** 2 + (v - iy) ** 2) / (2 * rad ** 2))
    osteo_r = speed * p["osteo_rate"] * t
    if osteo_r > 0.2:
        for ox, oy in p["osteophytes"]:
            img += 0.5 * density * _sig((osteo_r - np.hypot(u - ox, v - oy)) / 0.6)
    pat = ((u - cx - p["pat_dx"]) / p["pat_rx"]) ** 2 + ((v - y0 + p["pat_dy"]) / p["pat_ry"]) ** 2
    img += p["pat_i"] * _sig((1 - pat) / 0.15)
    return img


def _render(cfg: ForensicConfig, p: dict, s: int, visit: int, t: float) -> np.ndarray:
    size, d = cfg.size, cfg.difficulty
    k = size / 64.0
    r = np.random.default_rng([cfg.seed, s, visit, 104729])
    # slow texture drift: part of the trabecular pattern is replaced as years pass
    w = min(1.0, d * p["tex_drift"] * t)
    texture = math.sqrt(1 - w) * p["texture"] + math.sqrt(w) * _field(r, size, p["tex_sigma"])
    # pose: output pixel (x, y) shows anatomy point R^-1 ((x, y) - c - shift) / scale + c
    ang = math.radians(r.normal(0, 4.0 * d))
    shift = r.normal(0, 2.0 * d, size=2) * k
    scale = math.exp(r.normal(0, 0.04 * d))
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    c = size / 2
    x0, y0 = (xx - c - shift[0]) / scale, (yy - c - shift[1]) / scale
    u = math.cos(ang) * x0 + math.sin(ang) * y0 + c
    v = -math.sin(ang) * x0 + math.cos(ang) * y0 + c
    tex = ndimage.map_coordinates(texture, [v - 0.5, u - 0.5], order=1, mode="wrap")
    img = _anatomy(p, t, u, v, tex, d)
    # soft tissue around the joint and a background level
    tissue = r.uniform(0.08, 0.2) * _sig((r.uniform(18, 26) * k - np.abs(u - p["cx"])) / (4 * k))
    img = img + tissue + r.uniform(0.03, 0.12)
    # exposure, gamma, blur, noise
    img = r.uniform(1 - 0.2 * d, 1 + 0.2 * d) * img + r.normal(0, 0.05 * d)
    img = np.clip(img, 0, None) ** math.exp(r.normal(0, 0.2 * d))
    img = ndimage.gaussian_filter(img, r.uniform(0.4, 0.4 + 0.8 * d) * k)
    img = img + r.normal(0, 1, img.shape) * r.uniform(0.02, 0.02 + 0.05 * d)
    return np.clip(img * 255.0, 0, 255).astype(np.uint8)


def generate_forensic(
        cfg: ForensicConfig = ForensicConfig()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All images ``(N, size, size)`` uint8, subject ids ``(N,)`` and
    years ``(N,)``, subject-major."""
    images, subjects, years = [], [], []
    for s in range(cfg.n_subjects):
        p = _subject(cfg.seed, s, cfg.size)
        keep = (
            np.random.default_rng([cfg.seed, s, 15485863]).random(len(cfg.years))
            >= cfg.missing_rate
        )
        for visit, t in enumerate(cfg.years):
            if t > 0 and not keep[visit]:
                continue
            images.append(_render(cfg, p, s, visit, float(t)))
            subjects.append(s)
            years.append(float(t))
    return (np.stack(images), np.asarray(subjects, dtype=np.int64),
            np.asarray(years, dtype=np.float64))


def load_forensic_data(cfg: ForensicConfig = ForensicConfig(), *, test_fraction: float = 0.3,
                       split_seed: int = 0) -> RetrievalData:
    """The synthetic set split by subject: train on all visits of 70% of
    subjects, test on the rest."""
    images, subjects, years = generate_forensic(cfg)
    test = split_by_group(subjects, test_fraction, split_seed)
    tensor = torch.from_numpy(images[:, None])

    def part(mask: np.ndarray) -> ImageSet:
        idx = np.flatnonzero(mask)
        return ImageSet(tensor[torch.from_numpy(idx)], subjects[idx], years[idx])

    info = {"source": "sphr synthetic forensic generator", **asdict(cfg), "images": len(subjects),
            "test_fraction": test_fraction, "split_seed": split_seed}
    return RetrievalData(name="forensic", level="subject", train=part(~test), test=part(test),
                         channels=1, native_size=cfg.size, info=info)
