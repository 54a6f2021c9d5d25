"""Image manifests: a CSV or parquet listing image files with subject ids and visit years.

Columns (one row per image):

* ``path`` (required): image file, absolute or relative to the manifest's folder;
  any format Pillow reads (PNG, JPEG, TIFF, ...).
* ``subject`` (required; ``class`` is accepted as its alias): who or what the image
  shows; retrieval counts an answer as right when the subject matches.
* ``years`` (optional; ``visit`` is accepted): years from baseline, 0 = baseline.
  With visits present, the gallery is the baseline images of the test subjects
  and the queries are their follow-ups; without, retrieval is leave-one-out.
* ``label`` (optional): a class label kept for reports (e.g. disease grade).
* ``split`` (optional): ``train`` / ``test``; otherwise subjects are split at
  random (seeded), whole subjects to one side.

Images are decoded once, converted to grey (``L``) or ``RGB`` and resized to
``load_size``; they are kept in memory when they fit in ``cache_bytes`` and
read per batch otherwise.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from torch.utils.data import Dataset

from sphr.errors import InputError
from sphr.retrieval.data.core import ImageSet, RetrievalData, split_by_group

log = logging.getLogger(__name__)

_ALIASES = {"subject": ("subject", "class"), "years": ("years", "visit")}


def read_manifest(path: str | Path) -> pd.DataFrame:
    """Read and check a manifest; returns columns path (absolute), subject, years, label, split."""
    path = Path(path)
    if not path.exists():
        raise InputError("manifest not found", file=path)
    suffix = path.suffix.lower()
    if suffix in {".parquet", ".pq"}:
        df = pd.read_parquet(path)
    elif suffix in {".csv", ".txt"}:
        df = pd.read_csv(path)
    else:
        raise InputError("manifest must be .csv or .parquet", file=path)
    cols = {c.strip().lower(): c for c in df.columns}
    if "path" not in cols:
        raise InputError("manifest has no 'path' column", file=path, field="path")
    out = pd.DataFrame({"path": df[cols["path"]].astype(str)})
    for name, aliases in _ALIASES.items():
        found = next((cols[a] for a in aliases if a in cols), None)
        if found is None and name == "subject":
            raise InputError("manifest has no 'subject' (or 'class') column", file=path,
                             field="subject")
        out[name] = df[found] if found is not None else np.nan
    out["label"] = df[cols["label"]] if "label" in cols else pd.NA
    out["split"] = df[cols["split"]].astype(str).str.strip().str.lower() if "split" in cols else ""
    if len(out) == 0:
        raise InputError("manifest has no rows", file=path)
    for i, value in enumerate(out["subject"]):
        if pd.isna(value) or str(value).strip() == "":
            raise InputError("empty subject id", file=path, field="subject", row=i + 1)
    years = pd.to_numeric(out["years"], errors="coerce")
    bad = out["years"].notna() & years.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError(f"years must be a number, got {out['years'].iloc[row]!r}", file=path,
                         field="years", row=row + 1)
    if (years < 0).any():
        row = int(np.flatnonzero((years < 0).to_numpy())[0])
        raise InputError("years from baseline must be >= 0", file=path, field="years", row=row + 1)
    out["years"] = years.astype(float)
    bad_split = ~out["split"].isin(["", "train", "test", "nan"])
    if bad_split.any():
        row = int(np.flatnonzero(bad_split.to_numpy())[0])
        raise InputError(f"split must be train or test, got {out['split'].iloc[row]!r}", file=path,
                         field="split", row=row + 1)
    base = path.parent
    resolved = []
    for i, p in enumerate(out["path"]):
        full = Path(p) if Path(p).is_absolute() else base / p
        if not full.exists():
            raise InputError(f"image not found: {full}", file=path, field="path", row=i + 1)
        resolved.append(str(full))
    out["path"] = resolved
    return out


def load_image(path: str, channels: int, size: int) -> torch.Tensor:
    """One image file -> uint8 ``(C, size, size)`` (Pillow: decode, convert, bilinear resize)."""
    from PIL import Image

    with Image.open(path) as im:
        im = im.convert("L" if channels == 1 else "RGB")
        if im.size != (size, size):
            im = im.resize((size, size), Image.BILINEAR)
        arr = np.asarray(im, dtype=np.uint8)
    if arr.ndim == 2:
        arr = arr[None]
    else:
        arr = arr.transpose(2, 0, 1)
    return torch.from_numpy(arr.copy())


class ManifestImages(Dataset):
    """Lazy image dataset over file paths (used when the images do not fit in memory)."""

    def __init__(self, paths: list[str], channels: int, size: int) -> None:
        self.paths, self.channels, self.size = list(paths), channels, size

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> torch.Tensor:
        return load_image(self.paths[i], self.channels, self.size)


def load_manifest_data(path: str | Path, *, channels: int = 1, load_size: int = 280,
                       test_fraction: float = 0.3, split_seed: int = 0,
                       cache_bytes: int = 2 << 30) -> RetrievalData:
    """A manifest as :class:`RetrievalData` (subject-level retrieval)."""
    from sphr.progress import progress

    df = read_manifest(path)
    codes, uniques = pd.factorize(df["subject"].astype(str))
    subjects = codes.astype(np.int64)
    years = df["years"].to_numpy(dtype=float)
    if (df["split"].isin(["train", "test"])).all():
        test = (df["split"] == "test").to_numpy()
    else:
        test = split_by_group(subjects, test_fraction, split_seed)
    paths = df["path"].tolist()
    in_memory = len(paths) * channels * load_size * load_size <= cache_bytes
    if in_memory:
        images: torch.Tensor | Dataset = torch.stack(
            [
                load_image(p, channels, load_size)
                for p in progress(paths, desc="decode images", unit="img")
            ]
        )
    else:
        log.info("%d images do not fit in %d bytes: reading them per batch", len(paths),
                 cache_bytes)
        images = ManifestImages(paths, channels, load_size)
    full = ImageSet(images, subjects, years, names=paths)
    info = {"source": str(Path(path).resolve()), "images": len(paths), "subjects": len(uniques),
            "in_memory": in_memory, "load_size": load_size, "channels": channels,
            "split": "manifest" if df["split"].isin(["train", "test"]).all()
            else f"random by subject ({split_seed})"}
    return RetrievalData(name=Path(path).stem, level="subject", train=full.subset(~test),
                         test=full.subset(test), channels=channels, native_size=load_size,
                         info=info)


def write_manifest(data: RetrievalData, out_dir: str | Path) -> Path:
    """Write a dataset as PNG files plus ``manifest.csv`` (path, subject, years, split).

    Lets the embedded synthetic set go through the same manifest route as a
    real dataset.
    """
    from PIL import Image

    from sphr.io import atomic_path

    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for split, part in (("train", data.train), ("test", data.test)):
        for i in range(len(part)):
            img = part.batch([i])[0].numpy()
            name = f"images/{split}_{i:06d}_s{part.labels[i]}_y{part.years[i]:g}.png"
            arr = img[0] if img.shape[0] == 1 else img.transpose(1, 2, 0)
            with atomic_path(out_dir / name) as tmp:
                Image.fromarray(arr).save(tmp, format="PNG")
            rows.append({"path": name, "subject": int(part.labels[i]),
                         "years": None if np.isnan(part.years[i]) else float(part.years[i]),
                         "split": split})
    target = out_dir / "manifest.csv"
    with atomic_path(target) as tmp:
        pd.DataFrame(rows).to_csv(tmp, index=False)
    return target
