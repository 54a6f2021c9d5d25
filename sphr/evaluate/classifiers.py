"""The four downstream classifiers with the paper's settings (Appendix K.5;
docs/METHODS.md#evaluation-protocol).

KNN and LDA are scikit-learn's; XGBoost the official package; NN for EHR is
:mod:`sphr.evaluate.nn_ehr`. ``tests/test_evaluate.py`` asserts these settings.

XGBoost: the paper's parameter list (K.5.4) is applied in full, including
``base_score=0.5`` (XGBoost >= 2 otherwise estimates it from the labels) and
``tree_method='exact'``. XGBoost's exact method is CPU-only ("The `exact` tree
method is not supported on GPU"), so with ``device='cuda'`` we use
``tree_method='hist'`` (max_bin 256, as listed) and every report says which
tree method ran. ``xgboost_method='hist'`` asks for it on the CPU too: at UK Biobank
size the exact method is two thirds of the evaluation's time (26,493 x 64 training
rows of a 500,000-participant cohort, one thread: 5.7 s vs 0.9 s per binary fit, 13.8 s
vs 1.8 s per 3-class fit), while the 52 XGBoost cells of that evaluation moved by at
most 0.002 weighted F1 (0.84 split SDs) and nothing else changed (README, "What a
full-size run costs"). The paper's exact method stays the default.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from sphr.baselines.base import keep_params
from sphr.errors import ConfigError
from sphr.evaluate.config import NN_EHR_CONFIG, NNForEHRConfig, check_xgboost_method
from sphr.evaluate.names import CLASSIFIERS, TASKS
from sphr.evaluate.nn_ehr import train_many

#: K.5.2, scikit-learn names (n_jobs is set per run: 1 inside parallel workers)
KNN_PARAMS: dict[str, Any] = {"n_neighbors": 50, "weights": "uniform", "algorithm": "auto",
                              "leaf_size": 30, "metric": "minkowski", "p": 2,
                              "metric_params": None}
#: K.5.3: scikit-learn defaults
LDA_PARAMS: dict[str, Any] = {}
#: K.5.4, XGBoost names (objective set per task; n_jobs, device per run)
XGB_PARAMS: dict[str, Any] = {
    "max_depth": 4, "n_estimators": 50, "learning_rate": 0.05, "tree_method": "exact",
    "random_state": 0, "booster": "gbtree", "max_delta_step": 0, "max_leaves": 0,
    "min_child_weight": 1, "gamma": 0, "reg_alpha": 0, "reg_lambda": 1, "subsample": 1,
    "colsample_bytree": 1, "colsample_bylevel": 1, "colsample_bynode": 1, "max_bin": 256,
    "base_score": 0.5, "scale_pos_weight": 1, "grow_policy": "depthwise",
    "num_parallel_tree": 1, "sampling_method": "uniform", "max_cat_to_onehot": 4,
    "validate_parameters": True,
}
XGB_OBJECTIVES: dict[str, str] = {"binary": "binary:logistic", "multi": "multi:softprob"}
def xgboost_device(device: str = "auto", method: str = "auto") -> tuple[str, str]:
    """(XGBoost device, tree method): on CUDA always hist (exact is CPU-only); on the CPU
    ``method``, where ``auto`` is the paper's exact."""
    from sphr.device import resolve_device

    check_xgboost_method(method)
    dev = resolve_device(device)
    if dev.type == "cuda":
        return "cuda", "hist"
    return "cpu", "exact" if method == "auto" else method


def make_xgboost(task: str, *, device: str = "auto", n_jobs: int = 1, method: str = "auto"):
    import xgboost as xgb

    xdev, method = xgboost_device(device, method)
    params = {**XGB_PARAMS, "tree_method": method, "objective": XGB_OBJECTIVES[task]}
    if task == "multi":  # only binary:logistic reads it; XGBoost warns on unused parameters
        params.pop("scale_pos_weight")
    return xgb.XGBClassifier(**params, device=xdev, n_jobs=n_jobs)


