"""Downstream evaluation: classifier settings, splits, leakage, NN for EHR, tables, end to end."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from benchmark_loader import load_benchmark

from sphr.artifacts import embedding_frame, load_cohort
from sphr.evaluate.classifiers import NN_EHR_CONFIG, knn_vote, make_classifier, xgboost_device
from sphr.evaluate.names import CLASSIFIERS
from sphr.evaluate.nn_ehr import NNForEHRConfig, fit_predict_many
from sphr.evaluate.paper import LOSSES, PAPER_LOSSES, PAPER_REPRESENTATION
from sphr.evaluate.protocol import EvalConfig, classify_embeddings, make_splits, summarize
from sphr.io import write_parquet

# class-structured cohorts (not a model of UK Biobank): a fixture the evaluation benchmark
# shares, kept out of the library
_fixtures = load_benchmark("class_structured")
class_structured, write_cohort = _fixtures.class_structured, _fixtures.write_cohort

FAST_NN = NNForEHRConfig(epochs=3)


# ----------------------------------------------- settings (docs/METHODS.md#evaluation-protocol)

def test_classifier_settings_match_spec():
    knn = make_classifier("knn", "multi")
    p = knn.get_params()
    assert (p["n_neighbors"], p["weights"], p["metric"], p["p"], p["algorithm"],
            p["leaf_size"], p["metric_params"]) == (50, "uniform", "minkowski", 2, "auto", 30, None)

    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    lda = make_classifier("lda", "binary")
    assert lda.get_params() == LinearDiscriminantAnalysis().get_params()

    for task, objective in (("binary", "binary:logistic"), ("multi", "multi:softprob")):
        x = make_classifier("xgboost", task, device="cpu").get_params()
        assert (x["max_depth"], x["n_estimators"], x["learning_rate"], x["tree_method"],
                x["random_state"], x["objective"]) == (4, 50, 0.05, "exact", 0, objective)
        assert (x["booster"], x["subsample"], x["min_child_weight"], x["gamma"], x["reg_lambda"],
                x["reg_alpha"], x["base_score"], x["max_bin"]) == (
            "gbtree", 1, 1, 0, 1, 0, 0.5, 256)
    assert xgboost_device("cpu") == ("cpu", "exact")

    nn = make_classifier("nn_ehr", "multi")
    assert (nn.lr, nn.weight_decay, nn.epochs) == (1e-3, 1e-3, 100)
    # K.5.1: Adam lr 1e-3, L2 1e-3, 100 epochs; our decisions: batch 512, attention 32, MLP 64-32
    for cfg in (NN_EHR_CONFIG, NNForEHRConfig(), EvalConfig().nn):
        assert (cfg.lr, cfg.weight_decay, cfg.epochs, cfg.batch_size, cfg.attention_hidden,
                cfg.hidden) == (1e-3, 1e-3, 100, 512, 32, (64, 32))
    assert EvalConfig().n_splits == 5 and EvalConfig().test_size == 0.2
    assert EvalConfig().classifiers == CLASSIFIERS == ("knn", "lda", "nn_ehr", "xgboost")


def test_xgboost_method_hist_is_opt_in_and_reported():
    """The paper's exact tree method is the default on the CPU; hist is asked for by name
    (UK Biobank size), reaches the estimator and the report, and a typo is refused."""
    from sphr.errors import ConfigError
    from sphr.evaluate.classifiers import classifier_settings

    assert EvalConfig().xgboost_method == "auto"
    assert xgboost_device("cpu", "hist") == ("cpu", "hist")
    assert xgboost_device("cpu", "exact") == ("cpu", "exact")
    x = make_classifier("xgboost", "binary", device="cpu", xgboost_method="hist").get_params()
    assert x["tree_method"] == "hist" and x["max_bin"] == 256
    assert classifier_settings("cpu", xgboost_method="hist")["xgboost"]["tree_method"] == "hist"
    assert classifier_settings("cpu")["xgboost"]["tree_method"] == "exact"
    with pytest.raises(ConfigError, match="XGBoost method"):
        EvalConfig(xgboost_method="approx")
    with pytest.raises(ConfigError, match="XGBoost method"):
        xgboost_device("cpu", "approx")


def test_knn_vote_is_kneighborsclassifier():
    """One neighbour search, two votes: identical to KNeighborsClassifier.predict, ties included."""
    rng = np.random.default_rng(0)
    X = rng.integers(0, 3, size=(400, 2)).astype(float)  # many distance ties
    y3 = rng.choice(3, size=400, p=[0.5, 0.4, 0.1])
    tr, te = np.arange(300), np.arange(300, 400)
    knn = make_classifier("knn", "multi").fit(X[tr], y3[tr])
    neigh = knn.kneighbors(X[te], return_distance=False)
    np.testing.assert_array_equal(knn_vote(neigh, y3[tr], 3), knn.predict(X[te]))
    yb = (y3 != 0).astype(int)
    knn_b = make_classifier("knn", "binary").fit(X[tr], yb[tr])
    np.testing.assert_array_equal(knn_vote(neigh, yb[tr], 2), knn_b.predict(X[te]))


# ---------------------------------------------------------------- splits

def test_splits_are_seeded_stratified_and_paired():
    _, y = class_structured(1000, 5, seed=0)
    a = make_splits(y, n_splits=5, seed=0)
    b = make_splits(y, n_splits=5, seed=0)
    assert len(a) == 5
    for (tr, te), (tr2, te2) in zip(a, b, strict=True):
        np.testing.assert_array_equal(tr, tr2)
        np.testing.assert_array_equal(te, te2)
        assert len(te) == 200 and len(tr) == 800
        assert not np.intersect1d(tr, te).size and len(np.union1d(tr, te)) == 1000
        for c in range(3):  # stratified: class shares kept within one participant
            assert abs((y[te] == c).sum() - 0.2 * (y == c).sum()) <= 1
    assert not np.array_equal(a[0][1], a[1][1])  # different seeds, different splits
    c = make_splits(y, n_splits=5, seed=1)
    np.testing.assert_array_equal(c[0][1], a[1][1])  # split i uses seed + i


# ---------------------------------------------------------------- leakage in the protocol

@pytest.mark.parametrize("clf", CLASSIFIERS)
def test_held_out_rows_never_reach_a_classifier_fit(clf):
    """Scramble the held-out rows of split 0 except a few witnesses: the witnesses'
    predictions must not move (a scaler or classifier fitted on held-out rows would)."""
    X, y = class_structured(600, 8, seed=5)
    splits = make_splits(y, n_splits=2, seed=0)
    cfg = EvalConfig(n_splits=2, classifiers=(clf,), n_jobs=1, device="cpu", nn=FAST_NN)
    a = classify_embeddings({"z": X}, y, cfg, splits=splits)
    te = splits[0][1]
    others = te[10:]  # te[:10] are the witnesses
    X2 = X.copy()
    X2[others] = np.random.default_rng(1).normal(size=(len(others), X.shape[1])) * 10 + 5
    # labels of held-out rows are scrambled too (the splits are fixed above)
    y2 = y.copy()
    y2[others] = np.random.default_rng(2).permutation(y[others])
    b = classify_embeddings({"z": X2}, y2, cfg, splits=splits)
    for task in ("binary", "multi"):
        pa = a.predictions[("z", clf, task, 0)][:10]
        pb = b.predictions[("z", clf, task, 0)][:10]
        np.testing.assert_array_equal(pa, pb, err_msg=f"{clf} {task}")


def test_identical_embedding_reuses_the_earlier_records_exactly():
    """The loss comparison's NPLB model is the SPHR model in the demo: its records are copied
    from the representations' evaluation, and equal what refitting would give; an embedding
    that differs, or a classifier with other settings, is refitted."""
    X, y = class_structured(300, 6, seed=3)
    cfg = EvalConfig(n_splits=2, classifiers=("xgboost", "lda"), n_jobs=1, device="cpu")
    reps = classify_embeddings({"sphr": X, "raw": X[:, ::-1].copy()}, y, cfg)
    other = X + 0.01
    fresh = classify_embeddings({"nplb": X, "triplet": other}, y, cfg)
    reused = classify_embeddings({"nplb": X, "triplet": other}, y, cfg, prior=reps,
                                 same_as={"nplb": "sphr"})
    assert reused.settings["reused"] == {
        "nplb": {"from": "sphr", "classifiers": ["lda", "xgboost"]}
    }
    cols = ["representation", "classifier", "task", "split", "weighted_f1", "micro_f1"]
    pd.testing.assert_frame_equal(reused.scores[cols], fresh.scores[cols])
    for key, pred in fresh.predictions.items():
        np.testing.assert_array_equal(reused.predictions[key], pred)
    # other XGBoost settings: only LDA's records carry over
    hist = dataclasses.replace(cfg, xgboost_method="hist")
    part = classify_embeddings({"nplb": X}, y, hist, prior=reps, same_as={"nplb": "sphr"})
    assert part.settings["reused"] == {"nplb": {"from": "sphr", "classifiers": ["lda"]}}
    # other splits, or the same splits under another seed: nothing carries over
    moved = classify_embeddings({"nplb": X}, y, dataclasses.replace(cfg, seed=7), prior=reps,
                                same_as={"nplb": "sphr"})
    assert "reused" not in moved.settings
    reseeded = classify_embeddings({"nplb": X}, y, dataclasses.replace(cfg, seed=7),
                                   splits=reps.splits, prior=reps, same_as={"nplb": "sphr"})
    assert "reused" not in reseeded.settings


def test_stacked_nn_models_are_independent():
    """Model 0 of a stack is unaffected by model 1's data (exactly M separate trainings)."""
    X, y = class_structured(400, 6, seed=0)
    tr0, te0 = np.arange(300), np.arange(300, 400)
    tr1 = np.random.default_rng(0).permutation(400)[:300]
    y_other = np.random.default_rng(1).integers(0, 3, 400)
    p1 = fit_predict_many(X, [y, y], [tr0, tr1], [te0, te0], n_classes=[3, 3], config=FAST_NN,
                          device="cpu")
    p2 = fit_predict_many(X, [y, y_other], [tr0, tr1], [te0, te0], n_classes=[3, 3],
                          config=FAST_NN, device="cpu")
    np.testing.assert_array_equal(p1[0], p2[0])


