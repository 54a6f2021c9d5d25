"""``sphr train``: one model (``--loss``), or the loss comparison (``--losses``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sphr.profiles import DEFAULT_PROFILE, PROFILES


def register(sub: argparse._SubParsersAction) -> None:
    from sphr.options import Option, add_settings
    from sphr.train.config import COMPARISON_LOSSES, CUDA_GRAPHS, PRECISIONS, TrainConfig

    p = sub.add_parser(
        "train", help="train SPHR on one cohort folder (NPLB by default), or the loss comparison",
        description="Train the SPHR network on RUN/cohorts/<sex> and write the model, the "
        "train/test embeddings, the loss curve and a report (default RUN/train/<sex>/<loss>). "
        "With --losses: the loss comparison (Table 3 / A2), one model per loss trained "
        "together with the same data, triplets and settings; their embeddings go to "
        "RUN/train/<sex>/comparison/<loss>/ for `sphr evaluate`. Every TrainConfig field is "
        "an option (unset: the profile's value).")
    p.add_argument("cohort_dir", type=Path,
                   help="a cohort folder from sphr cohorts (RUN/cohorts/<sex>)")
    p.add_argument("--losses", type=_losses, default=None, metavar="LOSS,...|all",
                   help=f"train the loss comparison instead (all: {','.join(COMPARISON_LOSSES)})")
    p.add_argument("--profile", default=DEFAULT_PROFILE, choices=PROFILES,
                   help="demo: a few epochs at batch 512; paper: 1000 epochs at batch 256")
    # the settings: one option per TrainConfig field, its help the field's doc
    options = add_settings(p, TrainConfig, options={
        "loss": Option(unset="nplb"),
        "device": Option(kwargs={"default": TrainConfig.device}),
        "precision": Option(kwargs={"choices": PRECISIONS}),
        "cuda_graphs": Option(kwargs={"choices": CUDA_GRAPHS})}, stage="train")
    p.add_argument("--fast", action="store_true",
                   help="this machine's fastest native settings: bf16 where the hardware has "
                   "it, torch.compile where it can build kernels (see benchmarks/train.py)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint")
    p.add_argument("--no-folds", action="store_true",
                   help="leave out the cross-fit's fold models, which are otherwise trained "
                   "after the model (into RUN/train/<sex>/folds/) when the cohort folder has "
                   "folds and --out is not given: `sphr risk` reads them")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (default: RUN/train/<sex>/<loss>, or with --losses "
                   "RUN/train/<sex>/comparison, beside RUN/cohorts/<sex>)")
    p.set_defaults(func=_run, setting_options=options)


def _losses(value: str) -> list[str]:
    from sphr.train.config import COMPARISON_LOSSES

    names = [v.strip() for v in value.split(",") if v.strip()]
    return list(COMPARISON_LOSSES) if names == ["all"] else names


def default_out(cohort_dir: Path, loss: str) -> Path:
    from sphr.errors import ConfigError
    from sphr.layout import train_dir

    cohort_dir = Path(cohort_dir)
    if cohort_dir.parent.name != "cohorts":
        raise ConfigError(f"{cohort_dir} is not RUN/cohorts/<sex>: pass --out")
    return train_dir(cohort_dir.parent.parent, cohort_dir.name, loss)


def _run(args: argparse.Namespace) -> int:
    from sphr.train import TrainConfig, run_train

    if args.losses is not None:
        return _run_comparison(args)
    given = args.setting_options.values(args)  # --set train.loss=... names the loss too
    args.loss = given.get("loss") or "nplb"
    overrides = {"loss": args.loss, "device": given.get("device", args.device),
                 **_overrides(args)}
    config = TrainConfig.profile(args.profile, **overrides)
    out = args.out or default_out(args.cohort_dir, args.loss)
    report = run_train(args.cohort_dir, out, config, resume=args.resume)
    t = report["timings"]
    print(f"{report['sex']} {report['loss']}: {report['epochs']} epochs on {report['device']} "
          f"in {t['train_s']:.1f} s ({t['s_per_epoch']:.3f} s/epoch), "
          f"{report['n_triplets']} triplets, final loss {report['final_loss']:.4g}")
    print(f"wrote {out}/")
    _train_folds(args, config)
    return 0


def _train_folds(args: argparse.Namespace, config) -> None:
    """The cross-fit's SPHR models, as the main command's ``train/fold_models`` trains them,
    where the cohort folder has folds and the model went to its default place."""
    from sphr.layout import fold_count, fold_train_dir
    from sphr.train.run import train_folds

    folds = fold_count(args.cohort_dir)
    if args.no_folds or args.out is not None or args.loss != "nplb" or not folds:
        return
    run, sex = Path(args.cohort_dir).parent.parent, Path(args.cohort_dir).name
    out = fold_train_dir(run, sex, 0).parent
    reports = train_folds(args.cohort_dir, out, config)
    print(f"{sex}: {len(reports)} fold models of the cross-fit in "
          f"{sum(r['timings']['train_s'] for r in reports):.1f} s; wrote {out}/")


def _run_comparison(args: argparse.Namespace) -> int:
    from sphr.errors import ConfigError
    from sphr.train.comparison import default_out as comparison_out
    from sphr.train.comparison import train_loss_comparison

    if args.loss is not None or args.resume:
        raise ConfigError("--losses trains the comparison: leave out --loss and --resume")
    out = args.out or comparison_out(args.cohort_dir)
    report = train_loss_comparison(args.cohort_dir, out, args.losses, profile=args.profile,
                                   device=args.device, overrides=_overrides(args))
    print(f"{report['sex']} loss comparison ({report['profile']}): trained "
          f"{','.join(report['trained']) or 'none'}"
          + (f" in {report['train_s']:.1f} s" if "train_s" in report else "")
          + f"; reused {','.join(report['reused']) or 'none'}; from the training stage "
          f"{','.join(report['from_training_stage']) or 'none'}")
    print(f"wrote {out}/")
    return 0


def _overrides(args: argparse.Namespace) -> dict[str, object]:
    """TrainConfig fields set on the command line but the loss and the device (the profile's
    values for the rest): --fast's, then the options' and --set's (in that order)."""
    overrides: dict[str, object] = {}
    if args.fast:  # explicit --precision / --compile still win
        from sphr.device import fast_settings

        overrides.update(fast_settings(args.device))
    overrides.update({k: v for k, v in args.setting_options.values(args).items()
                      if k not in ("loss", "device")})
    return overrides
