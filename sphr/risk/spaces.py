"""The representation G of each risk method, applied to the normalized cohort features.

Every method measures a Euclidean distance in some space Z = G(X), where X are
the per-sex quantile-normalized features of ``cohorts/<sex>/*.parquet``:

``raw_euclidean``
    G = identity on all kept features. **Decision**: the *normalized* features,
    not raw UKB units: the paper's "raw data (preprocessed but not transformed)"
    is the preprocessed matrix, and in raw units the distance would be decided
    by the fields with the largest numbers (MET minutes, platelet counts).
``mahalanobis``
    G(x) = x L with L L^T = Sigma^-1, so ||G(x) - G(y)|| is the Mahalanobis
    distance. Sigma: Ledoit-Wolf shrunk covariance of the sex's real BFH
    training rows, pooled over age groups (a group holds too few BFH members
    for a 60-dimensional covariance; shrinkage keeps it invertible).
``homeostatic_dysregulation``
    Cohen et al.'s homeostatic dysregulation (Cohen et al. 2013, Mech Ageing Dev
    134:110-117): the Mahalanobis distance to one *young* healthy reference
    for everyone, not to the person's age group: mean and Ledoit-Wolf covariance
    of the training BFH aged at most ``young_max_age`` (default 50), all features
    but age. ``mahalanobis`` above is *not* this measure (its reference is the
    person's own age group and its covariance is pooled over all ages), so both
    are reported under their own names.
``p0_euclidean``
    G = the normalized P0 markers (cholesterol, HDL, LDL, triglycerides,
    glucose, HbA1c, CRP), those the completeness filter kept.
``deep_patient``
    the fitted DeepPatient of ``RUN/baselines/<sex>/deep_patient/model.joblib``.
``sphr``
    the NPLB-trained SPHR network of ``RUN/train/<sex>/nplb/model.pt``, through
    ``sphr.train.load_model`` / ``sphr.train.embed`` (imported lazily).
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from sphr.cohorts.ranges import P0_RANGES
from sphr.errors import ConfigError, InputError

#: SPHR variants aimed at risk (docs/METHODS.md, "SPHR variants aimed at risk"): the same
#: network, another reference or a joint space (``sphr_joint`` is computed by default:
#: :data:`sphr.risk.config.SHIPPED_SPHR`)
SPHR_VARIANTS: tuple[str, ...] = ("sphr_age_line", "sphr_young", "sphr_joint")
#: the distance methods (a space G and a reference per age group)
METHODS: tuple[str, ...] = ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation",
                            "p0_euclidean", "deep_patient", "sphr", *SPHR_VARIANTS)
#: the paper's five; mode ``paper`` (Eq. A.4) is defined for these
PAPER_METHODS: tuple[str, ...] = ("raw_euclidean", "mahalanobis", "p0_euclidean", "deep_patient",
                                  "sphr")
DISPLAY: dict[str, str] = {
    "raw_euclidean": "Euclidean (raw)", "mahalanobis": "Mahalanobis (age-group BFH)",
    "homeostatic_dysregulation": "Homeostatic dysregulation",
    "p0_euclidean": "P0 (Euclidean)", "deep_patient": "DeepPatient", "sphr": "SPHR",
    "phenoage": "PhenoAge acceleration", "supervised_xgboost": "Supervised XGBoost (uses outcome)",
    "age": "Age alone", "sphr_age_line": "SPHR, age-line reference",
    "sphr_young": "SPHR, young reference", "sphr_joint": "SPHR + markers (shipped)",
}
P0_MARKERS: tuple[str, ...] = tuple(dict.fromkeys(r.marker for r in P0_RANGES))


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


class Space:
    """``fit`` on the BFH matrix (most spaces ignore it), ``transform`` any rows."""

    kind = "space"

    #: True when the space maps its own reference to the origin (one reference for all ages)
    origin_reference = False

    def fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> Space:
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        return {"kind": self.kind}


class Columns(Space):
    """Identity on a subset of the features (all of them for ``raw_euclidean``)."""

    kind = "columns"

    def __init__(self, features: list[str], columns: list[str]) -> None:
        missing = [c for c in columns if c not in features]
        if missing or not columns:
            raise ConfigError(f"columns {missing or columns} are not among the cohort features")
        self.columns = list(columns)
        self.index = np.array([features.index(c) for c in columns])

    def transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, np.float64)[:, self.index]

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        return {"kind": self.kind, "columns": self.columns}


class Whitening(Space):
    """Mahalanobis distance as a Euclidean distance after x -> x L."""

    kind = "whitening"

    def __init__(self, L: np.ndarray | None = None) -> None:
        self.L = L

    def fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> Whitening:
        from sklearn.covariance import LedoitWolf

        X = np.asarray(X, np.float64)
        if X.shape[0] < 2:
            raise InputError(f"need at least 2 BFH rows for a covariance, got {X.shape[0]}")
        lw = LedoitWolf().fit(X)
        self.covariance, self.shrinkage = lw.covariance_, float(lw.shrinkage_)
        self.L = np.linalg.cholesky(np.linalg.inv(self.covariance))
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, np.float64) @ self.L

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        np.save(directory / f"{method}_whitening.npy", self.L)
        return {"kind": self.kind, "file": f"{method}_whitening.npy",
                "shrinkage": getattr(self, "shrinkage", None)}


class Homeostatic(Space):
    """Homeostatic dysregulation: x -> (x - mu_young) L_young, so the distance to the origin
    is the Mahalanobis distance to the young reference (see the module docstring)."""

    kind = "homeostatic"
    origin_reference = True

    def __init__(self, features: list[str], young_max_age: float = 50.0,
                 mean: np.ndarray | None = None, L: np.ndarray | None = None) -> None:
        self.columns = [f for f in features if f != "age"]
        self.index = np.array([features.index(c) for c in self.columns])
        self.young_max_age = young_max_age
        self.mean, self.L = mean, L

    def fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> Homeostatic:
        from sklearn.covariance import LedoitWolf

        X = np.asarray(X, np.float64)[:, self.index]
        if ages is None:
            raise InputError("homeostatic dysregulation needs the ages of the reference rows",
                             field="age_years")
        young = np.asarray(ages, float) <= self.young_max_age
        if young.sum() < 10:  # too few young BFH: the youngest 10 stand in (recorded)
            young = np.argsort(np.asarray(ages, float), kind="stable")[:min(10, len(X))]
        ref = X[young]
        if ref.shape[0] < 2:
            raise InputError(f"need at least 2 young BFH rows for a covariance, got {ref.shape[0]}")
        lw = LedoitWolf().fit(ref)
        self.n_reference, self.shrinkage = int(ref.shape[0]), float(lw.shrinkage_)
        self.mean = lw.location_
        self.L = np.linalg.cholesky(np.linalg.inv(lw.covariance_))
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, np.float64)[:, self.index] - self.mean) @ self.L

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        np.savez(directory / f"{method}.npz", mean=self.mean, L=self.L)
        return {"kind": self.kind, "file": f"{method}.npz", "columns": self.columns,
                "young_max_age": self.young_max_age,
                "n_reference": getattr(self, "n_reference", None),
                "sha256": sha256(directory / f"{method}.npz")}


class Fitted(Space):
    """A fitted ``sphr.baselines`` representation (``.transform``)."""

    kind = "representation"

    def __init__(self, model: Any, source: Path | None = None) -> None:
        self.model, self.source = model, source

    def transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.transform(np.asarray(X, np.float32)), np.float64)

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        import joblib

        joblib.dump(self.model, directory / f"{method}.joblib")
        return {"kind": self.kind, "file": f"{method}.joblib", "source": str(self.source),
                "sha256": sha256(directory / f"{method}.joblib")}


class SphrNet(Space):
    """The SPHR network via the training stage's ``load_model`` / ``embed`` contract."""

    kind = "sphr"

    def __init__(self, path: Path, features: list[str], device: str = "auto") -> None:
        import torch

        train = _sphr_train()
        self.path, self.device = Path(path), device
        ckpt = torch.load(self.path, map_location="cpu", weights_only=False)
        names = list(ckpt.get("feature_names") or [])
        if names and names != list(features):
            raise InputError(f"SPHR was trained on other features than the cohort "
                             f"({len(names)} vs {len(features)})", file=self.path,
                             field="feature_names")
        self.model = train.load_model(self.path)

    def transform(self, X: np.ndarray) -> np.ndarray:
        Z = _sphr_train().embed(self.model, np.asarray(X, np.float32), device=self.device)
        return np.asarray(Z, np.float64)

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        shutil.copyfile(self.path, directory / "sphr.pt")
        return {"kind": self.kind, "file": "sphr.pt", "source": str(self.path),
                "sha256": sha256(directory / "sphr.pt")}


