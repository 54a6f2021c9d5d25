"""sphr: similarity-based patient health-risk modeling.

The library is plain Python + torch and never imports Dagster, so every step
also runs from the ``sphr`` command line or on a bare GPU box.
"""

__version__ = "0.1.0"
