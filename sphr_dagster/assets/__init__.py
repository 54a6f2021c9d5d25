"""Dagster assets by stage; each a thin call into ``sphr``.

Each module's ``dg.Config`` classes are generated from the stage's library dataclass
(:mod:`sphr_dagster.config`), and its ``configs(settings)`` gives its assets' run config for
a run's settings (:mod:`sphr_dagster.run_config`). These modules do not use ``from __future__
import annotations``: Dagster reads the ``Config`` annotations of asset functions at
decoration time.
"""
