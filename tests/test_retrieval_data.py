"""Retrieval datasets: manifests (PNG files in tmp_path), digits, the synthetic forensic
set, sampler, transforms."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from sphr.errors import ConfigError, InputError
from sphr.retrieval.data import (
    BatchTransform,
    ForensicConfig,
    MPerClassBatchSampler,
    generate_forensic,
    load_retrieval_data,
    read_manifest,
    write_manifest,
)


def write_pngs(folder: Path, n_subjects: int = 4, years: tuple[float, ...] = (0.0, 1.0, 3.0),
               mode: str = "L", size: int = 12) -> list[dict]:
    from PIL import Image

    (folder / "img").mkdir(parents=True, exist_ok=True)
    rows = []
    for s in range(n_subjects):
        for y in years:
            value = 20 * s + int(y)
            shape = (size, size) if mode == "L" else (size, size, 3)
            arr = np.full(shape, value, dtype=np.uint8)
            name = f"img/s{s}_y{y:g}.png"
            Image.fromarray(arr, mode=mode).save(folder / name)
            rows.append({"path": name, "subject": f"P{s:03d}", "years": y, "label": s % 2})
    return rows


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    rows = write_pngs(tmp_path)
    path = tmp_path / "manifest.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_manifest_loads_pngs_into_a_dataset_split_by_subject(manifest: Path) -> None:
    data = load_retrieval_data(manifest, load_size=8, test_fraction=0.5, split_seed=0)
    assert data.level == "subject" and data.channels == 1
    assert len(data.train) + len(data.test) == 12
    assert not set(data.train.labels) & set(data.test.labels)  # whole subjects on one side
    assert data.test.has_visits
    img = data.test.batch([0])
    assert img.dtype == torch.uint8 and img.shape == (1, 1, 8, 8)
    # pixel value encodes subject and year: 20 s + y
    for i in range(len(data.test)):
        value = int(data.test.batch([i])[0, 0, 0, 0])
        assert value % 20 == int(data.test.years[i])
    assert data.info["subjects"] == 4 and data.info["in_memory"]


def test_manifest_rgb_parquet_aliases_and_explicit_split(tmp_path: Path) -> None:
    rows = write_pngs(tmp_path, n_subjects=3, mode="RGB")
    df = pd.DataFrame(rows).rename(columns={"subject": "class", "years": "visit"})
    df["split"] = ["test" if r["path"].startswith("img/s0") else "train" for r in rows]
    path = tmp_path / "m.parquet"
    df.to_parquet(path)
    data = load_retrieval_data(path, channels=3, load_size=10)
    assert data.channels == 3 and data.train.batch([0]).shape == (1, 3, 10, 10)
    assert len(data.test) == 3 and len(data.train) == 6
    assert data.info["split"] == "manifest"


def test_manifest_without_years_is_leave_one_out(tmp_path: Path) -> None:
    rows = write_pngs(tmp_path)
    pd.DataFrame(rows).drop(columns="years").to_csv(tmp_path / "m.csv", index=False)
    data = load_retrieval_data(tmp_path / "m.csv", load_size=8)
    assert np.isnan(data.test.years).all() and not data.test.has_visits


def test_large_manifests_are_read_per_batch(manifest: Path) -> None:
    data = load_retrieval_data(manifest, load_size=8, cache_bytes=10)
    assert not data.test.in_memory
    assert data.test.batch([0, 1]).shape == (2, 1, 8, 8)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda df: df.drop(columns="path"), "no 'path' column"),
    (lambda df: df.drop(columns="subject"), "no 'subject'"),
    (lambda df: df.assign(years=["x"] + [0.0] * (len(df) - 1)), "years must be a number"),
    (lambda df: df.assign(years=[-1.0] + [0.0] * (len(df) - 1)), ">= 0"),
    (lambda df: df.assign(path=["img/missing.png", *list(df["path"][1:])]), "image not found"),
    (lambda df: df.assign(split=["val"] + ["train"] * (len(df) - 1)), "train or test"),
    (lambda df: df.assign(subject=["", *list(df["subject"][1:])]), "subject"),
])
def test_bad_manifests_are_refused_with_the_row(manifest: Path, edit, message: str) -> None:
    df = edit(pd.read_csv(manifest))
    bad = manifest.with_name("bad.csv")
    df.to_csv(bad, index=False)
    with pytest.raises(InputError, match=message):
        read_manifest(bad)


def test_unknown_dataset_and_missing_manifest(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown dataset"):
        load_retrieval_data("imagenet")
    with pytest.raises(InputError, match="not found"):
        load_retrieval_data(tmp_path / "nope.csv")


def test_digits_are_real_images_split_by_class_share() -> None:
    data = load_retrieval_data("digits")
    assert data.level == "class" and data.native_size == 8
    assert len(data.train) + len(data.test) == 1797
    assert set(data.train.labels) == set(data.test.labels) == set(range(10))
    assert np.isnan(data.test.years).all()
    x = data.train.batch(np.arange(len(data.train)))
    assert x.dtype == torch.uint8 and x.shape[1:] == (1, 8, 8) and int(x.max()) == 255
    small = load_retrieval_data("digits", limit=100, split_seed=1)
    assert len(small.train) + len(small.test) == 100


def test_forensic_set_is_deterministic_with_visits_and_subject_specific() -> None:
    cfg = ForensicConfig(n_subjects=6, size=32, seed=3)
    imgs, subj, years = generate_forensic(cfg)
    imgs2, subj2, years2 = generate_forensic(cfg)
    assert np.array_equal(imgs, imgs2) and np.array_equal(subj, subj2)
    assert np.array_equal(years, years2)
    assert imgs.shape[1:] == (32, 32) and imgs.dtype == np.uint8
    assert set(years) <= set(cfg.years) and (years[subj == 0] == 0).sum() == 1  # one baseline each
    assert all((years[subj == s] == 0).any() for s in range(6))
    # a subject's follow-up is nearer its own baseline than other subjects' baselines, on average
    f = imgs.reshape(len(imgs), -1).astype(float)
    f = (f - f.mean(1, keepdims=True)) / f.std(1, keepdims=True)
    base = {s: f[(subj == s) & (years == 0)][0] for s in range(6)}
    same, other = [], []
    for i in np.flatnonzero(years > 0):
        for s in range(6):
            (same if s == subj[i] else other).append(float(f[i] @ base[s]) / f.shape[1])
    assert np.mean(same) > np.mean(other)
    # a different generator seed gives different people
    assert not np.array_equal(
        generate_forensic(ForensicConfig(n_subjects=6, size=32, seed=4))[0][0], imgs[0]
    )


def test_forensic_split_keeps_subjects_apart_and_refuses_unknown_options() -> None:
    data = load_retrieval_data("forensic", n_subjects=10, size=32, test_fraction=0.3, years=[0, 2])
    assert not set(data.train.labels) & set(data.test.labels)
    assert len(np.unique(data.test.labels)) == 3
    assert set(data.test.years) <= {0.0, 2.0} and data.test.has_visits
    with pytest.raises(ConfigError, match="no option"):
        load_retrieval_data("forensic", n_people=3)


def test_write_manifest_round_trips(tmp_path: Path) -> None:
    data = load_retrieval_data("forensic", n_subjects=4, size=16, years=[0, 1])
    path = write_manifest(data, tmp_path / "out")
    back = load_retrieval_data(path, load_size=16)
    assert len(back.train) == len(data.train) and len(back.test) == len(data.test)
    assert torch.equal(back.test.batch(np.arange(len(back.test))),
                       data.test.batch(np.arange(len(data.test))))
    assert np.array_equal(back.test.years, data.test.years)


def test_m_per_class_sampler_puts_m_images_of_each_chosen_class_in_a_batch() -> None:
    labels = np.repeat(np.arange(20), 5)
    sampler = MPerClassBatchSampler(labels, m=4, batch_size=32, seed=0)
    assert sampler.classes_per_batch == 8 and len(sampler) == 100 // 32
    batches = list(sampler)
    assert len(batches) == len(sampler)
    for b in batches:
        counts = pd.Series(labels[b]).value_counts()
        assert len(b) == 32 and len(counts) == 8 and (counts == 4).all()
        assert len(set(b)) == 32  # 5 images per class >= m: drawn without replacement
    again = list(MPerClassBatchSampler(labels, m=4, batch_size=32, seed=0))
    assert again == batches


def test_sampler_with_few_classes_grows_m_and_skips_singletons() -> None:
    labels = np.r_[np.repeat(np.arange(3), 10), [99]]  # class 99 has one image
    sampler = MPerClassBatchSampler(labels, m=4, batch_size=30, seed=1, batches_per_epoch=3)
    assert sampler.classes_per_batch == 3 and sampler.m == 10 and len(sampler) == 3
    for b in sampler:
        assert 30 not in b  # the singleton never enters a batch
        assert (pd.Series(labels[b]).value_counts() == 10).all()
    with pytest.raises(ConfigError, match="m >= 2"):
        MPerClassBatchSampler(labels, m=1)
    with pytest.raises(ConfigError, match="two classes"):
        MPerClassBatchSampler(np.array([0, 0, 1]), m=2)


def test_batch_transform_test_time_is_a_deterministic_resize_and_train_time_augments() -> None:
    imgs = torch.randint(0, 256, (4, 1, 40, 40), dtype=torch.uint8)
    test_t = BatchTransform(16)
    a, b = test_t(imgs), test_t(imgs)
    assert a.shape == (4, 1, 16, 16) and torch.equal(a, b)
    flat = torch.full((2, 1, 40, 40), 128, dtype=torch.uint8)
    centre = test_t(flat)[:, :, 4:12, 4:12]
    assert torch.allclose(centre, torch.full_like(centre, (128 / 255 - 0.449) / 0.226), atol=1e-4)
    train_t = BatchTransform(16, train=True)
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    x1, x2 = train_t(imgs, g1), train_t(imgs, g2)
    assert torch.equal(x1, x2)  # seeded
    assert not torch.allclose(x1, a)  # augmented
    assert torch.isfinite(x1).all()
    rgb = BatchTransform(8)(torch.zeros(2, 3, 20, 20, dtype=torch.uint8))
    assert rgb.shape == (2, 3, 8, 8)
