"""Small class-structured cohorts in the run-directory layout, for tests and benchmarks
(benchmarks/evaluate.py; tests/test_evaluate.py and tests/test_baselines.py load this file).

Not a model of UK Biobank (``sphr synth`` is): three classes in the UKB-like
proportions 55 / 40 / 5 % whose means differ along a few directions, with
correlated noise, so that classifiers are better than chance but far from
perfect. Written exactly as ``sphr cohorts`` writes a sex's folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sphr.io import write_json, write_npz, write_parquet

CLASS_SHARES = (0.55, 0.40, 0.05)


def class_structured(n: int, n_features: int = 40, *, seed: int = 0, separation: float = 0.08,
                     shares: tuple[float, ...] = CLASS_SHARES) -> tuple[np.ndarray, np.ndarray]:
    """(X float32 (n, d), labels int8 (n,)); same seed, same class geometry."""
    geo = np.random.default_rng(10_000 + n_features)  # geometry fixed by d, not by the draw
    means = geo.normal(size=(3, n_features)) * separation
    mix = geo.normal(size=(n_features, n_features)) / np.sqrt(n_features)
    rng = np.random.default_rng(seed)
    labels = rng.choice(3, size=n, p=np.asarray(shares) / np.sum(shares)).astype(np.int8)
    noise = rng.normal(size=(n, n_features)) @ (0.6 * np.eye(n_features) + 0.4 * mix)
    X = means[labels] + noise
    # one non-linear cue (BFH sits in a band of the first feature), so trees and kNN
    # are not merely re-deriving LDA
    X[labels == 2, 0] = np.tanh(X[labels == 2, 0])
    return X.astype(np.float32), labels


def _frame(X: np.ndarray, labels: np.ndarray, eids: np.ndarray, features: list[str],
           augmented: bool, rng: np.random.Generator) -> pd.DataFrame:
    age = rng.integers(37, 74, size=len(labels))
    edges = [(36, 45), (46, 50), (51, 55), (56, 60), (61, 65), (66, 75)]
    group = [next(f"{a}-{b}" for a, b in edges if a <= x <= b) for x in age]
    df = pd.DataFrame({"eid": eids.astype(np.int64), "age_years": age.astype(np.float64),
                       "age_group": group, "label": labels.astype(np.int8),
                       "augmented": np.full(len(labels), augmented)})
    return pd.concat([df, pd.DataFrame(X, columns=features)], axis=1)


def write_cohort(directory: str | Path, *, n_train: int = 700, n_test: int = 300,
                 n_features: int = 40, n_augmented: int = 60, n_triplets: int = 2000,
                 seed: int = 0) -> Path:
    """Write train.parquet (real + augmented BFH rows), test.parquet,
    features.json, triplets.npz."""
    d = Path(directory)
    features = [f"f{i:02d}" for i in range(n_features)]
    X, y = class_structured(n_train + n_test, n_features, seed=seed)
    rng = np.random.default_rng(seed + 1)
    eids = rng.permutation(np.arange(1_000_000, 1_000_000 + n_train + n_test))
    train = _frame(X[:n_train], y[:n_train], eids[:n_train], features, False, rng)
    test = _frame(X[n_train:], y[n_train:], eids[n_train:], features, False, rng)
    if n_augmented:
        Xa, _ = class_structured(n_augmented * 4, n_features, seed=seed + 2,
                                 shares=(0.0, 0.0, 1.0))
        aug = _frame(Xa[:n_augmented], np.full(n_augmented, 2, np.int8),
                     -np.arange(1, n_augmented + 1), features, True, rng)
        train = pd.concat([train, aug], ignore_index=True)
    lab = train["label"].to_numpy()
    by = {c: np.flatnonzero(lab == c) for c in range(3)}
    a = rng.integers(0, len(lab), size=n_triplets)
    p = np.array([rng.choice(by[lab[i]]) for i in a])
    n = np.array([rng.choice(np.flatnonzero(lab != lab[i])) for i in a])
    write_parquet(train, d / "train.parquet")
    write_parquet(test, d / "test.parquet")
    write_json(features, d / "features.json")
    write_npz(d / "triplets.npz", triplets=np.stack([a, p, n], axis=1).astype(np.int64))
    return d
