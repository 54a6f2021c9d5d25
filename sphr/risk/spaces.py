"""The representation G of each risk method, applied to the cohort features.

Every method measures a Euclidean distance in some space Z = G(X), where X are the per-sex
features of ``cohorts/<sex>/*.parquet`` (quantile-normalized, or in the marker space:
``RiskConfig.distance_space``). Each G is a representation (:mod:`sphr.representation`:
``fit`` / ``transform``, ``n_features_in_``), fitted by :class:`~sphr.risk.distance.DistanceModel`
on the rows the method says: the real bona fide healthy (BFH) training rows, and for the
young references their ages (``fit(X, ages=...)``). ``transform`` keeps float64.

``raw_euclidean``
    :class:`ColumnSelector` on all kept features. **Decision**: the *normalized* features,
    not raw UKB units: the paper's "raw data (preprocessed but not transformed)" is the
    preprocessed matrix, and in raw units the distance would be decided by the fields with
    the largest numbers (MET minutes, platelet counts).
``mahalanobis``
    :class:`Whitening`: G(x) = x L with L L^T = Sigma^-1, so ||G(x) - G(y)|| is the
    Mahalanobis distance. Sigma: Ledoit-Wolf shrunk covariance of the sex's real BFH
    training rows, pooled over age groups (a group holds too few BFH members for a
    60-dimensional covariance; shrinkage keeps it invertible).
``homeostatic_dysregulation``
    :class:`YoungWhitening`, Cohen et al.'s homeostatic dysregulation (Cohen et al. 2013,
    Mech Ageing Dev 134:110-117): the Mahalanobis distance to one *young* healthy reference
    for everyone, not to the person's age group: mean and Ledoit-Wolf covariance of the
    training BFH aged at most ``young_max_age`` (default 50), all features but age.
    ``mahalanobis`` above is *not* this measure (its reference is the person's own age group
    and its covariance is pooled over all ages), so both are reported under their own names.
``p0_euclidean``
    :class:`ColumnSelector` on the P0 markers (cholesterol, HDL, LDL, triglycerides,
    glucose, HbA1c, CRP), those the completeness filter kept.
``deep_patient``, ``sphr``
    :class:`EmbeddingSpace` around a representation an earlier stage fitted, read through
    the one representation interface (:func:`load_representation`): DeepPatient
    (``RUN/baselines/<sex>/deep_patient/model.joblib``) and SPHR
    (:class:`~sphr.train.embedding.SPHREmbedding`, ``RUN/train/<sex>/nplb/model.pt``).
    It is not refitted here.
``sphr_age_line``, ``sphr_young``, ``sphr_joint``
    SPHR's embedding composed with a reference rule (docs/METHODS.md, "SPHR variants aimed
    at risk"): :class:`AgeLineReference`, :class:`YoungReference`, :class:`JointSpace`.

In the saved model (``RUN/risk/model/<sex>/``) a space is a spec in ``risk_model.json``
(:meth:`Space.to_spec`) and its files; :func:`load_space` rebuilds it, checking checksums.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from sphr.cohorts.ranges import P0_RANGES
from sphr.errors import ConfigError, InputError
from sphr.health_distance import health_distance, health_reference
from sphr.representation import Representation
from sphr.risk.config import EMBEDDED_BY, METHODS
from sphr.train.embedding import SPHREmbedding

P0_MARKERS: tuple[str, ...] = tuple(dict.fromkeys(r.marker for r in P0_RANGES))



def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def p0_columns(features: list[str]) -> list[str]:
    return [m for m in P0_MARKERS if m in features]


class Space(Representation):
    """A risk method's representation: ``fit(X, ages=...)`` on the rows the method says,
    ``transform`` any rows (float64); ``to_spec`` writes it into a model folder."""

    output_dtype = np.float64
    kind: ClassVar[str] = "space"
    #: True when the space maps its own reference to the origin (one reference for all ages)
    origin_reference: ClassVar[bool] = False

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        """Most spaces learn nothing from the rows."""

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        """Write the fitted state into ``directory``; the spec :func:`load_space` reads."""
        return {"kind": self.kind}

    def recentred(self, X: np.ndarray, ages: np.ndarray | None = None) -> Space:
        """The space with its own reference (``origin_reference``) re-estimated on the BFH
        rows ``X`` of another population, everything else kept (re-anchoring,
        :mod:`sphr.risk.serve.reanchor`); a space without one is returned as it is."""
        return self


def _column_index(features: list[str], columns: list[str]) -> np.ndarray:
    missing = [c for c in columns if c not in features]
    if missing or not columns:
        raise ConfigError(f"columns {missing or columns} are not among the cohort features")
    return np.array([list(features).index(c) for c in columns])


class ColumnSelector(Space):
    """Identity on a subset of the features (all of them for ``raw_euclidean``)."""

    kind = "columns"

    def __init__(self, features: list[str], columns: list[str]) -> None:
        self.features = features
        self.columns = columns

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        self.index_ = _column_index(self.features, self.columns)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, np.float64)[:, self.index_]

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        return {"kind": self.kind, "columns": list(self.columns)}

    @classmethod
    def restore(cls, features: list[str], columns: list[str]) -> ColumnSelector:
        out = cls(features, columns)
        out.index_, out.n_features_in_ = _column_index(features, columns), len(features)
        return out


def _ledoit_wolf(X: np.ndarray, what: str) -> Any:
    from sklearn.covariance import LedoitWolf

    if X.shape[0] < 2:
        raise InputError(f"need at least 2 {what} rows for a covariance, got {X.shape[0]}")
    return LedoitWolf().fit(X)


class Whitening(Space):
    """Mahalanobis distance as a Euclidean distance after x -> x L (fitted: ``L_``,
    ``covariance_``, ``shrinkage_``)."""

    kind = "whitening"

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        lw = _ledoit_wolf(np.asarray(X, np.float64), "BFH")
        self.covariance_, self.shrinkage_ = lw.covariance_, float(lw.shrinkage_)
        self.L_ = np.linalg.cholesky(np.linalg.inv(self.covariance_))

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, np.float64) @ self.L_

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        np.save(directory / f"{method}_whitening.npy", self.L_)
        return {"kind": self.kind, "file": f"{method}_whitening.npy",
                "shrinkage": getattr(self, "shrinkage_", None)}

    @classmethod
    def restore(cls, L: np.ndarray) -> Whitening:
        out = cls()
        out.L_, out.n_features_in_ = L, L.shape[0]
        return out


def young_rows(ages: np.ndarray | None, young_max_age: float, n: int, what: str) -> np.ndarray:
    """The reference rows aged at most ``young_max_age`` (a mask); with fewer than 10 of
    them, the youngest 10 stand in (indices; recorded in the model as ``n_reference``)."""
    if ages is None:
        raise InputError(f"{what} needs the ages of the reference rows", field="age_years")
    young = np.asarray(ages, float) <= young_max_age
    if young.sum() < 10:
        return np.argsort(np.asarray(ages, float), kind="stable")[:min(10, n)]
    return young


class YoungWhitening(Space):
    """Homeostatic dysregulation: x -> (x - mu_young) L_young on every feature but age, so the
    distance to the origin is the Mahalanobis distance to the young reference (module doc).
    Fitted: ``columns_``, ``mean_``, ``L_``, ``n_reference_``, ``shrinkage_``."""

    kind = "homeostatic"
    origin_reference = True

    def __init__(self, features: list[str], young_max_age: float = 50.0) -> None:
        self.features = features
        self.young_max_age = young_max_age

    def _columns(self) -> None:
        self.columns_ = [f for f in self.features if f != "age"]
        self.index_ = np.array([list(self.features).index(c) for c in self.columns_])

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        self._columns()
        X = np.asarray(X, np.float64)[:, self.index_]
        ref = X[young_rows(ages, self.young_max_age, len(X), "homeostatic dysregulation")]
        lw = _ledoit_wolf(ref, "young BFH")
        self.n_reference_, self.shrinkage_ = int(ref.shape[0]), float(lw.shrinkage_)
        self.mean_ = lw.location_
        self.L_ = np.linalg.cholesky(np.linalg.inv(lw.covariance_))

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, np.float64)[:, self.index_] - self.mean_) @ self.L_

    def recentred(self, X: np.ndarray, ages: np.ndarray | None = None) -> YoungWhitening:
        """The young reference's mean from another population's BFH; the covariance kept."""
        X = np.asarray(X, np.float64)[:, self.index_]
        ref = X[young_rows(ages, self.young_max_age, len(X), "homeostatic dysregulation")]
        out = YoungWhitening.restore(self.features, self.young_max_age, ref.mean(axis=0), self.L_)
        out.n_reference_ = int(ref.shape[0])
        return out

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        np.savez(directory / f"{method}.npz", mean=self.mean_, L=self.L_)
        return {"kind": self.kind, "file": f"{method}.npz", "columns": self.columns_,
                "young_max_age": self.young_max_age,
                "n_reference": getattr(self, "n_reference_", None),
                "sha256": sha256(directory / f"{method}.npz")}

    @classmethod
    def restore(cls, features: list[str], young_max_age: float, mean: np.ndarray,
                L: np.ndarray) -> YoungWhitening:
        out = cls(features, young_max_age)
        out._columns()
        out.mean_, out.L_, out.n_features_in_ = mean, L, len(features)
        return out


class EmbeddingSpace(Space):
    """A representation an earlier stage fitted (DeepPatient, SPHR), not refitted here:
    ``fit`` only checks the width. ``source``: the file it was read from; a representation
    read from a file is saved as that file, byte for byte (the model folder's checksum is
    then the stage's file's), any other through its own ``save``."""

    def __init__(self, representation: Representation, source: str | Path | None = None) -> None:
        self.representation = representation
        self.source = source

    @property
    def kind(self) -> str:  # type: ignore[override]
        return "sphr" if isinstance(self.representation, SPHREmbedding) else "representation"

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        width = getattr(self.representation, "n_features_in_", None)
        if width is not None and width != X.shape[1]:
            raise InputError(f"the representation was fitted on {width} features, the cohort "
                             f"has {X.shape[1]}", file=self.source)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.representation.transform(np.asarray(X, np.float32)), np.float64)

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        name = "sphr.pt" if self.kind == "sphr" else f"{method}.joblib"
        if self.source is not None and Path(self.source).is_file():
            shutil.copyfile(self.source, directory / name)
        else:
            self.representation.save(directory / name)
        return {"kind": self.kind, "file": name, "source": str(self.source),
                "sha256": sha256(directory / name)}

    @classmethod
    def restore(cls, representation: Representation, features: list[str],
                source: str | Path | None = None) -> EmbeddingSpace:
        """Around a fitted representation; refuses one trained on other features (by name,
        where it records them)."""
        names = getattr(representation, "feature_names_in_", None)
        if names is not None and list(names) != list(features):
            what = "SPHR" if isinstance(representation, SPHREmbedding) else "the representation"
            raise InputError(f"{what} was trained on other features than the cohort "
                             f"({len(names)} vs {len(features)})", file=source,
                             field="feature_names")
        out = cls(representation, source)
        out.n_features_in_ = len(features)
        return out


class AgeLineReference(Space):
    """``sphr_age_line``: G(x) minus the line of the embedded training BFH on (normalized) age,
    per embedding dimension, so the reference follows a person's own age (fitted: ``coef_``,
    intercept and slope, (2, width))."""

    kind = "age_line"
    origin_reference = True

    def __init__(self, space: Space, features: list[str]) -> None:
        self.space = space
        self.features = features

    def _age(self) -> None:
        if "age" not in self.features:
            raise ConfigError("sphr_age_line needs age among the cohort features")
        self.age_index_ = list(self.features).index("age")

    def _design(self, X: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(X)), np.asarray(X, np.float64)[:, self.age_index_]])

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        self._age()
        Z = self.space.fit(X, ages=ages).transform(X)
        self.coef_ = np.linalg.lstsq(self._design(X), Z, rcond=None)[0]

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self.space.transform(X) - self._design(X) @ self.coef_

    def recentred(self, X: np.ndarray, ages: np.ndarray | None = None) -> AgeLineReference:
        """The age line from another population's BFH; the embedding kept."""
        coef = np.linalg.lstsq(self._design(X), self.space.transform(X), rcond=None)[0]
        return AgeLineReference.restore(self.space, self.features, coef)

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        np.save(directory / f"{method}.npy", self.coef_)
        return {"kind": self.kind, "file": f"{method}.npy",
                "inner": self.space.to_spec(directory, "sphr"),
                "sha256": sha256(directory / f"{method}.npy")}

    @classmethod
    def restore(cls, space: Space, features: list[str], coef: np.ndarray) -> AgeLineReference:
        out = cls(space, features)
        out._age()
        out.coef_, out.n_features_in_ = coef, len(features)
        return out


