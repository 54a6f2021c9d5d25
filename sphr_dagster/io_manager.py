"""Parquet IO manager: tables between assets live at RUN/<key path>[/<partition>].parquet.

Asset keys mirror the run directory (``ingest/baseline`` -> ``RUN/ingest/baseline.parquet``),
so what Dagster stores is what ``sphr cohorts RUN/ingest/baseline.parquet`` reads.
Written atomically through ``sphr.io``. A small IO manager of our own on
pyarrow instead of dagster-polars, whose releases pin polars below 2 while this project
uses polars 2.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pandas as pd

from sphr.io import write_parquet
from sphr.layout import DEFAULT_RUN_DIR


class ParquetIOManager(dg.ConfigurableIOManager):
    root: str = DEFAULT_RUN_DIR

    def _path(self, key: dg.AssetKey, partition: str | None) -> Path:
        base = Path(self.root).expanduser().resolve().joinpath(*key.path)
        return base / f"{partition}.parquet" if partition else base.with_suffix(".parquet")

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        if obj is None:
            return
        # the asset's own partitioning, not the run's: ingest is unpartitioned even in a
        # run launched for one sex
        partition = context.asset_partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition)
        write_parquet(obj, path)
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path)),
                                     "rows": len(obj)})

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        # the upstream asset's partitioning decides the file (ingest is not partitioned)
        partition = context.asset_partition_key if context.has_asset_partitions else None
        path = self._path(context.asset_key, partition)
        if not path.exists():
            raise FileNotFoundError(
                f"{path}: materialize {context.asset_key.to_user_string()} first")
        if getattr(context.dagster_type, "typing_type", None) is not None and \
                "polars" in str(context.dagster_type.typing_type):
            import polars as pl

            return pl.read_parquet(path)
        return pd.read_parquet(path)
