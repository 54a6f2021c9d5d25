"""The two sex partitions run side by side and write what they write one after the other."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from sphr.settings import resolve
from sphr_dagster.definitions import INGEST, PER_SEX
from sphr_dagster.runner import materialize_partitions, materialize_selection

SMALL = """
[cohorts]
n_triplets = 3000
# two folds: the cross-fit runs, at the least cost (complete cases: half the people)
folds = 2
impute = false
[train]
epochs = 2
batch_size = 512
comparison_losses = ["triplet", "nplb"]
[baselines]
deep_patient_epochs = 2
[evaluate]
n_splits = 2
classifiers = ["knn", "lda"]
# its fits take milliseconds here, where starting a pool of workers takes seconds
n_jobs = 1
[evaluate.nn]
epochs = 3
[risk]
n_bootstrap = 20
"""


def _run(root: Path, export: Path, monkeypatch, workers: int) -> Path:
    run = root / "run"
    monkeypatch.setenv("DAGSTER_HOME", str(root / "home"))
    (root / "home").mkdir(parents=True)
    (root / "small.toml").write_text(SMALL)
    # the settings reach the spawned workers as an argument, not through the environment
    settings = resolve(root / "small.toml", export=str(export), run_dir=str(run),
                       profile="demo", losses=True)
    assert materialize_selection(INGEST, None, settings).success
    # both modes in fresh one-thread processes, so only the scheduling differs
    results = materialize_partitions(PER_SEX, ["female", "male"], settings, workers=workers,
                                     threads=1, spawn=True)
    assert [r.success for r in results] == [True, True]
    return run


def _model_state(path: Path) -> dict[str, np.ndarray]:
    blob = torch.load(io.BytesIO(path.read_bytes()), map_location="cpu", weights_only=False)
    state = blob.get("state_dict", blob) if isinstance(blob, dict) else blob
    return {k: v.numpy() for k, v in state.items() if torch.is_tensor(v)}


def _same(a: Path, b: Path) -> None:
    if a.suffix == ".parquet":
        x, y = pd.read_parquet(a), pd.read_parquet(b)
        # wall-clock columns are the only ones allowed to differ
        drop = [c for c in x.columns if c.endswith("_s") or c == "seconds"]
        pd.testing.assert_frame_equal(x.drop(columns=drop), y.drop(columns=drop))
    elif a.suffix == ".npz":
        with np.load(a) as x, np.load(b) as y:
            assert sorted(x.files) == sorted(y.files)
            for k in x.files:
                np.testing.assert_array_equal(x[k], y[k])
    elif a.suffix == ".pt":
        x, y = _model_state(a), _model_state(b)
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])


@pytest.mark.slow
def test_partitions_in_parallel_equal_sequential(tmp_path, ukb_export, monkeypatch):
    seq = _run(tmp_path / "sequential", ukb_export, monkeypatch, workers=1)
    par = _run(tmp_path / "parallel", ukb_export, monkeypatch, workers=2)
    files = {p.relative_to(seq) for p in seq.rglob("*") if p.is_file()}
    assert files == {p.relative_to(par) for p in par.rglob("*") if p.is_file()}
    # no file is written by both partitions: every output lies under a sex folder or ingest
    for rel in files:
        # the cross-fit's DeepPatients lie in baselines/folds/<sex>/, beside baselines/<sex>/
        sex_part = rel.parts[2] if rel.parts[:2] == ("baselines", "folds") else rel.parts[1]
        assert rel.parts[0] == "ingest" or (len(rel.parts) > 2 and sex_part in
                                            ("female", "male")), rel
    compared = [rel for rel in sorted(files) if rel.suffix in (".parquet", ".npz", ".pt")]
    assert any(r.suffix == ".pt" for r in compared) and len(compared) > 40
    for rel in compared:
        _same(seq / rel, par / rel)

