"""Retrieval datasets: image manifests, scikit-learn digits, the synthetic forensic
set, sampler, transforms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphr.errors import ConfigError
from sphr.retrieval.data.core import ImageSet, RetrievalData, split_by_group, split_stratified
from sphr.retrieval.data.digits import load_digits_data
from sphr.retrieval.data.forensic import ForensicConfig, generate_forensic, load_forensic_data
from sphr.retrieval.data.manifest import load_manifest_data, read_manifest, write_manifest
from sphr.retrieval.data.sampler import MPerClassBatchSampler
from sphr.retrieval.data.transforms import BatchTransform

EMBEDDED: tuple[str, ...] = ("digits", "forensic")


def load_retrieval_data(source: str | Path | RetrievalData, **options: Any) -> RetrievalData:
    """``digits``, ``forensic`` or a manifest path (CSV / parquet) -> :class:`RetrievalData`.

    ``options`` go to the loader: digits (``test_fraction``, ``split_seed``,
    ``limit``), forensic (``n_subjects``, ``years``, ``size``, ``missing_rate``,
    ``difficulty``, ``seed``, ``test_fraction``, ``split_seed``), manifest
    (``channels``, ``load_size``, ``test_fraction``, ``split_seed``, ``cache_bytes``).
    """
    if isinstance(source, RetrievalData):
        return source
    name = str(source)
    if name == "digits":
        return load_digits_data(**options)
    if name == "forensic":
        split = {k: options.pop(k) for k in ("test_fraction", "split_seed") if k in options}
        fields = set(ForensicConfig.__dataclass_fields__)
        unknown = set(options) - fields
        if unknown:
            raise ConfigError(f"forensic set has no option(s) {', '.join(sorted(unknown))}")
        if "years" in options:
            options["years"] = tuple(float(y) for y in options["years"])
        return load_forensic_data(ForensicConfig(**options), **split)
    if Path(name).suffix.lower() in {".csv", ".parquet", ".pq", ".txt"} or Path(name).exists():
        return load_manifest_data(name, **options)
    raise ConfigError(f"unknown dataset {name!r}: use digits, forensic or a manifest .csv / "
                      ".parquet path")


__all__ = [
    "EMBEDDED",
    "BatchTransform",
    "ForensicConfig",
    "ImageSet",
    "MPerClassBatchSampler",
    "RetrievalData",
    "generate_forensic",
    "load_digits_data",
    "load_forensic_data",
    "load_manifest_data",
    "load_retrieval_data",
    "read_manifest",
    "split_by_group",
    "split_stratified",
    "write_manifest",
]
