"""A cheap content fingerprint of an export file: its data version.

Choice: a file up to ``FULL_HASH_LIMIT`` (256 MiB; a 20,000-participant
ukbconv export is about 45 MB and hashes in a fraction of a second) is hashed
whole (sha256), so any changed value makes a new version. A larger file (a
full UK Biobank export is tens of GB) is fingerprinted by its size, its first
MiB (the header and first rows), its last block and ``SAMPLED_BLOCKS`` blocks
of 64 KiB at evenly spaced offsets: a few MB read whatever the size. An edit
that keeps the size and falls between the sampled blocks is missed there;
UKB re-exports change the size and the header, so that trade is accepted.

The modification time is *not* part of the version: copying or touching a file
does not make new data. Callers that look at a file often (the sensor) may
skip re-hashing while size and mtime are unchanged (:func:`stat_key`).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

FULL_HASH_LIMIT = 256 * 2**20
HEAD_BYTES = 2**20
BLOCK = 64 * 2**10
SAMPLED_BLOCKS = 64


def stat_key(path: str | Path) -> str:
    """``size:mtime_ns``: changes whenever the file may have changed (cheap, no read)."""
    st = os.stat(path)
    return f"{st.st_size}:{st.st_mtime_ns}"


def fingerprint(path: str | Path, *, full_hash_limit: int = FULL_HASH_LIMIT) -> str:
    """The file's data version: ``full-<sha256[:16]>`` or ``sampled-<sha256[:16]>``."""
    path = Path(path)
    size = path.stat().st_size
    h = hashlib.sha256(str(size).encode())
    with path.open("rb") as fh:
        if size <= full_hash_limit:
            for chunk in iter(lambda: fh.read(2**22), b""):
                h.update(chunk)
            return f"full-{h.hexdigest()[:16]}"
        h.update(fh.read(HEAD_BYTES))
        for i in range(SAMPLED_BLOCKS + 1):
            offset = HEAD_BYTES + (size - HEAD_BYTES - BLOCK) * i // SAMPLED_BLOCKS
            fh.seek(offset)
            h.update(fh.read(BLOCK))
    return f"sampled-{h.hexdigest()[:16]}"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(2**22), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_sha256(folder: str | Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (relative path -> digest)."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): sha256_file(p)
            for p in sorted(folder.rglob("*")) if p.is_file()}
