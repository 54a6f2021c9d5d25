"""The Pipes client that runs a fit in a pod on a Kubernetes GPU node (the ``k8s`` fit engine,
``sphr_dagster.fits``; the code location ``sphr_dagster.k8s`` uses it). Needs dagster-k8s
0.29.x, which the default install leaves out (``pip install -e '.[k8s]'``).

Settings (env): ``SPHR_TRAIN_IMAGE``, ``SPHR_K8S_NAMESPACE`` (default ``default``),
``SPHR_K8S_GPUS`` (1), ``SPHR_K8S_RUN_CLAIM`` (``sphr-runs``), ``SPHR_K8S_NODE_SELECTOR``
(a JSON object, e.g. ``{"nvidia.com/gpu.present": "true"}``). Mock-verified only: no
Kubernetes cluster runs on the machines this is tested on.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from dagster_k8s import PipesK8sClient

from sphr.layout import DEFAULT_RUN_DIR


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