class YoungReference(Space):
    """``sphr_young``: G(x) minus the median of the embedded training BFH aged at most
    ``young_max_age``: one young reference for everyone (homeostatic dysregulation's idea;
    fitted: ``center_``)."""

    kind = "young_reference"
    origin_reference = True

    def __init__(self, space: Space, young_max_age: float = 50.0) -> None:
        self.space = space
        self.young_max_age = young_max_age

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        rows = young_rows(ages, self.young_max_age, len(X), "sphr_young")
        self.center_ = np.median(self.space.fit(X, ages=ages).transform(np.asarray(X)[rows]),
                                 axis=0)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        return self.space.transform(X) - self.center_

    def recentred(self, X: np.ndarray, ages: np.ndarray | None = None) -> YoungReference:
        """The young centre from another population's BFH; the embedding kept."""
        rows = young_rows(ages, self.young_max_age, len(X), "sphr_young")
        center = np.median(self.space.transform(np.asarray(X)[rows]), axis=0)
        return YoungReference.restore(self.space, self.young_max_age, center, self.n_features_in_)

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        np.save(directory / f"{method}.npy", self.center_)
        return {"kind": self.kind, "file": f"{method}.npy", "young_max_age": self.young_max_age,
                "inner": self.space.to_spec(directory, "sphr"),
                "sha256": sha256(directory / f"{method}.npy")}

    @classmethod
    def restore(cls, space: Space, young_max_age: float, center: np.ndarray,
                n_features: int) -> YoungReference:
        out = cls(space, young_max_age)
        out.center_, out.n_features_in_ = center, n_features
        return out


