"""The training step through Dagster Pipes: a subprocess that needs only sphr + dagster-pipes."""

from __future__ import annotations

import subprocess
import sys

import dagster as dg
import pandas as pd
import pytest

from sphr_dagster.definitions import ASSETS, CHECKS
from sphr_dagster.resources import default_resources


def test_pipes_entry_never_imports_dagster():
    code = ("import sys, sphr.train.pipes_entry\n"
            "assert not [m for m in sys.modules if m.split('.')[0] == 'dagster'], 'dagster'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("process", ["subprocess", "step"])
def test_training_through_pipes_reports_loss_curve(tmp_path, cohorts_dir, process):
    """A fit in a process of its own reports through Pipes what a fit in the step's process
    returns: the same metadata either way."""
    from sphr_dagster.assets.training import sphr_training
    from sphr_dagster.fits import FitEngine

    run = tmp_path / "run"
    (run / "cohorts").mkdir(parents=True)
    (run / "cohorts" / "female").symlink_to(cohorts_dir / "female")
    result = dg.materialize(
        [*ASSETS, *CHECKS], selection=dg.AssetSelection.assets(["train", "sphr_model"],
                                                             ["train", "embeddings"]),
        partition_key="female", resources={
            **default_resources(str(run), environment=False),
            "fit_engine": FitEngine(local_process=process)},
        run_config={"ops": {sphr_training.op.name: {"config": {
            "epochs": 2, "batch_size": 512}}}})
    assert result.success
    meta = next(e.materialization.metadata for e in result.get_asset_materialization_events()
                if e.asset_key == dg.AssetKey(["train", "sphr_model"]))
    assert (meta["engine"].value, meta["process"].value) == ("local", process)
    assert len(meta["loss_curve_values"].value) == 2  # reported by the fit
    assert meta["n_triplets"].value > 0 and "loss_curve" in meta
    assert (run / "train" / "female" / "nplb" / "model.pt").is_file()


@pytest.mark.slow
def test_the_loss_comparison_is_one_fit_through_the_engine(tmp_path, cohorts_dir):
    """The loss comparison's stack runs through the fit engine as the SPHR models do: in a
    process of its own it trains the same models as in the step's process (same seed, same
    thread count), and its report comes back through Pipes as the asset's metadata."""
    from sphr_dagster.assets.training import loss_comparison
    from sphr_dagster.fits import FitEngine

    embeddings = {}
    for process in ("subprocess", "step"):
        run = tmp_path / process
        (run / "cohorts").mkdir(parents=True)
        (run / "cohorts" / "female").symlink_to(cohorts_dir / "female")
        result = dg.materialize(
            [*ASSETS, *CHECKS], selection=dg.AssetSelection.assets(["train", "loss_comparison"]),
            partition_key="female", resources={
                **default_resources(str(run), environment=False),
                "fit_engine": FitEngine(local_process=process, cpus_per_fit=1)},
            run_config={"ops": {loss_comparison.op.name: {"config": {
                "epochs": 1, "batch_size": 512, "losses": ["triplet", "nplb"]}}}})
        assert result.success
        meta = result.get_asset_materialization_events()[0].materialization.metadata
        assert (meta["engine"].value, meta["process"].value) == ("local", process)
        assert meta["trained"].value == "triplet, nplb"
        assert meta["comparison_report"].value["losses"] == ["triplet", "nplb"]
        out = run / "train" / "female" / "comparison"
        embeddings[process] = {loss: pd.read_parquet(out / loss / "embeddings_test.parquet")
                               for loss in ("triplet", "nplb")}
    for loss, frame in embeddings["step"].items():
        pd.testing.assert_frame_equal(frame, embeddings["subprocess"][loss])


def test_kubernetes_gpu_location_validates():
    """The documented GPU configuration (pipeline/k8s.py); needs dagster-k8s, not installed by
    default (run with it on PYTHONPATH to check)."""
    import importlib.util
    import os
    from pathlib import Path

    if importlib.util.find_spec("dagster_k8s") is None:
        pytest.skip("dagster-k8s is not installed (optional: pip install -e '.[k8s]')")
    from sphr_dagster.k8s import defs, gpu_training_client

    assert defs.resources["fit_engine"].engine == "k8s"
    client = gpu_training_client()
    limits = client.pod_spec()["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1"}
    exe = Path(sys.executable).with_name("dagster")
    done = subprocess.run([str(exe), "definitions", "validate", "-m", "sphr_dagster.k8s"],
                          capture_output=True, text=True, env={**os.environ}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
