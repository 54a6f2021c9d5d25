"""``python -m sphr.train.pipes_entry COHORT_DIR OUT_DIR``: ``sphr train`` under Dagster Pipes.

The training side of the Dagster asset ``train/sphr_model``: it needs only
``sphr`` and the dependency-free ``dagster-pipes`` package (never ``dagster``),
so it runs the same in a local subprocess (``PipesSubprocessClient``) or in a
pod on a Kubernetes GPU node (``PipesK8sClient``). Settings come as JSON
(``--profile``, ``--overrides``; or the Pipes extras ``profile`` / ``overrides``);
the loss curve and training metrics go back to Dagster as materialization
metadata of ``train/sphr_model``. Without a Pipes context (run by hand) it
just trains.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sphr.profiles import DEFAULT_PROFILE


def _metadata(out: Path) -> dict:
    import pandas as pd

    from sphr.io import read_json
    from sphr.plots import markdown_image

    report = read_json(out / "train_report.json")
    curve = pd.read_parquet(out / "loss_curve.parquet")
    meta = {"path": {"raw_value": str(out / "model.pt"), "type": "path"},
            "epochs": len(curve),
            "final_loss": float(curve["loss"].iloc[-1]) if len(curve) else None,
            "loss_curve_values": {"raw_value": [float(x) for x in curve["loss"]], "type": "json"},
            "train_report": {"raw_value": json.loads(json.dumps(report, default=str)),
                             "type": "json"}}
    png = out / "loss_curve.png"
    if png.exists():
        meta["loss_curve"] = {"raw_value": markdown_image(png.read_bytes(), "loss curve"),
                              "type": "md"}
    for key in ("n_triplets", "n_train_rows", "n_test_rows", "n_features"):
        if isinstance(report.get(key), (int, float)):
            meta[key] = report[key]
    return meta


def main(argv: list[str] | None = None) -> int:
    import dataclasses

    from sphr.train import TrainConfig, run_train

    parser = argparse.ArgumentParser(prog="python -m sphr.train.pipes_entry")
    parser.add_argument("cohort_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--overrides", default=None, help="JSON object of TrainConfig fields")
    parser.add_argument("--asset-key", default="train/sphr_model")
    args = parser.parse_args(argv)
    import os

    if "DAGSTER_PIPES_CONTEXT" not in os.environ:  # run by hand, not launched by Dagster
        settings = dataclasses.replace(TrainConfig.profile(args.profile or DEFAULT_PROFILE),
                                       **json.loads(args.overrides or "{}"))
        run_train(args.cohort_dir, args.out_dir, settings)
        return 0
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        profile = args.profile or pipes.extras.get("profile") or DEFAULT_PROFILE
        overrides = (json.loads(args.overrides) if args.overrides
                     else dict(pipes.extras.get("overrides") or {}))
        settings = dataclasses.replace(TrainConfig.profile(profile), **overrides)
        pipes.log.info(f"training {args.cohort_dir} -> {args.out_dir} ({profile}, {overrides})")
        run_train(args.cohort_dir, args.out_dir, settings)
        pipes.report_asset_materialization(asset_key=args.asset_key,
                                           metadata=_metadata(args.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