class AgeLine(Space):
    """``sphr_age_line``: G(x) minus the line of the embedded training BFH on (normalized) age,
    per embedding dimension, so the reference follows a person's own age."""

    kind = "age_line"
    origin_reference = True

    def __init__(self, inner: Space, features: list[str], coef: np.ndarray | None = None) -> None:
        if "age" not in features:
            raise ConfigError("sphr_age_line needs age among the cohort features")
        self.inner, self.age = inner, features.index("age")
        self.coef = coef  # (2, width): intercept and slope

    def fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> AgeLine:
        Z = self.inner.transform(X)
        A = np.column_stack([np.ones(len(X)), np.asarray(X, np.float64)[:, self.age]])
        self.coef = np.linalg.lstsq(A, Z, rcond=None)[0]
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        A = np.column_stack([np.ones(len(X)), np.asarray(X, np.float64)[:, self.age]])
        return self.inner.transform(X) - A @ self.coef

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        np.save(directory / f"{method}.npy", self.coef)
        return {"kind": self.kind, "file": f"{method}.npy", "inner": self.inner.save(directory, "sphr"),
                "sha256": sha256(directory / f"{method}.npy")}


class YoungReference(Space):
    """``sphr_young``: G(x) minus the median of the embedded training BFH aged at most
    ``young_max_age``: one young reference for everyone (homeostatic dysregulation's idea)."""

    kind = "young_reference"
    origin_reference = True

    def __init__(self, inner: Space, young_max_age: float = 50.0,
                 center: np.ndarray | None = None) -> None:
        self.inner, self.young_max_age, self.center = inner, young_max_age, center

    def fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> YoungReference:
        if ages is None:
            raise InputError("sphr_young needs the ages of the reference rows", field="age_years")
        young = np.asarray(ages, float) <= self.young_max_age
        if young.sum() < 10:  # too few young BFH: the youngest 10 stand in
            young = np.argsort(np.asarray(ages, float), kind="stable")[:min(10, len(X))]
        self.center = np.median(self.inner.transform(np.asarray(X)[young]), axis=0)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        return self.inner.transform(X) - self.center

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        np.save(directory / f"{method}.npy", self.center)
        return {"kind": self.kind, "file": f"{method}.npy", "young_max_age": self.young_max_age,
                "inner": self.inner.save(directory, "sphr"),
                "sha256": sha256(directory / f"{method}.npy")}


