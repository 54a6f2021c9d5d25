"""Baseline representations: shape and order, no test participant in any
fit, DiffMap, DeepPatient."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark

from sphr.artifacts import load_cohort, read_embeddings
from sphr.baselines import BASELINES, make_representation
from sphr.baselines.pipeline import fit_baselines, load_representation, run_baselines
from sphr.errors import ConfigError, InputError

# class-structured cohorts (not a model of UK Biobank): a fixture the evaluation benchmark
# shares, kept out of the library
_fixtures = load_benchmark("class_structured")
class_structured, write_cohort = _fixtures.class_structured, _fixtures.write_cohort

# small settings so the whole file runs in seconds; the estimators are the real ones
FAST = {"deep_patient": {"epochs": 2, "hidden": (40, 32)}, "diffmap": {"n_landmarks": 300},
        "ica": {"max_iter": 200}}


@pytest.fixture(scope="module")
def cohort_dir(tmp_path_factory) -> Path:
    return write_cohort(tmp_path_factory.mktemp("run") / "cohorts" / "female", n_train=500,
                        n_test=200, n_features=24, n_augmented=40, seed=3)


@pytest.fixture(scope="module")
def written(cohort_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("baselines") / "female"
    run_baselines(cohort_dir, out, BASELINES, seed=0, device="cpu", params=FAST)
    return out


@pytest.mark.parametrize("name", BASELINES)
def test_each_representation_keeps_row_order_ids_and_labels(name, written, cohort_dir):
    cohort = load_cohort(cohort_dir)
    for part, ref in (("train", cohort.train), ("test", cohort.test)):
        meta, Z = read_embeddings(written / name / f"embeddings_{part}.parquet")
        np.testing.assert_array_equal(meta["eid"].to_numpy(), ref["eid"].to_numpy())
        np.testing.assert_array_equal(meta["label"].to_numpy(), ref["label"].to_numpy())
        np.testing.assert_array_equal(meta["augmented"].to_numpy(), ref["augmented"].to_numpy())
        assert list(meta.columns) == ["eid", "label", "augmented", "age_years", "age_group"]
        assert Z.dtype == np.float32 and np.isfinite(Z).all()
        # 24 features: raw keeps them; PCA / ICA cannot give more than 24 components
        width = 32 if name in ("diffmap", "deep_patient") else 24
        assert Z.shape == (len(ref), width)
    info = json.loads((written / name / "representation.json").read_text())
    assert info["n_fit_rows"] == 500  # the real training rows, not the 40 augmented ones
    assert info["fitted_on"] == "real training rows"


@pytest.mark.parametrize("name", BASELINES)
def test_transform_is_row_by_row(name, written, cohort_dir):
    """A participant's embedding does not depend on who else is in the batch."""
    model = load_representation(written / name)
    X = load_cohort(cohort_dir).matrix("test")
    perm = np.random.default_rng(0).permutation(len(X))
    full = model.transform(X)
    np.testing.assert_allclose(model.transform(X[perm]), full[perm], atol=1e-5)
    np.testing.assert_allclose(model.transform(X[:7]), full[:7], atol=1e-5)


@pytest.mark.parametrize("name", BASELINES)
def test_the_shared_interface_saves_and_loads_every_baseline(name, written, cohort_dir,
                                                              tmp_path):
    """Every baseline is a sphr.representation.Representation: load reads the stage's
    model.joblib, save -> load gives the same map, and load refuses a file of another kind."""
    from sphr.representation import Representation

    X = load_cohort(cohort_dir).matrix("test")
    model = Representation.load(written / name / "model.joblib")
    assert isinstance(model, Representation) and model.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(model.transform(X),
                                  load_representation(written / name).transform(X))
    again = type(model).load(model.save(tmp_path / f"{name}.joblib"))
    np.testing.assert_array_equal(again.transform(X), model.transform(X))
    if name != "raw":
        with pytest.raises(InputError, match="not a Raw"):
            make_representation("raw").load(written / name / "model.joblib")
    with pytest.raises(InputError, match="missing representation file"):
        Representation.load(tmp_path / "none.joblib")


def test_no_test_participant_reaches_a_fit(cohort_dir, monkeypatch):
    """Sentinel: record every matrix handed to any representation's fit."""
    import sphr.representation as base

    seen: list[np.ndarray] = []
    original = base.Representation.fit

    def spy(self, X, y=None):
        seen.append(np.asarray(X).copy())
        return original(self, X, y)

    monkeypatch.setattr(base.Representation, "fit", spy)
    cohort = load_cohort(cohort_dir)
    fit_baselines(cohort, BASELINES, seed=0, device="cpu", params=FAST)
    assert len(seen) == len(BASELINES)
    test_rows = {r.tobytes() for r in cohort.matrix("test")}
    aug_rows = {r.tobytes() for r in cohort.train.loc[cohort.train["augmented"], cohort.features]
                .to_numpy(np.float32)}
    for X in seen:
        rows = {r.astype(np.float32).tobytes() for r in X}
        assert not rows & test_rows, "a test participant was used to fit a representation"
        assert not rows & aug_rows, "augmented rows were used to fit an unsupervised baseline"
        assert len(X) == 500