def test_nn_for_ehr_learns_and_masks_absent_classes():
    X, y = class_structured(2000, 10, seed=0, separation=0.3)
    yb = (y != 0).astype(int)
    tr, te = np.arange(1500), np.arange(1500, 2000)
    cfg = NNForEHRConfig(epochs=15)
    pm, pb = fit_predict_many(X, [y, yb], [tr, tr], [te, te], n_classes=[3, 2], config=cfg,
                              device="cpu")
    assert (pm == y[te]).mean() > 0.8
    assert set(np.unique(pb)) <= {0, 1} and (pb == yb[te]).mean() > 0.8
    clf = make_classifier("nn_ehr", "binary", nn_config=cfg, device="cpu").fit(X[tr], yb[tr])
    assert (clf.predict(X[te]) == yb[te]).mean() > 0.8
    assert clf.predict_proba(X[te]).shape == (500, 2)


def test_attention_weights_are_a_distribution():
    import torch

    from sphr.evaluate.nn_ehr import _StackedNet

    net = _StackedNet(2, 5, 3, NNForEHRConfig(), torch.Generator().manual_seed(0),
                      torch.device("cpu"))
    a = net.attention(torch.randn(2, 7, 5))
    assert a.shape == (2, 7, 5)
    torch.testing.assert_close(a.sum(-1), torch.ones(2, 7))


