"""The Kubernetes engine, mock-verified: dagster-k8s's own PipesK8sClient code runs (pod body,
Pipes environment, pod-log message reading, pod deletion) against a fake Kubernetes API whose
"pod" is the pod's container command run here. No cluster can be started on the machines this
is tested on, as in Dagster's own unit tests of dagster-k8s."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys

import pytest
from engine_runs import FOLDS, failure_text, fold_metadata, fold_outputs, materialize_folds

from sphr_dagster.fits import FitEngine

pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed "
                    "(pip install -e '.[k8s]'; make test-clusters installs it)")


class FakeCoreApi:
    """The calls PipesK8sClient makes: a created pod runs at once, its output (stdout and
    stderr, where Pipes writes its messages) is its log."""

    def __init__(self):
        self.pods, self.logs, self.deleted = {}, {}, []

    def create_namespaced_pod(self, namespace, body):
        container = body.spec.containers[0]
        env = {e.name: e.value for e in container.env or []}
        command = [sys.executable if c == "python" else c for c in container.command]
        done = subprocess.run(command, env={**os.environ, **env}, capture_output=True,
                              text=True)
        self.pods[body.metadata.name] = {"spec": body.spec, "exit": done.returncode,
                                         "namespace": namespace}
        # as the API serves it with timestamps=True: each line its own (increasing) stamp
        start = dt.datetime.now(dt.timezone.utc)
        self.logs[body.metadata.name] = [
            f"{(start + dt.timedelta(microseconds=i)).strftime('%Y-%m-%dT%H:%M:%S.%fZ')} "
            f"{line}\n".encode()
            for i, line in enumerate((done.stdout + done.stderr).splitlines())]

    def read_namespaced_pod_log(self, name, namespace, **kwargs):
        return iter(self.logs[name])

    def delete_namespaced_pod(self, name, namespace):
        self.deleted.append(name)


@pytest.fixture
def fake_cluster(monkeypatch):
    import kubernetes
    from dagster_k8s import client as k8s_client

    api = FakeCoreApi()

    class FakeClient:
        core_api = api

        def wait_for_pod(self, name, namespace, **kwargs):
            if api.pods.get(name, {}).get("exit", 0) != 0:
                raise RuntimeError(f"pod {name} failed with exit code {api.pods[name]['exit']}")

    monkeypatch.setattr(kubernetes.config, "load_kube_config", lambda *a, **k: None)
    monkeypatch.setattr(k8s_client.DagsterKubernetesClient, "production_client",
                        staticmethod(lambda *a, **k: FakeClient()))
    monkeypatch.setenv("SPHR_K8S_GPUS", "1")
    return api


def test_fold_fits_run_as_gpu_pods_through_the_k8s_client(fake_cluster, fold_cohorts,
                                                          tmp_path):
    result = materialize_folds(tmp_path / "k8s", fold_cohorts,
                               FitEngine(engine="k8s", cpus_per_fit=1))
    assert result.success, failure_text(result)
    assert fold_metadata(result)["engine"] == "k8s"
    assert len(fake_cluster.pods) == FOLDS and len(fake_cluster.deleted) == FOLDS
    for pod in fake_cluster.pods.values():
        container = pod["spec"].containers[0]
        assert container.resources.limits == {"nvidia.com/gpu": "1"}
        assert container.command[:3] == ["python", "-m", "sphr.train.pipes_entry"]
        assert {"DAGSTER_PIPES_CONTEXT", "DAGSTER_PIPES_MESSAGES", "SPHR_FIT_THREADS"} <= {
            e.name for e in container.env}
    local = materialize_folds(tmp_path / "local", fold_cohorts,
                              FitEngine(engine="local", cpus_per_fit=1))
    assert local.success
    k8s, here = fold_outputs(tmp_path / "k8s"), fold_outputs(tmp_path / "local")
    assert all((k8s[k][0] == here[k][0]).all() for k in here)
