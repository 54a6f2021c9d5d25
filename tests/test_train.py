"""The SPHR trainer: determinism, resume, stacked == alone, files, CLI."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.exceptions import NotFittedError

from sphr.errors import ConfigError, InputError
from sphr.models import SPHRNet
from sphr.train import (
    SPHREmbedding,
    TrainConfig,
    embed,
    load_model,
    run_train,
    save_model,
    train_many,
    train_sphr,
)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    n = 240
    y = rng.integers(0, 3, n)
    X = (rng.normal(size=(n, 12)) + y[:, None]).astype(np.float32)
    by = [np.flatnonzero(y == c) for c in range(3)]
    a = rng.integers(0, n, 600)
    p = np.array([rng.choice(by[y[i]]) for i in a])
    neg = np.array([rng.choice(np.flatnonzero(y != y[i])) for i in a])
    return X, np.stack([a, p, neg], 1), y


def cfg(**kw) -> TrainConfig:
    base = {"epochs": 2, "batch_size": 128, "device": "cpu", "threads": 1, "checkpoint_every": 0}
    return TrainConfig(**{**base, **kw})


def _same(m1: torch.nn.Module, m2: torch.nn.Module, exact: bool = True, atol: float = 1e-5) -> bool:
    s1, s2 = m1.state_dict(), m2.state_dict()
    same = torch.equal if exact else lambda x, y: torch.allclose(x, y, atol=atol)
    return all(same(s1[k], s2[k]) for k in s1)


def _apart(a: list[torch.Tensor], b: list[torch.Tensor], start: list[torch.Tensor]) -> float:
    """How far apart two trainings from one start ended, as the largest share, over tensors,
    of ``b``'s movement from ``start``. On CUDA two kernel orders of one computation round
    differently and Adam turns a rounding-sized gradient into a step-sized update, so
    runs on the same batches and masks agree to a small share of their movement, not to a
    fixed tolerance; other batches or masks move them apart by a large one."""
    return max(float((x - y).norm() / (y - s0).norm().clamp_min(1e-12))
               for x, y, s0 in zip(a, b, start, strict=True))


#: the largest share of its movement by which a CUDA run may differ from its reference
CUDA_APART = 0.25


def test_network_is_the_papers():
    net = SPHRNet(64)
    kinds = [type(m).__name__ for m in net.net]
    assert kinds == ["Linear", "Dropout", "PReLU", "Linear", "Dropout", "PReLU", "Linear", "PReLU"]
    assert [(m.in_features, m.out_features) for m in net.linears] == \
        [(64, 512), (512, 256), (256, 32)]
    assert all(m.p == 0.1 for m in net.net if isinstance(m, torch.nn.Dropout))


def test_profiles_and_config_checks():
    paper = TrainConfig.profile("paper")
    assert (paper.epochs, paper.batch_size, paper.lr, paper.lr_gamma, paper.lr_step,
            paper.margin) == (1000, 256, 1e-3, 0.95, 50, 1.0)
    demo = TrainConfig.profile("demo")
    assert demo.epochs < 50 and demo.loss == "nplb"
    assert dataclasses.replace(demo, loss="mdr", seed=3).loss == "mdr"
    for bad in ({"loss": "hinge"}, {"precision": "fp8"}, {"epochs": 0}):
        with pytest.raises(ConfigError):
            TrainConfig(**bad)
    with pytest.raises(ConfigError, match="unknown training profile"):
        TrainConfig.profile("fast")


def test_deterministic_with_a_seed(data):
    X, T, y = data
    r1 = train_sphr(X, T, cfg(seed=3), labels=y)
    r2 = train_sphr(X, T, cfg(seed=3), labels=y)
    r3 = train_sphr(X, T, cfg(seed=4), labels=y)
    assert _same(r1.model, r2.model) and r1.loss_curve == r2.loss_curve
    assert not _same(r1.model, r3.model)
    assert len(r1.loss_curve) == 2 and all(np.isfinite(r1.loss_curve))
    assert r1.timings["epochs_run"] == 2 and r1.n_triplets == len(T)


def test_odd_power_is_rejected(data):
    X, T, y = data
    with pytest.raises(ConfigError, match="even"):
        train_sphr(X, T, cfg(p=3), labels=y)


class _Killed(Exception):
    pass


@pytest.mark.parametrize("loss", ["nplb", "mdr"])
def test_resume_ends_bit_identical(data, tmp_path, loss):
    X, T, y = data
    c = cfg(loss=loss, epochs=4, checkpoint_every=2)
    ref = train_sphr(X, T, c, labels=y)

    def kill_at_3(epoch, _values):
        if epoch == 3:  # after epoch 3, whose checkpoint is not written: 2 is the last one
            raise _Killed

    with pytest.raises(_Killed):
        train_sphr(X, T, c, labels=y, checkpoint_dir=tmp_path, on_epoch=kill_at_3)
    resumed = train_sphr(X, T, c, labels=y, checkpoint_dir=tmp_path, resume=True)
    assert resumed.timings["resumed_from_epoch"] == 2 and resumed.timings["epochs_run"] == 2
    assert _same(ref.model, resumed.model)
    assert resumed.loss_curve == ref.loss_curve
    with pytest.raises(ConfigError, match="other settings"):
        train_sphr(X, T, dataclasses.replace(c, lr=0.01), labels=y, checkpoint_dir=tmp_path,
                   resume=True)


def test_resume_of_a_finished_fit_trains_no_further(data, tmp_path):
    """A fit whose patience ran out writes its last checkpoint at the stopping epoch; resumed
    from it (a cross-fit cut short after the fit, before its model was used), it trains no
    epoch more: the same weights, curve and epoch count as the fit itself."""
    X, T, y = data
    c = cfg(epochs=40, checkpoint_every=5, validation_size=0.2, patience=1)
    ref = train_sphr(X, T, c, labels=y, checkpoint_dir=tmp_path)
    assert ref.timings["epochs_run"] < c.epochs  # it stopped early, at a checkpoint
    again = train_sphr(X, T, c, labels=y, checkpoint_dir=tmp_path, resume=True)
    assert again.timings["epochs_run"] == 0
    assert again.timings["resumed_from_epoch"] == ref.timings["epochs_run"]
    assert _same(ref.model, again.model) and again.loss_curve == ref.loss_curve
    assert again.validation["best_epoch"] == ref.validation["best_epoch"]


def test_train_many_equals_training_alone(data):
    X, T, y = data
    configs = [cfg(loss=name, epochs=1) for name in
               ("triplet", "npair", "lifted_struct", "mdr", "infonce", "distance_swap", "nplb")]
    configs.append(cfg(loss="nplb", epochs=1, seed=5))  # another seed in the same stack
    configs.append(cfg(loss="nplb", epochs=2))  # other epochs: a stack of its own
    many = train_many(X, T, configs, labels=y)
    assert [r.config for r in many] == configs
    assert {r.timings["models_in_stack"] for r in many} == {8, 1}
    for c, r in zip(configs, many, strict=True):
        alone = train_sphr(X, T, c, labels=y)
        assert _same(alone.model, r.model, exact=False, atol=1e-4), c.loss
        assert np.allclose(alone.loss_curve, r.loss_curve, rtol=1e-4, atol=1e-5)


def test_embed_save_load_round_trip(data, tmp_path):
    X, T, y = data
    res = train_sphr(X, T, cfg(epochs=1), labels=y)
    Z = embed(res.model, X, device="cpu", batch_size=100)
    assert Z.shape == (len(X), 32) and Z.dtype == np.float32 and np.isfinite(Z).all()
    names = [f"f{i}" for i in range(X.shape[1])]
    save_model(res.model, res.config, names, tmp_path)
    obj = torch.load(tmp_path / "model.pt", weights_only=True)
    assert set(obj) >= {"state_dict", "config", "feature_names", "n_features"}
    assert obj["feature_names"] == names and obj["n_features"] == 12
    assert obj["config"]["loss"] == "nplb"
    loaded = load_model(tmp_path)
    assert not loaded.training and next(loaded.parameters()).device.type == "cpu"
    np.testing.assert_array_equal(embed(loaded, X, device="cpu"), Z)


# ----------------------------------------------------------------------------- SPHREmbedding

def test_sphr_embedding_is_todays_trainer(data):
    """fit is train_sphr (the same weights and loss curve, bit for bit, for the same seed),
    transform is embed."""
    X, T, y = data
    ref = train_sphr(X, T, cfg(epochs=3, seed=5), labels=y)
    est = SPHREmbedding(cfg(epochs=3, seed=5)).fit(X, labels=y, triplets=T)
    assert _same(est.model_, ref.model)
    assert est.training_.loss_curve == ref.loss_curve
    np.testing.assert_array_equal(est.transform(X), embed(ref.model, X, device="cpu"))
    # y is the labels, as scikit-learn passes them
    by_y = SPHREmbedding(cfg(epochs=3, seed=5)).fit(X, y, triplets=T)
    assert _same(by_y.model_, ref.model)
    assert (est.n_features_in_, est.n_components_) == (12, 32)
    assert not hasattr(est, "feature_names_in_")  # a plain array names no feature


def test_sphr_embedding_is_deterministic_with_a_seed(data):
    X, T, y = data
    a, b, c = (SPHREmbedding(cfg(seed=s)).fit(X, labels=y, triplets=T) for s in (2, 2, 3))
    np.testing.assert_array_equal(a.transform(X), b.transform(X))
    assert not np.allclose(a.transform(X), c.transform(X))


def test_sphr_embedding_clones_and_reports_its_parameters(data):
    from sklearn.base import clone

    X, T, y = data
    est = SPHREmbedding(cfg(seed=4))  # the config's device: the one source of the device
    assert est.get_params() == {"config": cfg(seed=4)}
    est.fit(X, labels=y, triplets=T)
    copy = clone(est)
    assert copy.get_params() == est.get_params() and not hasattr(copy, "model_")
    assert _same(copy.fit(X, labels=y, triplets=T).model_, est.model_)
    with pytest.raises(NotFittedError):
        SPHREmbedding().transform(X)


def test_sphr_embedding_save_load_round_trip_in_todays_format(data, tmp_path):
    """save writes model.pt byte for byte as sphr train always has (save_model), so load reads
    a file written before the class existed; loaded, it embeds the same."""
    X, T, y = data
    names = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    est = SPHREmbedding(cfg(epochs=1)).fit(frame, labels=y, triplets=T)
    assert list(est.feature_names_in_) == names
    est.save(tmp_path / "a" / "model.pt")
    save_model(est.model_, est.config_, names, tmp_path / "b")  # the function run_train used
    assert (tmp_path / "a" / "model.pt").read_bytes() == (tmp_path / "b" / "model.pt").read_bytes()
    loaded = SPHREmbedding.load(tmp_path / "b", device="cpu")
    assert loaded.config_ == est.config_ and loaded.training_ is None
    assert list(loaded.feature_names_in_) == names and loaded.n_features_in_ == 12
    np.testing.assert_array_equal(loaded.transform(X), est.transform(frame))
    again = SPHREmbedding.load(loaded.save(tmp_path / "c"))  # load -> save -> load
    assert _same(again.model_, est.model_) and again.config_ == est.config_
    with pytest.raises(InputError, match="missing SPHR model"):
        SPHREmbedding.load(tmp_path / "nowhere.pt")
    with pytest.raises(InputError, match="fitted on 12 features"):
        loaded.transform(X[:, :5])


def test_sphr_embedding_keeps_the_representation_contract(data, tmp_path):
    """What every representation promises (sphr.representation): a row's embedding does not
    depend on who else is in the batch, and the shared loader reads what save wrote."""
    from sphr.representation import Representation

    X, T, y = data
    est = SPHREmbedding(cfg(epochs=2, seed=1)).fit(X, labels=y, triplets=T)
    assert isinstance(est, Representation)
    full = est.transform(X)
    perm = np.random.default_rng(0).permutation(len(X))
    np.testing.assert_allclose(est.transform(X[perm]), full[perm], atol=1e-5)
    np.testing.assert_allclose(est.transform(X[:7]), full[:7], atol=1e-5)
    est.save(tmp_path / "model.pt")
    np.testing.assert_array_equal(SPHREmbedding.load(tmp_path, device="cpu").transform(X), full)


def test_run_train_writes_the_stage_files(cohorts_dir, tmp_path):
    out = tmp_path / "train" / "female" / "nplb"
    report = run_train(cohorts_dir / "female", out,
                       TrainConfig.profile("demo", epochs=2, device="cpu", checkpoint_every=1))
    for name in ("model.pt", "embeddings_train.parquet", "embeddings_test.parquet",
                 "loss_curve.parquet", "loss_curve.png", "train_report.json",
                 "checkpoint/checkpoint.pt"):
        assert (out / name).exists(), name
    emb = pd.read_parquet(out / "embeddings_test.parquet")
    assert list(emb.columns[:5]) == ["eid", "label", "augmented", "age_years", "age_group"]
    assert list(emb.columns[5:]) == [f"e{i:02d}" for i in range(32)]
    test = pd.read_parquet(cohorts_dir / "female" / "test.parquet")
    assert emb["eid"].tolist() == test["eid"].tolist()
    train = pd.read_parquet(out / "embeddings_train.parquet")
    assert len(train) == len(pd.read_parquet(cohorts_dir / "female" / "train.parquet"))
    curve = pd.read_parquet(out / "loss_curve.parquet")
    assert curve["epoch"].tolist() == [1, 2]
    saved = json.loads((out / "train_report.json").read_text())
    assert saved["n_triplets"] == report["n_triplets"] > 0 and saved["device"] == "cpu"
    assert saved["config"]["epochs"] == 2 and saved["embeddings_finite"]
    assert not list(out.parent.glob(".*partial"))


def test_cli_train(cohorts_dir, tmp_path, capsys):
    from sphr.cli import main
    from sphr.train.commands import default_out

    out = tmp_path / "cli"
    rc = main(["-q", "train", str(cohorts_dir / "male"), "--loss", "triplet", "--epochs", "1",
               "--batch-size", "512", "--device", "cpu", "--seed", "2", "--out", str(out)])
    assert rc == 0 and (out / "model.pt").exists()
    assert "male triplet: 1 epochs" in capsys.readouterr().out
    assert default_out(tmp_path / "run" / "cohorts" / "female", "mdr") == \
        tmp_path / "run" / "train" / "female" / "mdr"
    assert main(["-q", "train", str(cohorts_dir / "male"), "--loss", "nplb", "--epochs", "1"]) == 2


def test_loss_comparison_is_a_training_output(cohorts_dir, tmp_path, capsys):
    """`sphr train COHORT --losses` writes RUN/train/<sex>/comparison/<loss>/ (read by the
    evaluation); NPLB is copied from the training stage when config and data match."""
    import shutil

    from sphr.cli import build_parser, main
    from sphr.layout import COMPARISON_REPORT, comparison_dir, train_dir
    from sphr.train import COMPARISON_LOSSES
    from sphr.train.comparison import loss_configs, train_loss_comparison

    run = tmp_path / "run"
    cohort = run / "cohorts" / "female"
    shutil.copytree(cohorts_dir / "female", cohort)
    settings = {"epochs": 1, "batch_size": 512, "threads": 1}
    run_train(cohort, train_dir(run, "female", "nplb"),
              loss_configs(["nplb"], device="cpu", overrides=settings)["nplb"])
    assert main(["-q", "train", str(cohort), "--losses", "triplet,nplb", "--epochs", "1",
                 "--batch-size", "512", "--threads", "1", "--device", "cpu"]) == 0
    out = comparison_dir(run, "female")
    assert out == run / "train" / "female" / "comparison"
    assert f"wrote {out}/" in capsys.readouterr().out
    report = json.loads((out / COMPARISON_REPORT).read_text())
    assert report["trained"] == ["triplet"] and report["from_training_stage"] == ["nplb"]
    for loss in ("triplet", "nplb"):
        saved = json.loads((out / loss / "train_config.json").read_text())
        assert (saved["loss"], saved["epochs"], saved["data"]) == (loss, 1, report["data"])
        test = pd.read_parquet(out / loss / "embeddings_test.parquet")
        assert test["eid"].tolist() == pd.read_parquet(cohort / "test.parquet")["eid"].tolist()
        assert (out / loss / "embeddings_train.parquet").exists()
    pd.testing.assert_frame_equal(
        pd.read_parquet(out / "nplb" / "embeddings_test.parquet"),
        pd.read_parquet(train_dir(run, "female", "nplb") / "embeddings_test.parquet"))
    assert sorted(p.name for p in (run / "train" / "female").iterdir()) == ["comparison", "nplb"]
    # a rerun with the same settings trains nothing
    again = train_loss_comparison(cohort, None, ["triplet", "nplb"], device="cpu",
                                  overrides=settings)
    assert again["trained"] == [] and again["reused"] == ["triplet"]
    args = build_parser().parse_args(["train", str(cohort), "--losses", "all"])
    assert args.losses == list(COMPARISON_LOSSES)
    assert main(["-q", "train", str(cohort), "--losses", "nplb", "--loss", "nplb"]) == 2


def test_the_comparison_trains_the_dagster_assets_config_as_itself():
    """The loss comparison asset passes its TrainConfig (config=): each loss's config is it
    with that loss, the same as the profile with the same settings as overrides."""
    from sphr.train.comparison import loss_configs

    whole = TrainConfig.profile("paper", epochs=3, lr=0.002, seed=4, device="cpu")
    got = loss_configs(["triplet", "mdr"], profile="demo", config=whole)
    assert got == {loss: dataclasses.replace(whole, loss=loss) for loss in ("triplet", "mdr")}
    overrides = {k: v for k, v in whole.to_dict().items() if k not in ("loss", "seed", "device")}
    assert got == loss_configs(["triplet", "mdr"], profile="paper", seed=4, device="cpu",
                               overrides=overrides)
    with pytest.raises(ConfigError, match="unknown loss"):
        loss_configs(["nope"], config=whole)


def test_pipes_settings_round_trip_as_the_dataclass():
    """The Pipes extra is TrainConfig.to_dict(); read back with from_dict it is the same
    config, through JSON (what Pipes sends)."""
    config = TrainConfig.profile("demo", loss="mdr", loss_params={"alpha": 0.5}, lr=3e-4,
                                 patience=None, threads=2, device="cpu")
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def test_a_config_read_back_with_a_key_that_is_no_field_is_an_error():
    """TrainConfig.from_dict (a model file's, a checkpoint's, a fit's config) drops nothing:
    a key that is no field is a ConfigError naming it and the valid ones."""
    given = {**TrainConfig().to_dict(), "p_norm": 2}
    with pytest.raises(ConfigError, match="TrainConfig: no key 'p_norm'; valid keys: loss, "):
        TrainConfig.from_dict(given)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_bf16_and_stack(data):
    X, T, y = data
    c = cfg(device="cuda", precision="bf16", batch_size=256)
    res = train_sphr(X, T, c, labels=y)
    assert res.device.startswith("cuda") and np.isfinite(res.loss_curve).all()
    assert np.isfinite(embed(res.model, X, device="cuda")).all()
    fp32 = dataclasses.replace(c, precision="fp32")
    many = train_many(X, T, [fp32, dataclasses.replace(fp32, loss="triplet")], labels=y)
    alone = train_sphr(X, T, fp32, labels=y)
    assert _same(alone.model, many[0].model, exact=False, atol=1e-3)


def _gpu_syncs_per_epoch(run):
    """Run ``run(on_epoch)`` with torch's sync debug mode on; the (file, line) of every
    device-to-host synchronisation, per epoch."""
    import warnings

    per_epoch: list[list[tuple[str, int]]] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            seen = [0]

            def on_epoch(epoch, values):
                syncs = [w for w in caught if "synchronizing" in str(w.message)]
                per_epoch.append([(w.filename, w.lineno) for w in syncs[seen[0]:]])
                seen[0] = len(syncs)

            result = run(on_epoch)
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return result, per_epoch


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_graph_step_draws_the_per_batch_steps_batches_and_masks():
    """DeviceEpoch captured as CUDA graphs (generators registered with the graphs, keys drawn
    in them) against the per-batch fused step, fp32: the same batches and masks, so the same
    weights up to float rounding; several steps per graph change nothing."""
    from sphr.losses import BatchObjective, build_loss
    from sphr.train.fused import FusedStep, draw_keys, gather_rows
    from sphr.train.graph import DeviceEpoch
    from sphr.train.stacked import init_model, stack_params

    dev = torch.device("cuda")  # fp32 products: torch leaves TF32 off for matmuls by default
    g0 = torch.Generator().manual_seed(0)
    X = torch.randn(500, 16, generator=g0).to(dev)
    T = torch.randint(0, 500, (1100, 3), generator=g0).to(dev)  # 4 x 256 + 76

    def stack():
        params = stack_params([init_model(16, s) for s in (0, 7)], dev)
        opt = torch.optim.Adam(params, lr=1e-3, fused=True)
        losses = [build_loss("nplb"), build_loss("triplet", margin=0.5)]
        return params, FusedStep(params, opt, BatchObjective(losses), dropout=0.1,
                                 bf16=False)

    results = []
    # None: the per-batch loop; last, the per-batch loop on other seeds' batches and masks
    for steps_per_graph, seeds in ((1, (0, 7)), (3, (0, 7)), (None, (0, 7)), (None, (1, 8))):
        params, step = stack()
        gens = [torch.Generator(device=dev).manual_seed(s) for s in seeds]
        epoch = DeviceEpoch(step, X, T, gens, batch_size=256, n_models=2, capture=True,
                            steps_per_graph=steps_per_graph or 1)
        curve = []
        for _ in range(4):
            perms = torch.stack([torch.randperm(len(T), generator=g, device=dev) for g in gens])
            if steps_per_graph is not None:
                curve.append(epoch.run(perms))
                continue
            total = torch.zeros(2, device=dev)
            for start in range(0, len(T), 256):
                total += step(X, gather_rows(T, perms[:, start:start + 256]),
                              draw_keys(gens, dev))
            curve.append(total / 5)
        if steps_per_graph is not None:
            assert epoch.captured and not epoch.failed, epoch.failed
        results.append((torch.stack(curve).cpu(), [p.detach().cpu() for p in params]))
    (c1, p1), (c3, p3), (ref_c, ref_p), (_, other_p) = results
    assert torch.equal(c1, c3) and all(torch.equal(a, b) for a, b in zip(p1, p3, strict=True))
    assert torch.allclose(c1, ref_c, rtol=1e-4, atol=1e-6)
    start = [p.detach().cpu() for p in stack()[0]]
    same, other = _apart(p1, ref_p, start), _apart(other_p, ref_p, start)
    print(f"graph vs per-batch: {same:.4f} of the movement; other draws: {other:.4f}")
    assert same <= CUDA_APART < other


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_a_failed_capture_trains_on_uncaptured_with_the_same_draws():
    """A step that reads the host inside its capture (the failure torch 2.11 showed) makes the
    capture fail: the epoch carries on with direct steps, the failure names the first error,
    the generators (and torch's default one) leave capture mode, and training equals a run
    that never tried to capture."""
    from sphr.losses import BatchObjective, build_loss
    from sphr.train.fused import FusedStep
    from sphr.train.graph import DeviceEpoch
    from sphr.train.stacked import init_model, stack_params

    dev = torch.device("cuda")
    g0 = torch.Generator().manual_seed(0)
    X = torch.randn(300, 16, generator=g0).to(dev)
    T = torch.randint(0, 300, (600, 3), generator=g0).to(dev)
    runs = []
    for capture in (True, False):
        params = stack_params([init_model(16, 0)], dev)
        opt = torch.optim.Adam(params, lr=1e-3, fused=True)
        step = FusedStep(params, opt, BatchObjective([build_loss("nplb")]), dropout=0.1,
                         bf16=False, compile=False)
        at = step.at

        def reading_at(X, T, perm, index, *args, at=at, **kwargs):
            index.item()  # a host read: illegal inside a capture, harmless outside
            at(X, T, perm, index, *args, **kwargs)

        step.at = reading_at
        gens = [torch.Generator(device=dev).manual_seed(0)]
        epoch = DeviceEpoch(step, X, T, gens, batch_size=256, n_models=1, capture=capture)
        curve = [epoch.run(torch.randperm(len(T), generator=gens[0], device=dev)[None])
                 for _ in range(3)]
        runs.append((epoch, torch.stack(curve).cpu(), [p.detach().cpu() for p in params]))
    (failed, c1, p1), (_, c0, p0) = runs
    assert not failed.captured and 256 in failed.failed
    assert "capture" in failed.failed[256].lower(), failed.failed
    torch.rand(1, device=dev)  # the default generator draws outside a graph again
    assert torch.equal(c1, c0) and all(torch.equal(a, b) for a, b in zip(p1, p0, strict=True))


def test_capture_failure_names_the_error_that_broke_the_capture():
    from sphr.train.graph import capture_failure

    try:
        try:
            raise RuntimeError("operation not permitted when stream is capturing\nmore")
        except RuntimeError:
            raise RuntimeError("operation failed due to a previous error during capture")  # noqa: B904 - implicit, as torch.cuda.graph.__exit__ raises
    except RuntimeError as err:
        why = capture_failure(err)
    assert why.startswith("RuntimeError: operation failed due to a previous error")
    assert "first RuntimeError: operation not permitted when stream is capturing" in why
    assert "more" not in why


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_graph_training_equals_the_per_batch_step_and_reads_the_host_once(data):
    """cuda_graphs="auto" on CUDA (bf16, compiled, model selection on): the epoch is graph
    replays, within bf16 noise of the per-batch step ("off"), and once its graphs are
    captured (epoch 3 on) an epoch synchronises with the host once: its one read of the
    mean loss and the validation together."""
    X, T, y = data
    c = cfg(device="cuda", precision="bf16", compile=True, epochs=5, validation_size=0.2)
    graph, syncs = _gpu_syncs_per_epoch(lambda cb: train_sphr(X, T, c, labels=y, on_epoch=cb))
    plain = train_sphr(X, T, dataclasses.replace(c, cuda_graphs="off"), labels=y)
    assert graph.timings["cuda_graphs"] and graph.timings["graph_failed"] is None
    assert not plain.timings["device_epoch"]
    assert [len(s) for s in syncs[2:]] == [1, 1, 1], syncs
    assert np.allclose(graph.loss_curve, plain.loss_curve, rtol=2e-2)
    assert np.allclose(graph.validation["val_loss"], plain.validation["val_loss"], rtol=2e-2)
    # the same kept epoch, and weights that moved alike from the same start (bf16 rounding
    # tilts Adam's steps a little; other batches or masks would move them apart)
    from sphr.train.seeds import derived_seed
    from sphr.train.stacked import init_model

    assert graph.validation["best_epoch"] == plain.validation["best_epoch"]
    init = init_model(X.shape[1], derived_seed(c.seed, "init"), c.out_dim, c.dropout).state_dict()
    for k, w in graph.model.state_dict().items():
        ref = plain.model.state_dict()[k]
        assert (w - ref).norm() <= 0.25 * (ref - init[k]).norm() + 1e-6, k


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_gpu_two_data_sets_and_seeds_in_one_graph_stack(data):
    """Pure losses, two seeds, two data sets of one shape as one captured stack (fp32): each
    model as alone; a mixed stack's eager part (MDR) trains apart."""
    from sphr.train import TrainData, train_jobs

    X, T, y = data
    rng = np.random.default_rng(1)
    other = TrainData(X[::-1].copy() + rng.normal(size=X.shape).astype(np.float32) * 0.1,
                      T, y[::-1].copy())
    first = TrainData(X, T, y)
    c = cfg(device="cuda", compile=True, epochs=3, batch_size=128)
    jobs = [(d, dataclasses.replace(c, loss=loss, seed=seed)) for d in (first, other)
            for loss, seed in (("nplb", 0), ("triplet", 3), ("mdr", 0))]
    stacked = train_jobs(jobs)
    assert [r.timings["models_in_stack"] for r in stacked] == [4, 4, 2, 4, 4, 2]
    assert [r.timings["cuda_graphs"] for r in stacked] == [True, True, False] * 2
    from sphr.train.seeds import derived_seed
    from sphr.train.stacked import init_model

    for (d, cj), r in zip(jobs, stacked, strict=True):
        alone = train_sphr(d.X, d.triplets, cj, labels=d.labels)
        start = init_model(d.X.shape[1], derived_seed(cj.seed, "init"), cj.out_dim,
                           cj.dropout).state_dict()
        apart = _apart(list(r.model.state_dict().values()),
                       list(alone.model.state_dict().values()), list(start.values()))
        print(f"{cj.loss} seed {cj.seed}: stacked vs alone {apart:.4f} of the movement")
        assert apart <= CUDA_APART, (cj.loss, cj.seed)


def _fold_sets(X, T, y, folds: int = 3):
    """The cross-fit's training sets: fold k's fit holds every row outside fold k (so the
    sets differ in rows) and as many triplets as the others (so they stack)."""
    from sphr.train import TrainData

    rng = np.random.default_rng(7)
    fold = rng.permutation(len(X)) % folds
    out = []
    for k in range(folds):
        keep = np.flatnonzero(fold != k)
        yk = y[keep]
        by = [np.flatnonzero(yk == c) for c in range(3)]
        a = rng.integers(0, len(keep), len(T))
        pos = np.array([rng.choice(by[yk[i]]) for i in a])
        neg = np.array([rng.choice(np.flatnonzero(yk != yk[i])) for i in a])
        out.append(TrainData(X[keep], np.stack([a, pos, neg], 1), yk))
    return out


@pytest.mark.parametrize("device", [
    "cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
        not torch.cuda.is_available(), reason="needs CUDA")])])