# ---------------------------------------------------------------- summaries and tables

def test_summarize_mean_and_sample_sd():
    scores = pd.DataFrame({"representation": "r", "classifier": "knn", "task": "binary",
                           "split": range(5), "weighted_f1": [0.1, 0.2, 0.3, 0.4, 0.5],
                           "micro_f1": 0.5})
    s = summarize(scores).set_index("metric")
    assert s.loc["weighted_f1", "mean"] == pytest.approx(0.3)
    assert s.loc["weighted_f1", "sd"] == pytest.approx(np.std([0.1, 0.2, 0.3, 0.4, 0.5], ddof=1))
    assert s.loc["micro_f1", "sd"] == 0 and s.loc["micro_f1", "n_splits"] == 5


def test_paper_numbers_are_transcribed():
    # spot checks against the paper's tables
    female = ("female", "binary", "weighted_f1")
    assert PAPER_REPRESENTATION[(*female, "sphr", "xgboost")][:2] == (0.7223, 0.002)
    assert PAPER_REPRESENTATION[("female", "multi", "weighted_f1", "diffmap",
                                 "xgboost")][0] == 0.5390
    assert PAPER_REPRESENTATION[("male", "binary", "weighted_f1", "pca", "xgboost")][0] == 0.6157
    assert PAPER_REPRESENTATION[("male", "multi", "weighted_f1", "deep_patient",
                                 "xgboost")][0] == 0.5896
    assert PAPER_REPRESENTATION[("male", "multi", "micro_f1", "sphr", "knn")][0] == 0.7921
    assert PAPER_REPRESENTATION[("male", "binary", "micro_f1", "ica", "nn_ehr")][0] == 0.6419
    assert ("female", "binary", "weighted_f1", "ica", "knn") not in PAPER_REPRESENTATION
    assert ("male", "binary", "weighted_f1", "diffmap", "knn") not in PAPER_REPRESENTATION
    # 6 tables x 5 representations x 4 classifiers
    assert len(PAPER_REPRESENTATION) == 120
    multi_f = [PAPER_LOSSES[("female", "multi", x)][0] for x in LOSSES]
    assert multi_f == [0.5874, 0.6064, 0.5994, 0.6047, 0.6103, 0.5416, 0.6642]
    multi_m = [PAPER_LOSSES[("male", "multi", x)][0] for x in LOSSES]
    assert multi_m == [0.6861, 0.6961, 0.6989, 0.6964, 0.6816, 0.6628, 0.7845]
    assert PAPER_LOSSES[("male", "binary", "npair")][0] == 0.7423
    assert ("female", "binary", "infonce") not in PAPER_LOSSES


