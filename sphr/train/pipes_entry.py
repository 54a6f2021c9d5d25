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
``--comparison LOSSES`` trains the loss comparison's stack (one model per loss) into
``OUT_DIR``, as ``sphr train --losses`` does. ``--fold K`` trains fold K's model of the
cross-fit (``COHORT_DIR/folds/foldK`` into
``OUT_DIR/foldK``), the unit a fit engine (``sphr_dagster.fits``: a local process, a Ray job,
a SLURM job, a pod) schedules; ``--folds`` trains all of them in turn. A fold already fitted
with the same config and data is kept (:func:`sphr.train.run.completed_fit`).

What a fit reports goes back to Dagster as one custom Pipes message, ``{"fit": NAME,
"metadata": ...}`` (the loss curve and training metrics, :func:`sphr.train.run.model_metadata`),
which the asset turns into its materialization's metadata: several fits of one step report
without claiming the step's asset. Without a Pipes context (run by hand) it just trains.
``SPHR_FIT_THREADS`` sets its torch threads (an engine's CPUs per fit).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphr.train.config import TrainConfig

#: the Pipes extra that carries the TrainConfig (``TrainConfig.to_dict()``)
CONFIG_EXTRA = "train_config"


def fold_metadata(reports: list[dict]) -> dict:
    """What the fold models' materialization says: how many, their epochs and seconds."""
    return {"folds": len(reports),
            "epochs": ", ".join(str(r["epochs"]) for r in reports),
            "train_s": round(sum(r["timings"].get("train_s", 0.0) for r in reports), 1),
            "n_train_rows": ", ".join(str(r["n_train_rows"]) for r in reports)}


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(prog="python -m sphr.train.pipes_entry")
    parse.add_argument("cohort_dir", type=Path)
    parse.add_argument("out_dir", type=Path)
    parse.add_argument("--config", default=None,
                       help="run by hand: TrainConfig fields as a JSON object (the default "
                       "profile's for the rest); under Dagster the Pipes extra "
                       f"{CONFIG_EXTRA!r} carries the whole TrainConfig")
    parse.add_argument("--fit", default="sphr_model",
                       help="the fit's name in what it reports (e.g. female/fold2)")
    group = parse.add_mutually_exclusive_group()
    group.add_argument("--folds", action="store_true",
                       help="train the cross-fit's fold models: each COHORT_DIR/folds/fold<k> "
                       "into OUT_DIR/fold<k> (sphr.train.run.train_folds)")
    group.add_argument("--fold", type=int, default=None,
                       help="train fold K's model only (sphr.train.run.train_fold)")
    group.add_argument("--comparison", default=None, metavar="LOSSES",
                       help="train the loss comparison: one model per loss (comma-separated) "
                       "into OUT_DIR/<loss>, as one stack (sphr.train.comparison)")
    parse.add_argument("--profile", default=None,
                       help="with --comparison: the profile the report names (the settings are "
                       "the TrainConfig's)")
    return parse


def run_fit(args: argparse.Namespace, settings: TrainConfig) -> dict:
    """The fit the arguments name, trained; what it reports (its metadata). The one body of a
    fit, in a process of its own (here) or in the step's (the local engine's default)."""
    from sphr.train.run import model_metadata, run_train, train_fold, train_folds

    if args.comparison:
        from sphr.profiles import DEFAULT_PROFILE
        from sphr.train.comparison import train_loss_comparison

        return train_loss_comparison(args.cohort_dir, args.out_dir, args.comparison.split(","),
                                     profile=args.profile or DEFAULT_PROFILE, config=settings)
    if args.folds:
        return fold_metadata(train_folds(args.cohort_dir, args.out_dir, settings))
    if args.fold is not None:
        train_fold(args.cohort_dir, args.out_dir, args.fold, settings)
        return model_metadata(args.out_dir / f"fold{args.fold}")
    run_train(args.cohort_dir, args.out_dir, settings)
    return model_metadata(args.out_dir)


def main(argv: list[str] | None = None) -> int:
    from sphr.train.config import TrainConfig

    args = parser().parse_args(argv)
    started = time.time()  # when the engine got the fit going (its start delay's end)
    if os.environ.get("SPHR_FIT_THREADS", "").isdigit():
        from sphr.device import configure_threads

        configure_threads(int(os.environ["SPHR_FIT_THREADS"]))
    if "DAGSTER_PIPES_CONTEXT" not in os.environ:  # run by hand, not launched by Dagster
        from sphr.profiles import DEFAULT_PROFILE

        given = json.loads(args.config) if args.config else {}
        run_fit(args, TrainConfig.profile(DEFAULT_PROFILE, **given))
        return 0
    from dagster_pipes import open_dagster_pipes

    with open_dagster_pipes() as pipes:
        # the asset's TrainConfig, read back as the asset wrote it: every field is given
        settings = TrainConfig.from_dict(pipes.extras[CONFIG_EXTRA])
        pipes.log.info(f"fit {args.fit}: {args.cohort_dir} -> {args.out_dir} ({settings})")
        meta = run_fit(args, settings)
        pipes.report_custom_message({"fit": args.fit,
                                     "metadata": {**meta, "fit_started_at": started}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
