"""A run's settings (:mod:`sphr.settings`) as Dagster run config.

Each asset module turns the settings into its assets' Config instances
(``configs(settings)``); here they are keyed by each asset's op, as Dagster names it, and
limited to the assets a selection materializes (a run config naming an op the job lacks is
an error). ``python -m sphr_dagster config FILE`` prints the result for the launchpad.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from sphr.settings import RunSettings
from sphr_dagster.definitions import CONFIGURED_MODULES, defs
from sphr_dagster.resources import resource_config


def op_configs(settings: RunSettings) -> dict[dg.AssetsDefinition, dg.Config]:
    """Every configured asset with its Config for these settings."""
    configs: dict[dg.AssetsDefinition, dg.Config] = {}
    for module in CONFIGURED_MODULES:
        configs.update(module.configs(settings))
    return configs


def run_config(settings: RunSettings, selection: dg.AssetSelection | None = None, *,
               resources: bool = False, log_level: str | None = None) -> dict[str, Any]:
    """The run config of the assets in ``selection`` (None: every configured asset);
    ``resources``: with the resources' values (for a launch from the UI); ``log_level``:
    the console logger's level."""
    keys = selection.resolve(defs.resolve_asset_graph()) if selection is not None else None
    ops = {asset.op.name: config for asset, config in op_configs(settings).items()
           if keys is None or asset.keys & keys}
    config = dg.RunConfig(ops=ops).to_config_dict()
    out: dict[str, Any] = {"ops": config["ops"]}
    if resources:
        out["resources"] = resource_config(settings)
    if log_level:
        # Dagster's own step events are DEBUG; the assets' messages are INFO
        out["loggers"] = {"console": {"config": {"log_level": log_level}}}
    return out


def job_run_config(settings: RunSettings, job: str) -> dict[str, Any]:
    """The launchpad config of a defined job (``sphr_pipeline``, ``retrain``, ...): its ops'
    settings and the resources'."""
    job_def = defs.resolve_job_def(job)
    keys = job_def.asset_layer.executable_asset_keys
    return run_config(settings, dg.AssetSelection.assets(*keys), resources=True)