def test_fold_fits_of_different_sizes_train_as_one_stack(data, device):
    """The cross-fit's fold fits of one sex (one config, data sets of different row counts)
    train as one stack, on a GPU as one captured graph, each model as it trains alone."""
    from sphr.train import train_jobs
    from sphr.train.seeds import derived_seed
    from sphr.train.stacked import init_model

    sets = _fold_sets(*data)
    c = cfg(device=device, compile=device == "cuda", epochs=3, batch_size=128)
    stacked = train_jobs([(d, c) for d in sets])
    assert [r.timings["models_in_stack"] for r in stacked] == [3, 3, 3]
    if device == "cuda":
        assert all(r.timings["cuda_graphs"] for r in stacked)
    start = init_model(sets[0].X.shape[1], derived_seed(c.seed, "init"), c.out_dim,
                       c.dropout).state_dict()
    for d, r in zip(sets, stacked, strict=True):
        alone = train_sphr(d.X, d.triplets, c, labels=d.labels)
        apart = _apart(list(r.model.state_dict().values()),
                       list(alone.model.state_dict().values()), list(start.values()))
        print(f"{device}: fold stacked vs alone {apart:.4f} of the movement")
        assert apart <= (CUDA_APART if device == "cuda" else 1e-3)


def test_dropout_masks_keep_the_configured_share(data):
    from sphr.train.stack_data import Prepared as _Prepared
    from sphr.train.trainer import _Stack

    X, T, _ = data
    one = [_Prepared(X, T, None, None, None)]
    group = _Stack(one, [cfg(dropout=0.1)])
    masks = group.inputs.masks(4096)
    assert [m.shape for m in masks] == [(1, 4096, 512), (1, 4096, 256)]
    kept = torch.cat([(m > 0).flatten() for m in masks]).float().mean().item()
    assert abs(kept - 0.9) < 0.003  # 3.1M Bernoulli draws: SD 1.7e-4
    assert abs(torch.cat([m.flatten() for m in masks]).mean().item() - 1.0) < 0.004
    assert torch.unique(masks[0]).tolist() == pytest.approx([0.0, 65536 / 58982])
    again = _Stack(one, [cfg(dropout=0.1)]).inputs.masks(4096)
    assert all(torch.equal(a, b) for a, b in zip(masks, again, strict=True))