class JointSpace(Space):
    """``sphr_joint``: [G(x) / s_G, x / s_x], each part divided by the median distance of the
    training BFH to their own median in it, so the embedding and the markers weigh equally
    (fitted: ``scales_``)."""

    kind = "joint"

    def __init__(self, space: Space) -> None:
        self.space = space

    def _fit(self, X: np.ndarray, ages: np.ndarray | None = None) -> None:
        X = np.asarray(X, np.float64)
        parts = (self.space.fit(X, ages=ages).transform(X), X)
        # each part's scale: its BFH's median health distance to their own median
        scales = np.array([np.median(health_distance(
            P, health_reference(P, reference="median_of_embedded"))) for P in parts])
        self.scales_ = np.where(scales > 0, scales, 1.0)

    def _transform(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, np.float64)
        return np.hstack([self.space.transform(X) / self.scales_[0], X / self.scales_[1]])

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        return {"kind": self.kind, "scales": self.scales_.tolist(),
                "inner": self.space.to_spec(directory, "sphr")}

    @classmethod
    def restore(cls, space: Space, scales: np.ndarray, n_features: int) -> JointSpace:
        out = cls(space)
        out.scales_, out.n_features_in_ = scales, n_features
        return out


def load_representation(path: str | Path, device: str = "auto") -> Representation:
    """A fitted representation from its file, through the one interface: SPHR's ``model.pt``
    (:meth:`SPHREmbedding.load`), any other a saved :class:`~sphr.representation.Representation`
    (``model.joblib`` of ``sphr baselines``)."""
    path = Path(path)
    if path.suffix == ".pt":
        return SPHREmbedding.load(path, device=device)
    if not path.is_file():
        raise InputError(f"missing {path.name} (run `sphr baselines`)", file=path)
    return Representation.load(path)