def make_knn(n_jobs: int = 1):
    from sklearn.neighbors import KNeighborsClassifier

    return KNeighborsClassifier(**KNN_PARAMS, n_jobs=n_jobs)


def make_lda():
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    return LinearDiscriminantAnalysis(**LDA_PARAMS)


def knn_vote(neighbors: np.ndarray, y_train: np.ndarray, n_classes: int) -> np.ndarray:
    """Uniform-weight majority vote over ``neighbors`` (rows of indices into ``y_train``).

    Same rule as ``KNeighborsClassifier.predict`` with ``weights='uniform'``
    (a tie goes to the lowest class id), so one neighbour search serves both
    the binary and the multi-class task.
    """
    votes = np.zeros((neighbors.shape[0], n_classes), dtype=np.int64)
    lab = np.asarray(y_train)[neighbors]
    for c in range(n_classes):
        votes[:, c] = (lab == c).sum(axis=1)
    return votes.argmax(axis=1)


class NNForEHRClassifier(ClassifierMixin, BaseEstimator):
    """scikit-learn face of :mod:`sphr.evaluate.nn_ehr` (one model)."""

    def __init__(self, epochs: int = NN_EHR_CONFIG.epochs, lr: float = NN_EHR_CONFIG.lr,
                 weight_decay: float = NN_EHR_CONFIG.weight_decay,
                 batch_size: int = NN_EHR_CONFIG.batch_size,
                 attention_hidden: int = NN_EHR_CONFIG.attention_hidden,
                 hidden: tuple[int, ...] = NN_EHR_CONFIG.hidden, random_state: int = 0,
                 device: str = "auto") -> None:
        keep_params(self, locals())

    @property
    def config(self) -> NNForEHRConfig:
        return NNForEHRConfig(lr=self.lr, weight_decay=self.weight_decay, epochs=self.epochs,
                              batch_size=self.batch_size, attention_hidden=self.attention_hidden,
                              hidden=tuple(self.hidden))

    def fit(self, X: np.ndarray, y: np.ndarray) -> NNForEHRClassifier:
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        n = np.asarray(X).shape[0]
        self.models_ = train_many(np.asarray(X), [codes], [np.arange(n)],
                                  n_classes=[max(len(self.classes_), 2)], config=self.config,
                                  seed=self.random_state, device=self.device)
        return self

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "models_")
        return self.models_.predict_proba(0, np.asarray(X))[:, :len(self.classes_)]

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


def make_classifier(name: str, task: str, *, seed: int = 0, device: str = "auto",
                    n_jobs: int = 1, nn_config: NNForEHRConfig | None = None,
                    xgboost_method: str = "auto"):
    """A fresh estimator with the paper's settings for ``task`` ('binary' or 'multi')."""
    if task not in TASKS:
        raise ConfigError(f"unknown task {task!r}: use binary or multi")
    if name == "knn":
        return make_knn(n_jobs)
    if name == "lda":
        return make_lda()
    if name == "xgboost":
        return make_xgboost(task, device=device, n_jobs=n_jobs, method=xgboost_method)
    if name == "nn_ehr":
        cfg = asdict(nn_config or NN_EHR_CONFIG)
        return NNForEHRClassifier(**cfg, random_state=seed, device=device)
    raise ConfigError(f"unknown classifier {name!r}: choose from {', '.join(CLASSIFIERS)}")


def classifier_settings(device: str = "auto", nn_config: NNForEHRConfig | None = None,
                        xgboost_method: str = "auto") -> dict:
    """Every setting in force, for reports."""
    xdev, method = xgboost_device(device, xgboost_method)
    return {
        "knn": dict(KNN_PARAMS),
        "lda": {"sklearn_defaults": True, **LDA_PARAMS},
        "xgboost": {**XGB_PARAMS, "tree_method": method, "device": xdev,
                    "objective": dict(XGB_OBJECTIVES)},
        "nn_ehr": {**asdict(nn_config or NN_EHR_CONFIG), "optimizer": "Adam (L2 = weight_decay)",
                   "input_scaling": "standardized on each split's training rows"},
    }
