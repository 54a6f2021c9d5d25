"""``sphr evaluate RUN_DIR --out DIR``: the paper's tables from a run directory."""

from __future__ import annotations

import argparse

from sphr.profiles import DEFAULT_PROFILE, PROFILES


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _kv(value: str) -> tuple[str, object]:
    import json

    key, sep, raw = value.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    try:
        return key.strip(), json.loads(raw)
    except json.JSONDecodeError:
        return key.strip(), raw


def register(sub: argparse._SubParsersAction) -> None:
    from sphr.baselines import REPRESENTATIONS
    from sphr.evaluate.names import CLASSIFIERS
    from sphr.evaluate.paper import LOSSES

    p = sub.add_parser(
        "evaluate",
        help="classify the test participants in every representation; the paper's tables",
        description="Evaluate raw / PCA / ICA / DiffMap / DeepPatient / SPHR with KNN, LDA, "
                    "NN for EHR and XGBoost (5 seeded 80/20 splits of the real test "
                    "participants, weighted and micro F1, binary and multi-class), and compare "
                    "the metric-learning losses. Missing baselines are fitted first; SPHR is "
                    "read from RUN/train/<sex>/nplb. Writes tables (parquet + markdown, with "
                    "the paper's numbers) and 2-D plots.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="DIR", default=None, help="default: RUN_DIR/evaluate")
    p.add_argument("--sexes", type=_csv, default=None, help="female,male (default: all present)")
    p.add_argument("--representations", type=_csv, default=list(REPRESENTATIONS))
    p.add_argument("--classifiers", type=_csv, default=list(CLASSIFIERS))
    p.add_argument("--splits", type=int, default=5, help="number of 80/20 splits (paper: 5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-stratify", action="store_true", help="plain random splits")
    p.add_argument("--n-jobs", type=int, default=None, help="parallel fits (default: all cores)")
    p.add_argument("--device", default="auto", help="torch / XGBoost device: auto, cpu, cuda")
    p.add_argument("--nn-epochs", type=int, default=100, help="NN for EHR epochs (paper: 100)")
    p.add_argument("--refit-baselines", action="store_true")
    p.add_argument("--no-fit-baselines", action="store_true",
                   help="fail instead of fitting baselines that RUN/baselines lacks")
    p.add_argument("--landmarks", type=int, default=10_000, help="DiffMap landmarks")
    p.add_argument("--dp-epochs", type=int, default=30, help="DeepPatient epochs per layer")
    p.add_argument("--losses", type=_csv, default=list(LOSSES),
                   help=f"losses to compare (default: {','.join(LOSSES)})")
    p.add_argument("--no-losses", action="store_true", help="skip the loss comparison")
    p.add_argument("--loss-profile", default=DEFAULT_PROFILE, choices=PROFILES,
                   help="TrainConfig profile of the loss comparison")
    p.add_argument("--loss-set", type=_kv, action="append", default=[], metavar="KEY=VALUE",
                   help="override a TrainConfig field for every loss (e.g. epochs=50)")
    p.add_argument("--loss-classifiers", type=_csv, default=["xgboost"],
                   help="classifiers for the loss table (paper: xgboost)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from sphr.evaluate.classifiers import NN_EHR_CONFIG
    from sphr.evaluate.pipeline import run_evaluate
    from sphr.evaluate.protocol import EvalConfig

    cfg = EvalConfig(n_splits=args.splits, seed=args.seed, stratify=not args.no_stratify,
                     classifiers=tuple(args.classifiers), n_jobs=args.n_jobs, device=args.device,
                     nn=dataclasses.replace(NN_EHR_CONFIG, epochs=args.nn_epochs))
    summary = run_evaluate(
        args.run_dir, args.out, sexes=args.sexes, representations=args.representations,
        eval_config=cfg, losses=[] if args.no_losses else args.losses,
        loss_profile=args.loss_profile, loss_overrides=dict(args.loss_set),
        loss_classifiers=args.loss_classifiers, refit_baselines=args.refit_baselines,
        fit_missing_baselines=not args.no_fit_baselines,
        baseline_params={"diffmap": {"n_landmarks": args.landmarks},
                         "deep_patient": {"epochs": args.dp_epochs}},
        seed=args.seed, device=args.device)
    print(json.dumps({"out": summary["out_dir"], "sexes": summary["sexes"],
                      "total_s": summary["total_s"],
                      "evaluation_s": {s: r["evaluation_s"] for s, r in summary["per_sex"].items()}}))
    return 0
