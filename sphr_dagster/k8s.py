"""The same code location with the training step in a pod on a Kubernetes GPU node.

Needs dagster-k8s 0.29.x, which the default install leaves out
(``pip install dagster-k8s==0.29.27``). Load it instead of
``sphr_dagster.definitions``: ``dagster dev -m sphr_dagster.k8s`` or
``dagster definitions validate -m sphr_dagster.k8s``.

Only the ``pipes_client`` resource changes: the training asset runs the same
``python -m sphr.train.pipes_entry COHORT OUT`` through Dagster Pipes, now in a
pod (image with ``sphr`` and ``dagster-pipes`` only) that asks for
``SPHR_K8S_GPUS`` NVIDIA GPUs, mounts the run directory from the persistent
volume claim ``SPHR_K8S_RUN_CLAIM`` at the same path as ``SPHR_RUN_DIR``, and
reports the loss curve back as materialization metadata. Settings (env):
``SPHR_TRAIN_IMAGE``, ``SPHR_K8S_NAMESPACE`` (default ``default``),
``SPHR_K8S_GPUS`` (1), ``SPHR_K8S_RUN_CLAIM`` (``sphr-runs``),
``SPHR_K8S_NODE_SELECTOR`` (a JSON object, e.g. ``{"nvidia.com/gpu.present": "true"}``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dagster as dg
from dagster_k8s import PipesK8sClient

from sphr.layout import DEFAULT_RUN_DIR
from sphr_dagster import definitions as local
from sphr_dagster.resources import default_resources


class GpuTrainingClient(PipesK8sClient):
    """PipesK8sClient that fills in the image, namespace and a GPU pod spec."""

    def __init__(self, image: str, namespace: str = "default", gpus: int = 1,
                 run_claim: str = "sphr-runs", run_dir: str = DEFAULT_RUN_DIR,
                 node_selector: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        self.image, self.namespace, self.gpus = image, namespace, gpus
        self.run_claim, self.run_dir = run_claim, str(Path(run_dir).resolve())
        self.node_selector = node_selector or {}

    def pod_spec(self) -> dict:
        return {
            "containers": [{"name": "sphr-train",
                            "resources": {"limits": {"nvidia.com/gpu": str(self.gpus)}},
                            "volumeMounts": [{"name": "runs", "mountPath": self.run_dir}]}],
            "volumes": [{"name": "runs",
                         "persistentVolumeClaim": {"claimName": self.run_claim}}],
            "nodeSelector": self.node_selector,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
        }

    def run(self, *, context, command=None, extras=None, **kwargs):
        # the asset launches with its own interpreter's path; in the image it is `python`
        if command and not isinstance(command, str):
            command = ["python", *list(command)[1:]]
        return super().run(context=context, command=command, extras=extras, image=self.image,
                           namespace=self.namespace, base_pod_spec=self.pod_spec(), **kwargs)


def gpu_training_client() -> GpuTrainingClient:
    return GpuTrainingClient(
        image=os.environ.get("SPHR_TRAIN_IMAGE", "sphr-train:latest"),
        namespace=os.environ.get("SPHR_K8S_NAMESPACE", "default"),
        gpus=int(os.environ.get("SPHR_K8S_GPUS", 1)),
        run_claim=os.environ.get("SPHR_K8S_RUN_CLAIM", "sphr-runs"),
        run_dir=os.environ.get("SPHR_RUN_DIR", DEFAULT_RUN_DIR),
        node_selector=json.loads(os.environ.get("SPHR_K8S_NODE_SELECTOR", "{}")),
    )


defs = dg.Definitions(
    assets=local.ASSETS,
    asset_checks=local.CHECKS,
    jobs=local.defs.jobs,
    schedules=local.defs.schedules,
    sensors=local.defs.sensors,
    resources={**default_resources(), "pipes_client": gpu_training_client()},
)
