"""The classifiers and tasks of the evaluation, by name (no heavy imports: the CLI reads
these while building its parser)."""

from __future__ import annotations

CLASSIFIERS: tuple[str, ...] = ("knn", "lda", "nn_ehr", "xgboost")
DISPLAY_NAMES: dict[str, str] = {"knn": "KNNs", "lda": "LDA", "nn_ehr": "NN for EHR",
                                 "xgboost": "XGBoost"}
TASKS: tuple[str, ...] = ("binary", "multi")
N_CLASSES: dict[str, int] = {"binary": 2, "multi": 3}
#: XGBoost's tree method on the CPU. ``auto``: the paper's exact (hist on CUDA, where exact
#: does not run); ``hist`` at UK Biobank size (sphr.evaluate.classifiers)
XGB_METHODS: tuple[str, ...] = ("auto", "exact", "hist")
