"""The cross-fit's fold models trained as one stack (``train_folds(pack=True)``, what a GPU
does by default) write the folders the fold-by-fold fits write: same files, same reports
but for the stack's timings, and weights and embeddings equal up to float rounding."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from sphr.cohorts import CohortConfig, run_cohorts
from sphr.train.config import TrainConfig
from sphr.train.run import completed_fit, fold_fits, train_folds


@pytest.fixture(scope="module")
def fold_cohort(ingest_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("packed")
    run_cohorts(ingest_dir / "baseline.parquet", out, CohortConfig(n_triplets=600, seed=5, folds=3))
    return out / "female"


def _config() -> TrainConfig:
    return TrainConfig(epochs=2, batch_size=128, device="cpu", threads=1, checkpoint_every=0)


def test_packed_fold_fits_are_the_fold_by_fold_fits(fold_cohort, tmp_path):
    config = _config()
    alone = train_folds(fold_cohort, tmp_path / "alone", config, pack=False)
    packed = train_folds(fold_cohort, tmp_path / "packed", config, pack=True)
    assert [r["timings"]["models_in_stack"] for r in alone] == [1, 1, 1]
    assert [r["timings"]["models_in_stack"] for r in packed] == [3, 3, 3]
    for a, p in zip(alone, packed, strict=True):
        for key in ("cohort", "sex", "config", "data", "n_triplets", "n_train_rows",
                    "n_test_rows", "epochs"):
            assert a[key] == p[key], key
        assert p["final_loss"] == pytest.approx(a["final_loss"], rel=1e-4)
    for (k, _, a_dir), (_, _, p_dir) in zip(fold_fits(fold_cohort, tmp_path / "alone"),
                                            fold_fits(fold_cohort, tmp_path / "packed"),
                                            strict=True):
        assert sorted(f.name for f in a_dir.iterdir()) == sorted(f.name for f in p_dir.iterdir())
        wa = torch.load(a_dir / "model.pt", weights_only=False)["state_dict"]
        wp = torch.load(p_dir / "model.pt", weights_only=False)["state_dict"]
        for name in wa:
            torch.testing.assert_close(wp[name], wa[name], rtol=1e-4, atol=1e-5)
        for part in ("train", "test"):
            za = pd.read_parquet(a_dir / f"embeddings_{part}.parquet")
            zp = pd.read_parquet(p_dir / f"embeddings_{part}.parquet")
            assert list(za["eid"]) == list(zp["eid"])
            num = za.select_dtypes("number").columns.drop("eid", errors="ignore")
            np.testing.assert_allclose(zp[num].to_numpy(), za[num].to_numpy(), atol=1e-4)
        assert json.loads((p_dir / "train_report.json").read_text())["device"] == "cpu", k


def test_a_packed_rerun_keeps_the_fits_in_place_and_packs_only_the_lost_ones(fold_cohort,
                                                                             tmp_path):
    import shutil

    config = _config()
    first = train_folds(fold_cohort, tmp_path, config, pack=True)
    fits = fold_fits(fold_cohort, tmp_path)
    kept = fits[0][2] / "model.pt"
    stamp = kept.stat().st_mtime_ns
    shutil.rmtree(fits[1][2])  # a run that lost fold 1
    again = train_folds(fold_cohort, tmp_path, config, pack=True)
    assert kept.stat().st_mtime_ns == stamp
    # one fold left to fit trains alone: there is nothing to pack it with
    assert again[1]["timings"]["models_in_stack"] == 1
    assert again[0] == first[0]
    assert all(completed_fit(c, o, config) is not None for _, c, o in fits)


def test_pack_defaults_to_the_device(fold_cohort, tmp_path, monkeypatch):
    import sphr.train.run as run

    calls = []
    monkeypatch.setattr(run, "_train_packed", lambda *a: calls.append(a[2]))
    train_folds(fold_cohort, tmp_path, _config())  # the CPU: fold by fold
    assert calls == []
