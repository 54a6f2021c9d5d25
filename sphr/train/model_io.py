"""Saving, loading and applying a trained SPHR model (``model.pt``)."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from sphr.device import resolve_device
from sphr.errors import InputError
from sphr.io import write_bytes
from sphr.models import SPHREnsemble, SPHRNet

MODEL_FILE = "model.pt"


def _config_dict(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if dataclasses.is_dataclass(config):
        return dataclasses.asdict(config)
    return dict(config)


def save_model(model: SPHRNet | SPHREnsemble, config: Any, feature_names: Sequence[str],
               path: str | Path) -> Path:
    """Write ``{"state_dict", "config", "feature_names", "n_features"}`` atomically (an
    ensemble adds ``members``, its member count).

    ``path`` is the file or a folder (then ``folder/model.pt``).
    """
    path = Path(path)
    if path.suffix != ".pt":
        path = path / MODEL_FILE
    names = [str(f) for f in feature_names]
    if len(names) != model.n_features:
        raise ValueError(f"{len(names)} feature names for a model with {model.n_features} inputs")
    obj = {"state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
           "config": _config_dict(config), "feature_names": names,
           "n_features": int(model.n_features), "out": int(model.out),
           "dropout": float(model.dropout)}
    if isinstance(model, SPHREnsemble):
        obj["members"] = len(model.members)
    buf = io.BytesIO()
    torch.save(obj, buf)
    return write_bytes(buf.getvalue(), path)


def load_checkpoint(path: str | Path) -> tuple[SPHRNet, dict[str, Any]]:
    """The network saved by :func:`save_model` (a file or its folder), on the CPU in eval mode,
    and the file's other entries (``config``, ``feature_names``, ...)."""
    path = Path(path)
    if path.is_dir():
        path = path / MODEL_FILE
    if not path.exists():
        raise InputError("missing SPHR model (run `sphr train`)", file=path)
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
        state = obj["state_dict"]
        net = _network(obj, state)
        net.load_state_dict(state)
    except (KeyError, RuntimeError, TypeError, AttributeError) as exc:
        raise InputError(f"not an SPHR model file ({exc})", file=path) from exc
    return net.eval(), {k: v for k, v in obj.items() if k != "state_dict"}


def _network(obj: dict[str, Any], state: dict[str, torch.Tensor]) -> SPHRNet | SPHREnsemble:
    """An empty network of the saved shape: one SPHRNet, or an ensemble of ``members``."""
    dropout = float(obj.get("dropout", 0.1))
    members = int(obj.get("members") or 0)
    if members:
        n = int(obj["n_features"])
        out = int(obj["out"]) // members
        return SPHREnsemble([SPHRNet(n, out=out, dropout=dropout) for _ in range(members)])
    n = int(obj.get("n_features") or state["net.0.weight"].shape[1])
    out = int(obj.get("out") or state["net.6.weight"].shape[0])
    return SPHRNet(n, out=out, dropout=dropout)


def load_model(path: str | Path) -> SPHRNet:
    """The model saved by :func:`save_model` (a file or its folder), on the CPU in eval mode."""
    return load_checkpoint(path)[0]


def embed(model: SPHRNet, X: np.ndarray, device: str | torch.device = "auto",
          batch_size: int = 65_536) -> np.ndarray:
    """Embeddings ``(rows, out)`` float32 of ``X`` (eval mode: no dropout)."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    if X.ndim != 2 or X.shape[1] != model.n_features:
        raise InputError(f"expected a (rows, {model.n_features}) matrix, got {X.shape}")
    dev = resolve_device(device)
    home = next(model.parameters()).device
    was_training = model.training
    model.eval().to(dev)
    try:
        out = np.empty((X.shape[0], model.out), dtype=np.float32)
        with torch.inference_mode():
            for s in range(0, X.shape[0], batch_size):
                xb = torch.from_numpy(X[s:s + batch_size]).to(dev, non_blocking=True)
                out[s:s + batch_size] = model(xb).float().cpu().numpy()
    finally:
        model.to(home).train(was_training)
    return out
