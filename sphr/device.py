"""Where torch work runs: one rule for SPHR, DeepPatient, NN for EHR and retrieval."""

from __future__ import annotations

import os

import torch


def resolve_device(spec: str | torch.device = "auto") -> torch.device:
    """``auto`` picks CUDA when present, else CPU; ``cuda`` without a GPU is an error."""
    if isinstance(spec, torch.device):
        return spec
    spec = str(spec).lower()
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        from sphr.errors import ConfigError

        raise ConfigError(f"device {spec!r} asked for, but torch sees no CUDA device")
    if spec not in {"cpu"} and not spec.startswith("cuda"):
        from sphr.errors import ConfigError

        raise ConfigError(f"unknown device {spec!r}: use auto, cpu or cuda[:N]")
    return torch.device(spec)


def configure_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads; ``None`` uses ``OMP_NUM_THREADS`` when set (a process
    sharing the machine, e.g. one of two sex partitions run side by side), else the cores
    this process may run on."""
    if (threads is None or threads <= 0) and os.environ.get("OMP_NUM_THREADS", "").isdigit():
        threads = int(os.environ["OMP_NUM_THREADS"])
    if threads is None or threads <= 0:
        try:
            threads = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            threads = os.cpu_count() or 1
    torch.set_num_threads(int(threads))
    return int(threads)


def seed_everything(seed: int) -> None:
    """Seed torch's CPU and CUDA generators (numpy code takes explicit Generators)."""
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def fast_settings(device: str | torch.device = "auto") -> dict[str, object]:
    """The fastest training settings this machine runs natively: ``precision`` and ``compile``.

    bf16 where the hardware has native bf16 matmuls (recent GPUs; CPUs with
    AVX512-BF16 or AMX, where it is ~4x fp32 matmul throughput); ``torch.compile``
    on CUDA, and on the CPU when a C++ compiler is there for inductor's kernels.
    """
    dev = resolve_device(device)
    if dev.type == "cuda":
        return {"precision": "bf16" if torch.cuda.is_bf16_supported() else "tf32",
                "compile": True}
    try:
        bf16 = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        bf16 = False
    return {"precision": "bf16" if bf16 else "fp32",
            "compile": cpu_compiler_found()}


def cpu_compiler_found() -> bool:
    """Whether a C++ compiler is on PATH: torch.compile builds its CPU kernels with one."""
    import shutil

    return any(shutil.which(c) for c in ("g++", "c++", "clang++"))
