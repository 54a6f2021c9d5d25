"""A whole run's settings: one TOML file, one table per stage, checked against the stages'
dataclasses.

``python -m sphr_dagster run --config run.toml`` reads it; the Dagster side only turns the
checked settings into run config (``python -m sphr_dagster config run.toml`` prints that as
launchpad YAML). A table per stage, whose keys are the fields of the stage's own
dataclass (the one source of every default), and ``[run]`` for the command's own options::

    [run]
    export = "/data/ukb672345.csv"      # relative paths: from this file's folder
    profile = "paper"                   # default: demo (docs/METHODS.md, "Higher risk ...")
    losses = false                      # the 7-loss comparison (default: on only without an export)

    [ingest.censoring]                  # your release's censoring dates (docs/OUTCOMES.md)
    hospital = 2023-03-31

    [cohorts]
    seed = 3
    [cohorts.ranges.glucose]            # P0 clinical range overrides (docs/METHODS.md)
    high = 6.0

    [train]
    epochs = 200

An unknown table or key, or a value of the wrong type, is a :class:`~sphr.errors.ConfigError`
naming the file and the key. Precedence, lowest first: the dataclass's defaults, the
profile's (``CohortConfig.profile``, ``TrainConfig.profile``), the file, the command line.

Above the stages (like ``sphr.cli``): it composes every stage's config class, which each
stage keeps in its own ``config`` module (``IngestSettings`` in :mod:`sphr.data.config`,
``ComparisonSettings`` in :mod:`sphr.train.config`), imports them only when asked, so a
command's parser stays light, and no stage imports it (tests/test_architecture.py). The
package's modules: :mod:`~sphr.settings.stages` (the tables and their dataclasses),
:mod:`~sphr.values` (checking a value against its type; shared, as every command checks
its `--set` overrides with it) and
:mod:`~sphr.settings.run` (the file and :func:`resolve`).
"""

from __future__ import annotations

from sphr import lazy_exports
from sphr.options import field_docs
from sphr.settings.run import (
    RUN_SETTINGS_FILE,
    RunSettings,
    command_table,
    read_settings_file,
    resolve,
    write_run_settings,
)
from sphr.settings.stages import (
    COMMAND_TABLES,
    EXPORT_PROFILE,
    FIT_ENGINES,
    RUN_TABLE,
    STAGES,
    RunOptions,
    library_config,
    not_keys,
    runtime_fields,
    stage_class,
    stage_defaults,
    stage_docs,
    stage_types,
)
from sphr.values import check_table, check_value, plain, type_name

#: the stages' own settings classes, under the names they had here (imported on first use)
_LAZY: dict[str, tuple[str, ...]] = {
    "sphr.data.config": ("IngestSettings",),
    "sphr.train.config": ("ComparisonSettings",),
}
__getattr__ = lazy_exports(__name__, _LAZY)

__all__ = [
    "COMMAND_TABLES",
    "EXPORT_PROFILE",
    "FIT_ENGINES",
    "RUN_SETTINGS_FILE",
    "RUN_TABLE",
    "STAGES",
    "ComparisonSettings",
    "IngestSettings",
    "RunOptions",
    "RunSettings",
    "check_table",
    "check_value",
    "command_table",
    "field_docs",
    "library_config",
    "not_keys",
    "plain",
    "read_settings_file",
    "resolve",
    "runtime_fields",
    "stage_class",
    "stage_defaults",
    "stage_docs",
    "stage_types",
    "type_name",
    "write_run_settings",
]
