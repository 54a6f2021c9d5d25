"""Image retrieval: losses (AdaTriplet, AutoMargin, DAMS / Linear schedulers, OCAM, NPLB, triplet and
contrastive baselines), metrics (mAP, mAP@R, CMC, Recall@k, pair AUC, P@Z, Hamming), backbones,
datasets (manifests, digits, synthetic forensic) and the loss comparison.

Entry point for the pipeline (``sphr retrieval`` and the Dagster assets)::

    from sphr.retrieval import run_comparison
    result = run_comparison("forensic", ["triplet", "adatriplet_automargin"], seeds=[0, 1, 2],
                            out_dir="runs/demo/retrieval/forensic", device="auto", profile="demo")
    result.table          # loss, metric, mean, sem, n_seeds
    result.files          # paths written (comparison.md, *.parquet, margin_curves.png, strips/*.png)

Submodules import torch; this package's names load on first use.
"""

from __future__ import annotations

from sphr import lazy_exports

_EXPORTS = {
    "run_comparison": "sphr.retrieval.compare",
    "combine_results": "sphr.retrieval.compare",
    "ComparisonResult": "sphr.retrieval.compare",
    "summarize": "sphr.retrieval.compare",
    "LOSSES": "sphr.retrieval.losses",
    "DEFAULT_LOSSES": "sphr.retrieval.losses",
    "build_loss": "sphr.retrieval.losses",
    "load_retrieval_data": "sphr.retrieval.data",
    "PROFILES": "sphr.retrieval.profiles",
    "get_profile": "sphr.retrieval.profiles",
    "evaluate_embeddings": "sphr.retrieval.metrics",
    "knn": "sphr.retrieval.metrics",
    "build_model": "sphr.retrieval.backbones",
    "train_model": "sphr.retrieval.train",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_exports(__name__, _EXPORTS)