def test_changing_test_data_changes_nothing_else(cohort_dir):
    """Leakage by perturbation: scramble every test participant except a few witnesses.

    If any representation (or its scaler) were fitted on test rows, the training
    embeddings and the witnesses' test embeddings would move.
    """
    cohort = load_cohort(cohort_dir)
    a = fit_baselines(cohort, BASELINES, seed=0, device="cpu", params=FAST)
    witnesses = np.arange(5)
    junk = cohort.test.copy()
    rng = np.random.default_rng(99)
    rows = np.arange(5, len(junk))
    junk.loc[rows, cohort.features] = (rng.normal(size=(len(rows), len(cohort.features))) * 5 + 3
                                       ).astype(np.float32)
    cohort.test = junk
    b = fit_baselines(cohort, BASELINES, seed=0, device="cpu", params=FAST)
    for name in BASELINES:
        cols = [c for c in a[name].train.columns if c.startswith("e")]
        np.testing.assert_allclose(b[name].train[cols].to_numpy(), a[name].train[cols].to_numpy(),
                                   atol=1e-5, err_msg=name)
        np.testing.assert_allclose(b[name].test[cols].to_numpy()[witnesses],
                                   a[name].test[cols].to_numpy()[witnesses], atol=1e-5,
                                   err_msg=name)


def test_seeded_fits_repeat():
    X, _ = class_structured(400, 12, seed=1)
    for name in BASELINES:
        kw = dict(FAST.get(name, {}))
        z1 = make_representation(name, random_state=4, device="cpu", **kw).fit(X).transform(X)
        z2 = make_representation(name, random_state=4, device="cpu", **kw).fit(X).transform(X)
        np.testing.assert_allclose(z1, z2, atol=1e-6, err_msg=name)


def test_diffmap_landmarks_nystroem_and_sign():
    from pydiffmap.diffusion_map import DiffusionMap, nystroem_oos

    X, _ = class_structured(1500, 10, seed=2)
    dm = make_representation("diffmap", n_landmarks=600, k=32, random_state=0).fit(X)
    assert len(dm.landmark_index_) == 600 and dm.n_components_ == 32
    assert np.all(dm.eigenvalues_ < 0) and np.all(np.diff(dm.eigenvalues_) <= 1e-12)
    Z = dm.transform(X)
    # sign rule: on the landmarks, each coordinate's largest-magnitude value is positive
    L = Z[dm.landmark_index_]
    assert np.all(L[np.abs(L).argmax(axis=0), np.arange(L.shape[1])] > 0)
    # our Nystroem is pydiffmap's own, up to the sign of each eigenvector
    ref = DiffusionMap.from_sklearn(n_evecs=32, k=32, epsilon="bgh", alpha=0.5)
    ref.fit(np.asarray(X[dm.landmark_index_], dtype=np.float64))
    others = np.setdiff1d(np.arange(len(X)), dm.landmark_index_)[:200]
    theirs = nystroem_oos(ref, np.asarray(X[others], dtype=np.float64))
    ours = Z[others]
    # the top eigenvectors are well separated; compare those up to sign
    for j in range(5):
        s = np.sign(theirs[:, j] @ ours[:, j])
        np.testing.assert_allclose(s * theirs[:, j], ours[:, j], rtol=1e-3, atol=1e-4)


def test_diffmap_far_points_stay_finite():
    X, _ = class_structured(500, 8, seed=0)
    dm = make_representation("diffmap", n_landmarks=200).fit(X)
    far = X[:3] + 1e3
    assert np.isfinite(dm.transform(far)).all()


def test_deep_patient_architecture_and_training():
    X, _ = class_structured(600, 16, seed=0)
    dp = make_representation("deep_patient", epochs=4, hidden=(50, 40, 32), device="cpu").fit(X)
    assert [w.shape for w, _ in dp.layers_] == [(16, 50), (50, 40), (40, 32)]
    Z = dp.transform(X)
    assert Z.shape == (600, 32) and (Z > 0).all() and (Z < 1).all()  # sigmoid codes
    for curve in dp.loss_curve_:  # every layer's reconstruction loss goes down
        assert curve[-1] < curve[0]
    # default is the paper's DeepPatient: 500-500-32, 5% masking noise
    default = make_representation("deep_patient")
    assert default.hidden == (500, 500, 32) and default.noise == 0.05
    with pytest.raises(ConfigError):
        make_representation("deep_patient", noise=1.5).fit(X)


def test_unknown_representation_and_bad_input(cohort_dir, tmp_path):
    with pytest.raises(ConfigError):
        make_representation("umap")
    bad = tmp_path / "c"
    write_cohort(bad, n_train=60, n_test=30, n_features=5, n_augmented=0, n_triplets=10)
    df = pd.read_parquet(bad / "test.parquet")
    df.loc[4, "f02"] = np.nan
    df.to_parquet(bad / "test.parquet")
    with pytest.raises(InputError) as err:
        load_cohort(bad)
    assert "f02" in str(err.value) and "row 5" in str(err.value)
    (bad / "features.json").unlink()
    with pytest.raises(InputError, match=r"features\.json"):
        load_cohort(bad)


def test_cli_baselines(cohort_dir, tmp_path):
    out = tmp_path / "b"
    proc = subprocess.run(
        [sys.executable, "-m", "sphr.cli", "-q", "baselines", str(cohort_dir), "--out", str(out),
         "--representations", "raw,pca,diffmap", "--landmarks", "200"],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["fit_s"].keys() == {"raw", "pca", "diffmap"}
    for name in ("raw", "pca", "diffmap"):
        assert (out / name / "embeddings_test.parquet").exists()
