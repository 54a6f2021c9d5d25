"""Image retrieval: losses (AdaTriplet, AutoMargin, DAMS / Linear schedulers, OCAM, NPLB, triplet
and contrastive baselines), metrics (mAP, mAP@R, CMC, Recall@k, pair AUC, P@Z, Hamming), backbones,
datasets (manifests, digits, synthetic forensic) and the loss comparison.

Entry point for the pipeline (``sphr retrieval`` and the Dagster assets)::

    from sphr.retrieval import run_comparison
    result = run_comparison("forensic", ["triplet", "adatriplet_automargin"], seeds=[0, 1, 2],
                            out_dir="runs/demo/retrieval/forensic", device="auto", profile="demo")
    result.table          # loss, metric, mean, sem, n_seeds
    result.files          # paths written (comparison.md, *.parquet, margin_curves.png, ...)

Submodules import torch; this package's names load on first use.
"""

from __future__ import annotations

from sphr import lazy_exports

_EXPORTS: dict[str, tuple[str, ...]] = {
    "sphr.retrieval.compare": ("run_comparison", "combine_results", "ComparisonResult",
                               "summarize"),
    "sphr.retrieval.losses": ("LOSSES", "DEFAULT_LOSSES"),
    "sphr.retrieval.data": ("load_retrieval_data",),
    "sphr.retrieval.profiles": ("PROFILES", "get_profile"),
    "sphr.retrieval.metrics": ("retrieval_metrics", "knn"),
    "sphr.retrieval.backbones": ("build_model",),
    "sphr.retrieval.train": ("train_model",),
}

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
__getattr__ = lazy_exports(__name__, _EXPORTS)