#: each marker-space method's space, from the cohort's features
_MARKER_SPACES: dict[str, Callable[[list[str]], Space]] = {
    "raw_euclidean": lambda features: ColumnSelector(features, list(features)),
    "p0_euclidean": lambda features: ColumnSelector(features, p0_columns(features)),
    "mahalanobis": lambda features: Whitening(),
    "homeostatic_dysregulation": YoungWhitening,
}
#: each SPHR variant's reference rule around the embedding (plain ``sphr``: none)
_REFERENCE_RULES: dict[str, Callable[[EmbeddingSpace, list[str]], Space]] = {
    "sphr_age_line": AgeLineReference,
    "sphr_young": lambda inner, features: YoungReference(inner),
    "sphr_joint": lambda inner, features: JointSpace(inner),
}


def build_space(method: str, features: list[str], *,
                representations: Mapping[str, Representation | str | Path] | None = None,
                device: str = "auto") -> Space:
    """An unfitted space for ``method``; the deep methods embed with ``representations``
    (``deep_patient`` / ``sphr``: a fitted representation or the file to read it from)."""
    if method in _MARKER_SPACES:
        return _MARKER_SPACES[method](features)
    if method not in EMBEDDED_BY:
        raise ConfigError(f"unknown risk method {method!r}: choose from {', '.join(METHODS)}")
    name = EMBEDDED_BY[method]
    given = (representations or {}).get(name)
    if given is None:
        raise ConfigError(f"method {method} needs the {name} representation")
    if isinstance(given, (str, Path)):
        inner = EmbeddingSpace.restore(load_representation(given, device), features, given)
    else:
        inner = EmbeddingSpace.restore(given, features)
    rule = _REFERENCE_RULES.get(method)
    return inner if rule is None else rule(inner, features)


