"""Atomic output: a reader never sees a half-written file.

Every writer goes through :func:`atomic_path`, which writes to a temporary
name in the same folder and renames it into place (``os.replace`` is atomic on
one filesystem). Steps that write several files stage them with
:func:`staged_outputs` so a failure leaves the output folder as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


#: mkstemp creates files 0600; finished outputs get the usual 0666 & ~umask
_FILE_MODE = 0o666 & ~_umask()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        if tmp_path.exists():
            os.chmod(tmp_path, _FILE_MODE)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def write_json(obj: Any, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, default=_json_default) + "\n")
    return Path(path)


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())


def write_parquet(table: Any, path: str | Path) -> Path:
    """Write a pandas / polars DataFrame or a pyarrow Table atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(table, pa.Table):
        arrow = table
    elif hasattr(table, "to_arrow"):  # polars
        arrow = table.to_arrow()
    else:  # pandas
        arrow = pa.Table.from_pandas(table, preserve_index=False)
    with atomic_path(path) as tmp:
        pq.write_table(arrow, tmp, compression="zstd")
    return Path(path)


def write_parquets(out_dir: str | Path, **tables: Any) -> list[Path]:
    """Write each table as ``out_dir/<name>.parquet`` (atomically, one by one, in order)."""
    return [write_parquet(table, Path(out_dir) / f"{name}.parquet")
            for name, table in tables.items()]


def write_npz(path: str | Path, **arrays: np.ndarray) -> Path:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
    return Path(path)


def write_text(text: str, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_bytes(data: bytes, path: str | Path) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


@contextlib.contextmanager
def staged_outputs(out_dir: str | Path) -> Iterator[Path]:
    """Write a step's files into a staging folder, then move them into ``out_dir``.

    On an exception the staging folder is removed and ``out_dir`` keeps what
    it had, so a failed step never leaves a mix of old and new files.
    """
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial",
                                  dir=out_dir.parent))
    try:
        yield stage
        out_dir.mkdir(parents=True, exist_ok=True)
        for item in sorted(stage.rglob("*")):
            if item.is_dir():
                continue
            target = out_dir / item.relative_to(stage)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(item, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
