"""``python -m sphr.train.pipes_entry COHORT_DIR OUT_DIR``: ``sphr train`` under Dagster Pipes.

The training side of the Dagster asset ``train/sphr_model``: it needs only
``sphr`` and the dependency-free ``dagster-pipes`` package (never ``dagster``),
so it runs the same in a local subprocess (``PipesSubprocessClient``) or in a
pod on a Kubernetes GPU node (``PipesK8sClient``). The settings come as one
:class:`~sphr.train.config.TrainConfig`, serialized once by the asset
(``TrainConfig.to_dict``, the Pipes extra ``train_config``) and read back once here
(``TrainConfig.from_dict``). By hand, ``--config`` gives TrainConfig fields as a JSON
object (e.g. the ``config`` of a ``train_report.json``); fields left out take the default
profile's values, as ``sphr train``'s do.
The loss curve and training metrics go back to Dagster as materialization metadata of
``train/sphr_model`` (:func:`sphr.train.run.model_metadata`). Without a Pipes context
(run by hand) it just trains.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

#: the Pipes extra that carries the TrainConfig (``TrainConfig.to_dict()``)
CONFIG_EXTRA = "train_config"


def fold_metadata(reports: list[dict]) -> dict:
    """What the fold models' materialization says: how many, their epochs and seconds."""
    return {"folds": len(reports),
            "epochs": ", ".join(str(r["epochs"]) for r in reports),
            "train_s": round(sum(r["timings"].get("train_s", 0.0) for r in reports), 1),
            "n_train_rows": ", ".join(str(r["n_train_rows"]) for r in reports)}


def main(argv: list[str] | None = None) -> int:
    from sphr.train.config import TrainConfig
    from sphr.train.run import model_metadata, run_train, train_folds

    parser = argparse.ArgumentParser(prog="python -m sphr.train.pipes_entry")
    parser.add_argument("cohort_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--config", default=None,
                        help="run by hand: TrainConfig fields as a JSON object (the default "
                        "profile's for the rest); under Dagster the Pipes extra "
                        f"{CONFIG_EXTRA!r} carries the whole TrainConfig")
    parser.add_argument("--asset-key", default="train/sphr_model")
    parser.add_argument("--folds", action="store_true",
                        help="train the cross-fit's fold models: each COHORT_DIR/folds/fold<k> "
                        "into OUT_DIR/fold<k> (sphr.train.run.train_folds)")
    args = parser.parse_args(argv)
    train = train_folds if args.folds else run_train
    if "DAGSTER_PIPES_CONTEXT" not in os.environ:  # run by hand, not launched by Dagster
        from sphr.profiles import DEFAULT_PROFILE

        given = json.loads(args.config) if args.config else {}
        train(args.cohort_dir, args.out_dir, TrainConfig.profile(DEFAULT_PROFILE, **given))
        return 0
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        # the asset's TrainConfig, read back as the asset wrote it: every field is given
        settings = TrainConfig.from_dict(pipes.extras[CONFIG_EXTRA])
        pipes.log.info(f"training {args.cohort_dir} -> {args.out_dir} ({settings})")
        reports = train(args.cohort_dir, args.out_dir, settings)
        pipes.report_asset_materialization(
            asset_key=args.asset_key,
            metadata=fold_metadata(reports) if args.folds else model_metadata(args.out_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
