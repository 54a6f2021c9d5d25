"""Backbones (small CNN, plain-torch ResNet-18 with local weights), training, the
comparison and ``sphr retrieval``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from sphr.errors import ConfigError, InputError
from sphr.retrieval.backbones import ResNet18, build_model, load_resnet_weights
from sphr.retrieval.profiles import PROFILES, get_profile


def test_small_cnn_embeddings_are_unit_vectors_of_dimension_d() -> None:
    model = build_model("small_cnn", in_channels=1, dim=24, width=8).eval()
    out = model(torch.randn(3, 1, 32, 32))
    assert out.shape == (3, 24)
    assert torch.allclose(out.norm(dim=1), torch.ones(3), atol=1e-5)
    # D = 128 default
    assert build_model(in_channels=3, width=8)(torch.randn(2, 3, 16, 16)).shape == (2, 128)


def test_resnet18_has_torchvision_layout_and_size() -> None:
    net = ResNet18(3)
    n_params = sum(p.numel() for p in net.parameters())
    assert n_params == 11_176_512  # torchvision resnet18 (11,689,512) minus its fc (513,000)
    keys = set(net.state_dict())
    assert {"conv1.weight", "bn1.running_mean", "layer1.0.conv1.weight",
            "layer2.0.downsample.0.weight", "layer4.1.bn2.weight"} <= keys
    assert net(torch.randn(1, 3, 64, 64)).shape == (1, 512)


def test_resnet18_loads_local_weights_and_folds_rgb_into_grey(tmp_path: Path) -> None:
    torch.manual_seed(0)
    src = ResNet18(3).eval()
    # a DataParallel-style checkpoint
    state = {f"module.{k}": v for k, v in src.state_dict().items()}
    state["fc.weight"], state["fc.bias"] = torch.zeros(1000, 512), torch.zeros(1000)
    path = tmp_path / "resnet18.pt"
    torch.save({"state_dict": state}, path)

    rgb = ResNet18(3).eval()
    assert load_resnet_weights(rgb, path) == ["fc.weight", "fc.bias"]
    x = torch.randn(2, 3, 64, 64)
    assert torch.allclose(rgb(x), src(x))
    grey = ResNet18(1).eval()
    load_resnet_weights(grey, path)
    g = torch.randn(2, 1, 64, 64)
    # grey = RGB of 3 equal channels
    assert torch.allclose(grey(g), src(g.expand(-1, 3, -1, -1)), atol=1e-4)

    model = build_model("resnet18", in_channels=1, dim=16, weights=path)
    assert torch.equal(model.backbone.layer4[1].conv2.weight, src.layer4[1].conv2.weight)


def test_weights_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        build_model("resnet18", weights=tmp_path / "missing.pt")
    bad = tmp_path / "bad.pt"
    torch.save({"conv1.weight": torch.zeros(64, 3, 7, 7)}, bad)
    with pytest.raises(InputError, match="not a ResNet-18"):
        build_model("resnet18", in_channels=3, weights=bad)
    with pytest.raises(ConfigError, match="only be loaded into resnet18"):
        build_model("small_cnn", weights=bad)
    with pytest.raises(ConfigError, match="unknown backbone"):
        build_model("vit")


def test_profiles() -> None:
    assert {"quick", "demo", "paper", "smoke"} <= set(PROFILES)
    paper = get_profile("paper")
    assert (paper.backbone, paper.dim, paper.lr, paper.weight_decay, paper.batch_size,
            paper.m_per_class, paper.epochs) == ("resnet18", 128, 1e-4, 1e-4, 128, 4, 100)
    assert get_profile("demo", epochs=3).epochs == 3
    with pytest.raises(ConfigError, match="unknown profile"):
        get_profile("huge")
    with pytest.raises(ConfigError, match="no setting"):
        get_profile("demo", epochz=3)


def test_training_is_seeded_and_advances_the_scheduler_once_per_epoch() -> None:
    from sphr.losses.registry import RETRIEVAL, build_loss
    from sphr.retrieval.data import load_retrieval_data
    from sphr.retrieval.train import train_model

    data = load_retrieval_data("digits", limit=120)
    prof = get_profile("smoke", epochs=2, batch_size=40, batches_per_epoch=2,
                       image_size={"digits": 16})
    r1 = train_model(data, build_loss("triplet_linear", RETRIEVAL), prof, seed=3)
    r2 = train_model(data, build_loss("triplet_linear", RETRIEVAL), prof, seed=3)
    assert [h["loss"] for h in r1.history] == [h["loss"] for h in r2.history]
    # the margin used in each epoch
    assert [h["margin"] for h in r1.history] == pytest.approx([0.0, 0.01])
    assert r1.images == 2 * 2 * 40
    am = train_model(data, build_loss("adatriplet_automargin", RETRIEVAL), prof, seed=0)
    first = am.history[0]
    assert first["margin"] == 0.25 and first["beta"] == 0.0  # eps0, beta0 in epoch 0
    # epoch 1 uses eps = mean(delta)/2 and beta = 1 + (mean(phi_an) - 1)/2 from epoch 0's statistics
    assert am.history[1]["margin"] == pytest.approx(max(0.0, first["mean_delta"] / 2))
    assert am.history[1]["beta"] == pytest.approx(1 + (first["mean_negative_similarity"] - 1) / 2)


def test_run_comparison_on_a_tiny_profile_writes_its_files(tmp_path: Path) -> None:
    from sphr.retrieval import run_comparison

    out = tmp_path / "cmp"
    res = run_comparison("forensic", ["triplet", "triplet_dams"], seeds=[0, 1], out_dir=out,
                         device="cpu", profile="smoke", data_options={"n_subjects": 12, "size": 32},
                         profile_overrides={"image_size": {"forensic": 32}})
    assert set(res.table.columns) == {"loss", "metric", "mean", "sem", "n_seeds"}
    assert set(res.table["loss"]) == {"triplet", "triplet_dams"}
    assert (res.table["n_seeds"] == 2).all()
    wide = res.wide()
    for metric in ("mAP", "mAP@R", "CMC@1", "CMC@5", "R@1", "R@8", "AUC", "P@4", "mAP_H16_proj"):
        assert metric in wide.columns
        assert wide[metric].between(0, 1).all()
    # SE is SD/sqrt(n) over the seeds
    ps = res.per_seed[(res.per_seed["loss"] == "triplet")
                      & (res.per_seed["metric"] == "mAP")]["value"]
    row = res.table[(res.table["loss"] == "triplet") & (res.table["metric"] == "mAP")].iloc[0]
    assert row["mean"] == pytest.approx(ps.mean())
    assert row["sem"] == pytest.approx(ps.std(ddof=1) / np.sqrt(2))
    expected = {"comparison.md", "comparison.parquet", "per_seed.parquet", "per_year.parquet",
                "margin_curves.parquet", "runs.parquet", "config.json", "margin_curves.png",
                "strips/triplet.png", "strips/triplet_dams.png"}
    assert set(res.files) == expected
    assert all(p.exists() for p in res.files.values())
    assert (out / "margin_curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(pd.read_parquet(out / "per_year.parquet")["year"]) <= {1.0, 2.0, 4.0, 8.0}
    assert json.loads((out / "config.json").read_text())["profile"]["name"] == "smoke"
    assert "| triplet_dams |" in (out / "comparison.md").read_text()


def test_combine_results_merges_per_loss_partitions(tmp_path: Path) -> None:
    from sphr.retrieval import combine_results, run_comparison

    kw = {"seeds": [0], "device": "cpu", "profile": "smoke", "strips": False}
    a = run_comparison("digits", ["ocam"], **kw)
    b = run_comparison("digits", ["contrastive"], **kw)
    both = combine_results([a, b], tmp_path / "both")
    assert set(both.table["loss"]) == {"ocam", "contrastive"}
    assert (tmp_path / "both" / "comparison.md").exists()
    with pytest.raises(ConfigError):
        combine_results([])


def test_run_comparison_refuses_bad_input_before_training() -> None:
    from sphr.retrieval import run_comparison

    with pytest.raises(ConfigError, match="unknown loss"):
        run_comparison("digits", ["triplet", "nope"], profile="smoke")
    with pytest.raises(ConfigError, match="no losses"):
        run_comparison("digits", [], profile="smoke")


def test_cli_runs_a_tiny_comparison_and_writes_a_manifest(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from sphr import cli
    from sphr.cli import main

    # Register only the stages present in this checkout (others may land separately).
    present = tuple(m for m in cli.COMMAND_MODULES
                    if importlib.util.find_spec(m.rsplit(".", 1)[0]) is not None)
    assert "sphr.retrieval.commands" in present
    monkeypatch.setattr(cli, "COMMAND_MODULES", present)

    out = tmp_path / "cli"
    rc = main(["--quiet", "retrieval", "digits", "--losses", "triplet", "ocam:reduction=nonzero",
               "--seeds", "0", "--profile", "smoke", "--out", str(out), "--no-strips",
               "--threads", "1"])
    assert rc == 0
    text = capsys.readouterr().out
    assert "| ocam:reduction=nonzero |" in text and "wrote" in text
    table = pd.read_parquet(out / "comparison.parquet")
    assert set(table["loss"]) == {"triplet", "ocam:reduction=nonzero"}
    assert not (out / "strips").exists()

    man = tmp_path / "man"
    assert main(["--quiet", "retrieval", "forensic", "--write-manifest", str(man),
                 "--data-option", "n_subjects=3", "--data-option", "size=16"]) == 0
    assert len(pd.read_csv(man / "manifest.csv")) > 3
    rc = main(["--quiet", "retrieval", str(man / "manifest.csv"), "--losses", "contrastive",
               "--seeds", "0", "--profile", "smoke", "--out", str(tmp_path / "from_manifest"),
               "--image-size", "16", "--m-per-class", "2", "--batch-size", "4",
               "--data-option", "load_size=16", "--no-strips"])
    assert rc == 0

    rc = main(["--quiet", "retrieval", "digits", "--losses", "magic", "--out",
               str(tmp_path / "x")])
    assert rc == 2
    assert "unknown loss" in capsys.readouterr().err