def test_tables_put_the_paper_beside_ours():
    from sphr.evaluate.tables import representation_markdown, representation_table

    rows = []
    for rep in ("raw", "ica", "sphr"):
        for clf in ("knn", "xgboost"):
            for s in range(3):
                rows.append({"representation": rep, "classifier": clf, "task": "binary",
                             "split": s, "weighted_f1": 0.6 + 0.01 * s, "micro_f1": 0.7})
    t = representation_table(summarize(pd.DataFrame(rows)), "female")
    hit = t[(t.representation == "sphr") & (t.classifier == "xgboost")
            & (t.metric == "weighted_f1")]
    assert hit["paper_mean"].item() == 0.7223 and hit["paper_table"].item() == "Table 2"
    assert t[(t.representation == "ica")]["paper_mean"].isna().all()  # no ICA for women
    md = representation_markdown(t)
    assert "SPHR (paper)" in md and "0.7223 ± 0.0020" in md and "0.6100 ± 0.0100" in md
    assert re.search(r"^\| KNNs +\|", md, re.M) and "(the paper has no such table)" in md
    assert "ours" in md and "paper SPHR > Not transformed" in md


# ---------------------------------------------------------------- end to end

@dataclasses.dataclass(frozen=True)
class _StubConfig:
    """Test stand-in for sphr.train.TrainConfig (the real one is another stage's)."""

    loss: str = "nplb"
    epochs: int = 3
    batch_size: int = 64
    seed: int = 0
    device: str = "auto"

    @classmethod
    def profile(cls, name: str) -> _StubConfig:
        return cls(epochs={"demo": 3, "paper": 1000}[name])


