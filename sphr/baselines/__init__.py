"""Baseline representations R^n -> R^32: raw, PCA, ICA, DiffMap, DeepPatient.

Each is an sklearn-style estimator (``fit(X)`` on training rows, ``transform(X)``
for anyone, explicit ``random_state``). :func:`make_representation` builds one by
name; :mod:`sphr.baselines.pipeline` fits them on a cohort folder and writes
``RUN/baselines/<sex>/<name>/embeddings_{train,test}.parquet``. SPHR itself
comes from the training stage (``RUN/train/<sex>/nplb``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sphr import lazy_exports
from sphr.baselines.config import BASELINES
from sphr.errors import ConfigError

if TYPE_CHECKING:
    from sphr.baselines.base import Representation

#: every representation in the tables; ``sphr`` is read from the training stage
REPRESENTATIONS: tuple[str, ...] = (*BASELINES, "sphr")
#: how the paper's tables name them
DISPLAY_NAMES: dict[str, str] = {
    "raw": "Not transformed", "pca": "PCA", "ica": "ICA", "diffmap": "DiffMap",
    "deep_patient": "DeepPatient", "sphr": "SPHR",
}


def make_representation(name: str, *, n_components: int = 32, random_state: int = 0,
                        device: str = "auto", **params: Any) -> Representation:
    """A fresh, unfitted representation; ``params`` override that class's defaults."""
    if name == "raw":
        from sphr.baselines.base import Raw

        return Raw(random_state=random_state, **params)
    if name == "pca":
        from sphr.baselines.linear import PCA

        return PCA(n_components=n_components, random_state=random_state, **params)
    if name == "ica":
        from sphr.baselines.linear import ICA

        return ICA(n_components=n_components, random_state=random_state, **params)
    if name == "diffmap":
        from sphr.baselines.diffmap import DiffMap

        return DiffMap(n_components=n_components, random_state=random_state, **params)
    if name == "deep_patient":
        from sphr.baselines.deep_patient import DeepPatient

        hidden = params.pop("hidden", (500, 500, n_components))
        return DeepPatient(hidden=tuple(hidden), random_state=random_state, device=device,
                           **params)
    raise ConfigError(f"unknown representation {name!r}: choose from {', '.join(BASELINES)}")


# sklearn-backed base class, imported on first use so the CLI starts fast
__getattr__ = lazy_exports(__name__, {"sphr.baselines.base": ("Representation",)})


__all__ = ["BASELINES", "DISPLAY_NAMES", "REPRESENTATIONS", "Representation",
           "make_representation"]