def test_bf16_cpu_training_and_fast_settings(data, monkeypatch):
    import shutil

    from sphr import device
    from sphr.device import fast_settings

    # the choice follows the machine: bf16 only with native bf16 matmuls, compile only with
    # a C++ compiler for inductor's kernels
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True)
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/g++")
    assert fast_settings("cpu") == {"precision": "bf16", "compile": True}
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert fast_settings("cpu") == {"precision": "fp32", "compile": False}
    assert not device.cpu_compiler_found()
    monkeypatch.undo()
    X, T, y = data
    res = train_sphr(X, T, cfg(precision="bf16", epochs=3), labels=y)
    ref = train_sphr(X, T, cfg(epochs=3), labels=y)
    assert np.isfinite(res.loss_curve).all()
    # bf16 matmuls: the same descent, not the same bits
    assert abs(res.loss_curve[-1] - ref.loss_curve[-1]) < 0.1 * ref.loss_curve[0]


def test_defaults_are_the_papers_numbers():
    """Appendix K.1 / docs/METHODS.md: the numbers written here, not the dataclass against
    itself."""
    from sphr.models import HIDDEN
    from sphr.train import TrainConfig

    c = TrainConfig()
    assert (c.loss, c.epochs, c.batch_size, c.lr, c.lr_gamma, c.lr_step, c.margin, c.p,
            c.dropout, c.out_dim) == ("nplb", 1000, 256, 1e-3, 0.95, 50, 1.0, 2, 0.1, 32)
    assert HIDDEN == (512, 256)