class Joint(Space):
    """``sphr_joint``: [G(x) / s_G, x / s_x], each part divided by the median distance of the
    training BFH to their own median in it, so the embedding and the markers weigh equally."""

    kind = "joint"

    def __init__(self, inner: Space, scales: np.ndarray | None = None) -> None:
        self.inner, self.scales = inner, scales

    def fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> Joint:
        X = np.asarray(X, np.float64)
        parts = (self.inner.transform(X), X)
        self.scales = np.array([np.median(np.linalg.norm(P - np.median(P, axis=0), axis=1))
                                for P in parts])
        self.scales = np.where(self.scales > 0, self.scales, 1.0)
        return self

    def transform(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, np.float64)
        return np.hstack([self.inner.transform(X) / self.scales[0], X / self.scales[1]])

    def save(self, directory: Path, method: str) -> dict[str, Any]:
        return {"kind": self.kind, "scales": self.scales.tolist(),
                "inner": self.inner.save(directory, "sphr")}


def _sphr_train():
    import importlib

    try:  # import_module reads sys.modules, so a stand-in module works in tests
        train = importlib.import_module("sphr.train")
    except ImportError as exc:
        raise ConfigError(f"the SPHR method needs sphr.train ({exc})") from None
    return train


def p0_columns(features: list[str]) -> list[str]:
    return [m for m in P0_MARKERS if m in features]