class _StubTrainer:
    """Records what it is asked to train; 'embeds' with a loss-specific random projection."""

    TrainConfig = _StubConfig

    def __init__(self) -> None:
        self.calls: list[list[_StubConfig]] = []

    def train_many(self, X, triplets, cfgs, labels=None, augmented=None):
        assert X.shape[0] == len(labels) and triplets.shape[1] == 3
        assert augmented is not None and len(augmented) == X.shape[0]
        self.calls.append(list(cfgs))
        # model selection as the real stack reports it: each model its own best epoch
        return [type("R", (), {"model": (c.loss, X.shape[1]), "loss_curve": [1.0, 0.8, 0.7],
                               "validation": {"best_epoch": 1 + i, "epochs_run": 3,
                                              "best_val_loss": 0.9, "val_loss": [0.9, 0.95, 1.0],
                                              "val_knn_f1": [0.5, 0.55, 0.6]}})()
                for i, c in enumerate(cfgs)]

    @staticmethod
    def data_key(X, labels, triplets):
        from sphr.train.run import data_key

        return data_key(X, labels, triplets)

    @staticmethod
    def embed(model, X, device="auto"):
        loss, d = model
        W = np.random.default_rng(abs(hash(loss)) % 2**32).normal(size=(d, 32))
        return np.tanh(X @ W / np.sqrt(d)).astype(np.float32)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("run")
    for i, sex in enumerate(("female", "male")):
        write_cohort(run / "cohorts" / sex, n_train=400, n_test=250, n_features=16, seed=i)
        # stand-in SPHR embeddings (the training stage writes the real ones here)
        cohort = load_cohort(run / "cohorts" / sex)
        W = np.random.default_rng(7).normal(size=(16, 32))
        for part, df in (("train", cohort.train), ("test", cohort.test)):
            Z = np.tanh(df[cohort.features].to_numpy(np.float32) @ W / 4).astype(np.float32)
            write_parquet(
                embedding_frame(df, Z), run / "train" / sex / "nplb" / f"embeddings_{part}.parquet"
            )
    return run


FAST_BASELINES = {"deep_patient": {"epochs": 1, "hidden": (32, 32)},
                  "diffmap": {"n_landmarks": 200}}


@pytest.fixture(scope="module")
def prepared(run_dir, tmp_path_factory) -> tuple[Path, _StubTrainer]:
    """A copy of ``run_dir`` with what the evaluation reads from the stages before it:
    baselines (the baselines stage) and a two-loss comparison (the training stage, stub)."""
    import shutil

    from sphr.baselines.pipeline import run_baselines
    from sphr.layout import baselines_dir, cohort_dir
    from sphr.train.comparison import train_loss_comparison

    run = tmp_path_factory.mktemp("prepared") / "run"
    shutil.copytree(run_dir / "cohorts", run / "cohorts")
    shutil.copytree(run_dir / "train", run / "train")
    trainer = _StubTrainer()
    for sex in ("female", "male"):
        run_baselines(cohort_dir(run, sex), baselines_dir(run, sex), params=FAST_BASELINES,
                      device="cpu")
        report = train_loss_comparison(cohort_dir(run, sex), None, ("triplet", "nplb"),
                                       overrides={"epochs": 2}, device="cpu", trainer=trainer)
        assert report["trained"] == ["triplet", "nplb"]
        # each loss's chosen epoch, and the loss that kept the stack training
        assert report["model_selection"]["nplb"] == {"best_epoch": 2, "epochs_run": 3,
                                                     "best_val_loss": 0.9}
        assert report["stack_held_by"] == "nplb"
        curve = pd.read_parquet(run / "train" / sex / "comparison" / "triplet"
                                / "loss_curve.parquet")
        assert list(curve.columns) == ["epoch", "loss", "val_loss", "val_knn_f1"]
    return run, trainer