def test_models_that_are_done_leave_the_stack_and_end_as_if_trained_alone(data, caplog):
    """With model selection, once half a stack has spent its patience those models leave it
    and the others train on alone; every model still ends exactly as it would alone: same
    kept epoch, same stopping epoch, same weights (up to float rounding of the batched
    products), same curves."""
    import logging

    X, T, y = data
    losses = ("triplet", "mdr", "nplb", "infonce")
    # two seeds in one stack (two batch and mask generators: the seed-3 model's leaving
    # must not move the others); each model's validation split is its own seed's, so every
    # model, the seed-3 one too, has an "alone" to compare with. Without retiring, a
    # model whose patience ran out trains on and may find a later best epoch: not as alone
    configs = [cfg(loss=name, epochs=8, validation_size=0.2, patience=2, seed=s)
               for name, s in zip(losses, (0, 0, 3, 0), strict=True)]
    with caplog.at_level(logging.INFO, logger="sphr.train.trainer"):
        many = train_many(X, T, configs, labels=y)
    assert [r.config for r in many] == configs
    left = [r.getMessage() for r in caplog.records if "leave the stack" in r.getMessage()]
    assert left, "no model left the stack: pick a stack whose models stop at different epochs"
    assert len({r.validation["fit_triplets"] for r in many}) == 1
    for c, r in zip(configs, many, strict=True):
        alone = train_sphr(X, T, c, labels=y)
        for key in ("best_epoch", "epochs_run"):
            assert r.validation[key] == alone.validation[key], (c.loss, key)
        assert _same(alone.model, r.model, exact=False, atol=1e-4), c.loss
        assert np.allclose(alone.loss_curve, r.loss_curve, rtol=1e-4, atol=1e-5), c.loss
        assert np.allclose(alone.validation["val_loss"], r.validation["val_loss"], rtol=1e-4,
                           atol=1e-5), c.loss


def test_the_loss_comparison_trains_the_papers_losses_without_the_anchor():
    """The demo profile's SPHR carries the geometry anchor (the rule's choice); the 7-loss
    comparison reproduces the paper's losses, so its models train without it unless asked."""
    from sphr.train.comparison import loss_configs
    from sphr.train.config import TrainConfig

    assert TrainConfig.profile("demo").anchor == 3.0
    configs = loss_configs(("nplb", "triplet"), profile="demo", device="cpu")
    assert {c.anchor for c in configs.values()} == {0.0}
    given = loss_configs(("nplb",), config=TrainConfig.profile("demo"))
    assert given["nplb"].anchor == 0.0
    asked = loss_configs(("nplb",), profile="demo", overrides={"anchor": 1.0})
    assert asked["nplb"].anchor == 1.0
