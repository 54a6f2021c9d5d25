"""The parts of ``benchmarks/real_nhanes.py`` (docs/REAL.md), one module per concern.

``common``: the development set's files, the sexes, the refit seeds and the percentile
interval every table uses; ``fits``: the folds, each fold's fits and ``sphr score``, and the
out-of-fold score tables; ``cindex``: Harrell's C with bootstrap intervals and the paired
comparisons; ``tables``: the C-index table and the docs' generated block; ``refits``: the
spread over refits, the stability rule and the spread file the report reads; ``tracking``:
SPHR's per-epoch tracking beside the held-out C; ``absolute``: ``--absolute``'s candidates.
"""