def _checked(spec: dict[str, Any], directory: Path) -> Path:
    """The saved file of a space, present and unchanged since the fit (checksum)."""
    path = directory / spec.get("file", "")
    if not path.is_file():
        raise InputError("missing risk model file", file=path)
    if spec.get("sha256") and sha256(path) != spec["sha256"]:
        raise InputError("file changed since the risk model was fitted (checksum)", file=path)
    return path


def _restore_inner(spec: dict[str, Any], directory: Path, features: list[str],
                   device: str) -> Space:
    return load_space(spec["inner"], directory, features, device)


def _restore_homeostatic(spec: dict[str, Any], directory: Path, features: list[str],
                         device: str) -> Space:
    with np.load(_checked(spec, directory)) as arrays:
        return YoungWhitening.restore(features, spec["young_max_age"], arrays["mean"],
                                      arrays["L"])


def _restore_embedding(spec: dict[str, Any], directory: Path, features: list[str],
                       device: str) -> Space:
    path = _checked(spec, directory)
    return EmbeddingSpace.restore(load_representation(path, device), features, path)


#: how each kind of saved space (:meth:`Space.to_spec`'s ``kind``) is rebuilt, nothing refitted
_RESTORE: dict[str, Callable[[dict[str, Any], Path, list[str], str], Space]] = {
    "columns": lambda spec, d, f, dev: ColumnSelector.restore(f, spec["columns"]),
    "joint": lambda spec, d, f, dev: JointSpace.restore(
        _restore_inner(spec, d, f, dev), np.asarray(spec["scales"], float), len(f)),
    "age_line": lambda spec, d, f, dev: AgeLineReference.restore(
        _restore_inner(spec, d, f, dev), f, np.load(_checked(spec, d))),
    "young_reference": lambda spec, d, f, dev: YoungReference.restore(
        _restore_inner(spec, d, f, dev), spec["young_max_age"], np.load(_checked(spec, d)),
        len(f)),
    "whitening": lambda spec, d, f, dev: Whitening.restore(np.load(_checked(spec, d))),
    "homeostatic": _restore_homeostatic,
    "representation": _restore_embedding,
    "sphr": _restore_embedding,
}


def load_space(spec: dict[str, Any], directory: Path, features: list[str],
               device: str = "auto") -> Space:
    """Rebuild a space written by :meth:`Space.to_spec`, checking checksums (nothing refitted)."""
    restore = _RESTORE.get(spec["kind"])
    if restore is None:
        raise InputError(f"unknown space kind {spec['kind']!r}", file=directory)
    return restore(spec, directory, features, device)