def test_run_evaluate_end_to_end(prepared, tmp_path):
    from sphr.evaluate.inputs import missing_baselines
    from sphr.evaluate.pipeline import run_evaluate
    from sphr.layout import cohort_dir
    from sphr.train.comparison import train_loss_comparison

    run_dir, trainer = prepared
    # same data, seeds and epochs for every loss: one batched call, configs differ only in loss
    assert len(trainer.calls) == 2  # one per sex
    cfgs = trainer.calls[0]
    assert [c.loss for c in cfgs] == ["triplet", "nplb"]
    assert {dataclasses.replace(c, loss="x") for c in cfgs} == {
        _StubConfig(loss="x", epochs=2, device="cpu")
    }

    out = tmp_path / "eval"
    cfg = EvalConfig(n_splits=2, n_jobs=2, device="cpu", nn=FAST_NN)
    summary = run_evaluate(run_dir, out, eval_config=cfg, losses=("triplet", "nplb"),
                           device="cpu")
    assert summary["sexes"] == ["female", "male"]
    for sex in ("female", "male"):
        d = out / sex
        scores = pd.read_parquet(d / "scores.parquet")
        assert set(scores["representation"]) == {"raw", "pca", "ica", "diffmap", "deep_patient",
                                                 "sphr"}
        assert len(scores) == 6 * 4 * 2 * 2
        assert scores[["weighted_f1", "micro_f1"]].apply(lambda c: c.between(0, 1)).all().all()
        table = pd.read_parquet(d / "representations.parquet")
        assert {"mean", "sd", "paper_mean", "paper_sd", "paper_table"} <= set(table.columns)
        losses = pd.read_parquet(d / "losses.parquet")
        assert set(losses["loss"]) == {"triplet", "nplb"}
        for name in ("raw", "sphr", "representations"):
            assert (d / "plots" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
        splits = pd.read_parquet(d / "splits.parquet")
        assert splits.groupby("split")["held_out"].mean().round(1).eq(0.2).all()
        assert "profile demo: {" in (d / "losses.md").read_text()
        assert summary["per_sex"][sex]["losses"]["trained"] == ["triplet", "nplb"]
    md = (out / "tables.md").read_text()
    assert "Women" in md and "Men" in md and "Table A5" in md and "Loss comparison" in md
    assert "NPLB (paper)" in md and "0.6642 ± 0.0020" in md

    # rerun: baselines and loss embeddings are reused, not refitted / retrained
    assert missing_baselines(run_dir, "female", ("raw", "pca", "deep_patient", "sphr")) == []
    again = train_loss_comparison(cohort_dir(run_dir, "female"), None, ("triplet", "nplb"),
                                  overrides={"epochs": 2}, device="cpu", trainer=trainer)
    assert len(trainer.calls) == 2 and again["trained"] == []
    assert again["reused"] == ["triplet", "nplb"]


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


def test_evaluation_writes_only_under_its_folder(prepared):
    """The evaluation stage reads the other stages' folders and writes only RUN/evaluate."""
    from sphr.evaluate.pipeline import run_evaluate

    run_dir, _ = prepared
    before = _files(run_dir)
    run_evaluate(run_dir, eval_config=EvalConfig(n_splits=2, classifiers=("lda",), n_jobs=1),
                 losses=("triplet", "nplb"), loss_classifiers=("lda",), device="cpu")
    after = _files(run_dir)
    changed = {k for k in after if before.get(k) != after[k]} | (before.keys() - after.keys())
    assert changed and all(k.startswith("evaluate/") for k in changed), sorted(changed)
    assert (run_dir / "evaluate" / "female" / "losses.parquet").exists()


def test_missing_inputs_name_their_folder_and_command(prepared, tmp_path):
    """A missing loss comparison or baseline is an InputError, never fitted or trained here."""
    import shutil

    from sphr.errors import InputError
    from sphr.evaluate.pipeline import run_evaluate

    run = tmp_path / "run"
    shutil.copytree(prepared[0] / "cohorts", run / "cohorts")
    shutil.copytree(prepared[0] / "baselines", run / "baselines")
    quick = {"sexes": ["female"], "eval_config": EvalConfig(n_splits=2, classifiers=("lda",),
                                                            n_jobs=1)}
    with pytest.raises(InputError, match=r"no loss comparison for triplet.*sphr train .*--losses "
                       r"triplet,nplb") as err:
        run_evaluate(run, representations=("raw",), losses=("triplet", "nplb"), **quick)
    assert "train/female/comparison" in str(err.value)
    shutil.rmtree(run / "baselines" / "female" / "pca")
    with pytest.raises(InputError, match=r"missing baseline embeddings for pca.*sphr baselines"):
        run_evaluate(run, representations=("raw", "pca"), losses=(), **quick)
    assert not (run / "train").exists() and not (run / "baselines" / "female" / "pca").exists()


def test_cli_evaluate_without_losses(run_dir, tmp_path):
    out = tmp_path / "e"
    proc = subprocess.run(
        [sys.executable, "-m", "sphr.cli", "-q", "evaluate", str(run_dir), "--out", str(out),
         "--sexes", "female", "--representations", "raw,pca,sphr", "--classifiers",
         "lda,knn,xgboost", "--splits", "2", "--no-losses", "--n-jobs", "1",
         "--xgboost-method", "hist"],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["sexes"] == ["female"]
    t = pd.read_parquet(out / "female" / "representations.parquet")
    assert set(t["classifier"]) == {"lda", "knn", "xgboost"}
    assert set(t["representation"]) == {"raw", "pca", "sphr"}
    report = json.loads((out / "female" / "evaluate_report.json").read_text())
    assert report["protocol"]["classifiers"]["xgboost"]["tree_method"] == "hist"


def test_mismatched_embeddings_are_refused(run_dir, tmp_path):
    from sphr.errors import InputError
    from sphr.evaluate.pipeline import run_evaluate

    bad = tmp_path / "run"
    import shutil

    shutil.copytree(run_dir / "cohorts", bad / "cohorts")
    df = pd.read_parquet(run_dir / "train" / "female" / "nplb" / "embeddings_test.parquet").iloc[5:]
    write_parquet(df, bad / "train" / "female" / "nplb" / "embeddings_test.parquet")
    with pytest.raises(InputError, match="do not cover"):
        run_evaluate(bad, tmp_path / "o", sexes=["female"], representations=("sphr",),
                     eval_config=EvalConfig(n_splits=2, classifiers=("lda",), n_jobs=1),
                     losses=())


def test_reference_row_trains_on_the_training_partition_only():
    from sphr.evaluate.protocol import EvalConfig, make_splits, reference_scores

    rng = np.random.default_rng(0)
    y_train = rng.integers(0, 3, 400)
    X_train = (rng.normal(size=(400, 5)) + y_train[:, None]).astype(np.float32)
    y_test = rng.integers(0, 3, 200)
    X_test = (rng.normal(size=(200, 5)) + y_test[:, None]).astype(np.float32)
    splits = make_splits(y_test, n_splits=3, seed=0)
    cfg = EvalConfig(classifiers=("knn", "lda", "nn_ehr"))
    ref = reference_scores(X_train, y_train, X_test, y_test, splits, cfg)
    assert set(ref["classifier"]) == {"knn", "lda"}  # NN for EHR left out (cost)
    assert (ref["n_train"] == 400).all() and len(ref) == 2 * 2 * 3
    assert ref.loc[ref["task"] == "multi", "weighted_f1"].mean() > 0.6
    # test labels outside the held-out parts are never used
    y_other = y_test.copy()
    outside = np.setdiff1d(np.arange(200), np.concatenate([h for _, h in splits]))
    y_other[outside] = (y_other[outside] + 1) % 3
    again = reference_scores(X_train, y_train, X_test, y_other, splits, cfg)
    assert np.allclose(again["weighted_f1"], ref["weighted_f1"])
