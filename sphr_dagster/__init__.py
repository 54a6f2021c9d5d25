"""The Dagster code location of ``sphr``: assets by stage (``sphr_dagster.assets``), their
resources, IO manager, jobs, schedules, sensors and checks, and ``python -m sphr_dagster``.

Imports run one way (docs/ARCHITECTURE.md): the helpers (config, resources, metadata,
partitions, io_manager, home) <- the assets, checks and automation <- ``definitions`` <-
the entry points (run_config, runner, k8s, __main__). The library ``sphr`` never imports it.
"""
