"""``sphr evaluate RUN_DIR --out DIR``: the paper's tables from a run directory.

The library (:func:`sphr.evaluate.pipeline.run_evaluate`) only reads the earlier stages'
folders. For a standalone ``sphr evaluate RUN``, this command first runs those stages' own
functions for what the run lacks: the baselines stage for missing baselines
(:func:`sphr.baselines.pipeline.fit_baselines`, ``write_baselines``) and the training
stage's loss comparison
(:func:`sphr.train.comparison.train_loss_comparison`, a no-op when its folders already hold
these losses for this config and data).
"""

from __future__ import annotations

import argparse

from sphr.profiles import DEFAULT_PROFILE, PROFILES


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def register(sub: argparse._SubParsersAction) -> None:
    import dataclasses

    from sphr.baselines import REPRESENTATIONS
    from sphr.baselines.config import BaselinesConfig
    from sphr.evaluate.config import NN_EHR_CONFIG, EvalConfig
    from sphr.evaluate.names import XGB_METHODS
    from sphr.evaluate.paper import LOSSES
    from sphr.options import Option, add_set_alias, add_settings

    p = sub.add_parser(
        "evaluate",
        help="classify the test participants in every representation; the paper's tables",
        description="Evaluate raw / PCA / ICA / DiffMap / DeepPatient / SPHR with KNN, LDA, "
                    "NN for EHR and XGBoost (5 seeded 80/20 splits of the real test "
                    "participants, weighted and micro F1, binary and multi-class), and compare "
                    "the metric-learning losses. Missing baselines are fitted first (into "
                    "RUN/baselines, as `sphr baselines` does) and the loss comparison is "
                    "trained first (into RUN/train/<sex>/comparison, as `sphr train --losses` "
                    "does); SPHR is read from RUN/train/<sex>/nplb. Writes tables (parquet + "
                    "markdown, with the paper's numbers) and 2-D plots under --out only.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="DIR", default=None, help="default: RUN_DIR/evaluate")
    p.add_argument("--sexes", type=_csv, default=None, help="female,male (default: all present)")
    p.add_argument("--representations", type=_csv, default=list(REPRESENTATIONS))
    # the protocol's settings: one option per EvalConfig field, its help the field's doc
    options = add_settings(p, EvalConfig, defaults=EvalConfig(), options={
        "n_splits": Option("--splits"),
        "seed": Option(note="this option: the baselines' and the loss comparison's too"),
        "stratify": Option("--no-stratify", {"action": "store_true", "default": False},
                           read=lambda plain: not plain, note="this option: plain random splits"),
        "n_jobs": Option(unset="every core"),
        "device": Option(note="this option: the baselines' and the loss comparison's too"),
        "nn": Option("--nn-epochs", {"type": int, "metavar": None,
                                     "default": NN_EHR_CONFIG.epochs},
                     read=lambda epochs: dataclasses.replace(NN_EHR_CONFIG, epochs=epochs),
                     note="this option: its epochs"),
        "xgboost_method": Option(kwargs={"choices": XGB_METHODS})},
        stage="evaluate", also=("train",))
    p.add_argument("--refit-baselines", action="store_true",
                   help="refit every baseline into RUN/baselines (the baselines stage) first")
    p.add_argument("--no-fit-baselines", action="store_true",
                   help="fail instead of fitting baselines that RUN/baselines lacks")
    # the settings of baselines the run lacks (fitted as `sphr baselines` does)
    add_settings(p, BaselinesConfig, defaults=BaselinesConfig(), options={
        "diffmap_landmarks": Option("--landmarks"), "deep_patient_epochs": Option("--dp-epochs")},
        skip=("representations", "seed", "device", "use_augmented"))
    p.add_argument("--losses", type=_csv, default=list(LOSSES),
                   help=f"losses to compare (default: {','.join(LOSSES)})")
    p.add_argument("--no-losses", action="store_true", help="skip the loss comparison")
    p.add_argument("--no-train-losses", action="store_true",
                   help="fail instead of training the loss comparison that RUN/train/<sex>/"
                   "comparison lacks (read it as `sphr train COHORT --losses` left it)")
    p.add_argument("--loss-profile", default=DEFAULT_PROFILE, choices=PROFILES,
                   help="TrainConfig profile of the loss comparison (when it is trained)")
    # the older spelling stays, so a user's script keeps working: one item of --set train.*
    add_set_alias(p, "--loss-set", "train", "the same as --set train.KEY=VALUE (e.g. epochs=50)")
    p.add_argument("--loss-classifiers", type=_csv, default=["xgboost"],
                   help="classifiers for the loss table (paper: xgboost)")
    p.set_defaults(func=_run, setting_options=options)


def prepare(args: argparse.Namespace, sexes: list[str]) -> dict[str, dict[str, object]]:
    """Run what the evaluation reads and the run lacks, each by its own stage's functions
    (so `sphr evaluate RUN` works on a run with cohorts and SPHR only): the baselines stage
    fits the missing baselines into RUN/baselines/<sex>, the training stage brings the loss
    comparison in RUN/train/<sex>/comparison up to date."""
    from sphr.artifacts import load_cohort
    from sphr.baselines.pipeline import fit_baselines, write_baselines
    from sphr.evaluate.inputs import missing_baselines
    from sphr.layout import baselines_dir, cohort_dir
    from sphr.train.config import TrainConfig

    losses = [] if args.no_losses else args.losses
    # --set train.KEY=VALUE: the loss comparison's training, checked before any fit
    train_overrides = args.setting_options.overrides(args, "train", TrainConfig)
    params = {"diffmap": {"n_landmarks": args.landmarks},
              "deep_patient": {"epochs": args.dp_epochs}}
    done: dict[str, dict[str, object]] = {}
    for sex in sexes:
        cohort = cohort_dir(args.run_dir, sex)
        done[sex] = {}
        todo = [] if args.no_fit_baselines else missing_baselines(
            args.run_dir, sex, args.representations, every=args.refit_baselines)
        if todo:
            fitted = fit_baselines(load_cohort(cohort), todo, seed=args.seed, device=args.device,
                                   params=params)
            write_baselines(fitted, baselines_dir(args.run_dir, sex))
            done[sex]["baselines_fitted"] = todo
        if losses and not args.no_train_losses:
            from sphr.train.comparison import train_loss_comparison

            report = train_loss_comparison(cohort, None, losses, profile=args.loss_profile,
                                           seed=args.seed, device=args.device,
                                           overrides=train_overrides)
            done[sex]["losses_trained"] = report["trained"]
    return done


def _run(args: argparse.Namespace) -> int:
    import json
    import time

    from sphr.evaluate.config import EvalConfig
    from sphr.evaluate.pipeline import cohort_sexes, run_evaluate

    cfg = EvalConfig(**args.setting_options.values(args))
    sexes = cohort_sexes(args.run_dir, args.sexes)
    t0 = time.perf_counter()
    prepared = prepare(args, sexes)
    prepare_s = round(time.perf_counter() - t0, 2)
    summary = run_evaluate(
        args.run_dir, args.out, sexes=sexes, representations=args.representations,
        eval_config=cfg, losses=[] if args.no_losses else args.losses,
        loss_classifiers=args.loss_classifiers, seed=args.seed, device=args.device)
    evaluation_s = {s: r["evaluation_s"] for s, r in summary["per_sex"].items()}
    print(json.dumps({"out": summary["out_dir"], "sexes": summary["sexes"],
                      "total_s": summary["total_s"], "prepared": prepared,
                      "prepare_s": prepare_s, "evaluation_s": evaluation_s}))
    return 0
