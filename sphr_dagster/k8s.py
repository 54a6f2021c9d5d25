"""The same code location with the training step in a pod on a Kubernetes GPU node.

Needs dagster-k8s 0.29.x, which the default install leaves out
(``pip install -e '.[k8s]'``). Load it instead of
``sphr_dagster.definitions``: ``dagster dev -m sphr_dagster.k8s`` or
``dagster definitions validate -m sphr_dagster.k8s``.

Only the ``fit_engine`` resource changes (engine ``k8s``): the training assets run the same
``python -m sphr.train.pipes_entry ...`` fits through Dagster Pipes, now each in a
pod (image with ``sphr`` and ``dagster-pipes`` only) that asks for
``SPHR_K8S_GPUS`` NVIDIA GPUs, mounts the run directory from the persistent
volume claim ``SPHR_K8S_RUN_CLAIM`` at the same path as ``SPHR_RUN_DIR``, and
reports the loss curve back as materialization metadata. Settings (env):
``SPHR_TRAIN_IMAGE``, ``SPHR_K8S_NAMESPACE`` (default ``default``),
``SPHR_K8S_GPUS`` (1), ``SPHR_K8S_RUN_CLAIM`` (``sphr-runs``),
``SPHR_K8S_NODE_SELECTOR`` (a JSON object, e.g. ``{"nvidia.com/gpu.present": "true"}``).
"""

from __future__ import annotations

import dagster as dg

from sphr_dagster import definitions as local
from sphr_dagster.fits import FitEngine
from sphr_dagster.k8s_client import GpuTrainingClient, gpu_training_client
from sphr_dagster.resources import default_resources

defs = dg.Definitions(
    assets=local.ASSETS,
    asset_checks=local.CHECKS,
    jobs=local.defs.jobs,
    schedules=local.defs.schedules,
    sensors=local.defs.sensors,
    resources={**default_resources(), "fit_engine": FitEngine(engine="k8s")},
)

__all__ = ["GpuTrainingClient", "defs", "gpu_training_client"]