def build_space(method: str, features: list[str], *, run: Path | None = None,
                sex: str | None = None, device: str = "auto") -> Space:
    """An unfitted space for ``method``; deep methods are read from the run directory."""
    if method == "raw_euclidean":
        return Columns(features, list(features))
    if method == "p0_euclidean":
        return Columns(features, p0_columns(features))
    if method == "mahalanobis":
        return Whitening()
    if method == "homeostatic_dysregulation":
        return Homeostatic(features)
    if method in ("deep_patient", "sphr", *SPHR_VARIANTS) and (run is None or sex is None):
        raise ConfigError(f"method {method} needs the run directory and sex")
    if method == "deep_patient":
        from sphr.baselines.pipeline import load_representation
        from sphr.layout import baselines_dir

        rep = baselines_dir(run, sex) / "deep_patient"
        return Fitted(load_representation(rep), rep / "model.joblib")
    if method == "sphr" or method in SPHR_VARIANTS:
        from sphr.layout import train_dir

        path = train_dir(run, sex) / "model.pt"
        if not path.exists():
            raise InputError("missing SPHR model (run `sphr train`)", file=path)
        net = SphrNet(path, features, device)
        if method == "sphr_age_line":
            return AgeLine(net, features)
        if method == "sphr_young":
            return YoungReference(net)
        return Joint(net) if method == "sphr_joint" else net
    raise ConfigError(f"unknown risk method {method!r}: choose from {', '.join(METHODS)}")


def _checked(spec: dict[str, Any], directory: Path) -> Path:
    """The saved file of a space, present and unchanged since the fit (checksum)."""
    path = directory / spec.get("file", "")
    if not path.is_file():
        raise InputError("missing risk model file", file=path)
    if spec.get("sha256") and sha256(path) != spec["sha256"]:
        raise InputError("file changed since the risk model was fitted (checksum)", file=path)
    return path


def load_space(spec: dict[str, Any], directory: Path, features: list[str],
               device: str = "auto") -> Space:
    """Rebuild a space saved by ``Space.save`` (for ``sphr score``), checking checksums."""
    kind = spec["kind"]
    if kind == "columns":
        return Columns(features, spec["columns"])
    if kind == "joint":
        return Joint(load_space(spec["inner"], directory, features, device),
                     np.asarray(spec["scales"], float))
    if kind in ("age_line", "young_reference"):
        inner = load_space(spec["inner"], directory, features, device)
        arr = np.load(_checked(spec, directory))
        return AgeLine(inner, features, arr) if kind == "age_line" else \
            YoungReference(inner, spec["young_max_age"], arr)
    path = _checked(spec, directory)
    if kind == "whitening":
        return Whitening(np.load(path))
    if kind == "homeostatic":
        with np.load(path) as arrays:
            return Homeostatic(features, spec["young_max_age"], arrays["mean"], arrays["L"])
    if kind == "representation":
        import joblib

        return Fitted(joblib.load(path), path)
    if kind == "sphr":
        return SphrNet(path, features, device)
    raise InputError(f"unknown space kind {kind!r}", file=directory)
