"""``sphr baselines COHORT_DIR --out DIR``: fit raw / PCA / ICA / DiffMap / DeepPatient."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    # every default and every default in a help text is read from the library's BaselinesConfig
    from sphr.baselines import BASELINES
    from sphr.baselines.config import BaselinesConfig
    from sphr.options import Option, add_settings

    defaults = BaselinesConfig()

    p = sub.add_parser(
        "baselines",
        help="fit the baseline representations on a cohort and write their embeddings",
        description="Fit the baseline representations (fitted on the real training rows only, "
                    "applied to train and test) and write OUT/<name>/embeddings_{train,test}"
                    ".parquet, model.joblib and representation.json. COHORT_DIR is one sex's "
                    "folder (RUN/cohorts/female) or RUN/cohorts (then OUT/<sex>/ for each).",
    )
    p.add_argument("cohort_dir", metavar="COHORT_DIR")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="output folder, e.g. RUN/baselines/female")
    # one option per BaselinesConfig field: its default, and its help the field's doc
    options = add_settings(p, BaselinesConfig, defaults=defaults, options={
        "representations": Option(note=f"a comma-separated subset of {','.join(BASELINES)}"),
        "diffmap_landmarks": Option("--landmarks"),
        "deep_patient_epochs": Option("--dp-epochs")}, stage="baselines")
    p.set_defaults(func=_run, setting_options=options)


def _run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from sphr.baselines.pipeline import run_baselines
    from sphr.errors import InputError

    params = {"diffmap": {"n_landmarks": args.landmarks},
              "deep_patient": {"epochs": args.dp_epochs}}
    src = Path(args.cohort_dir)
    if (src / "train.parquet").exists():
        pairs = [(src, Path(args.out))]
    else:
        pairs = [(src / s, Path(args.out) / s) for s in ("female", "male")
                 if (src / s / "train.parquet").exists()]
        if not pairs:
            raise InputError("no train.parquet here or in female/ or male/", file=src)
    for cohort_dir, out in pairs:
        report = run_baselines(cohort_dir, out, args.representations, seed=args.seed,
                               device=args.device, params=params,
                               use_augmented=args.use_augmented)
        times = {k: v["fit_s"] for k, v in report["representations"].items()}
        print(json.dumps({"cohort": str(cohort_dir), "out": str(out), "fit_s": times}))
        _fit_folds(cohort_dir, out, args, params)
    return 0


def _fit_folds(cohort_dir, out, args: argparse.Namespace, params: dict) -> None:
    """The cross-fit's representations (DeepPatient), as the main command's
    ``baselines/fold_representations`` fits them, where the cohort folder has folds and OUT
    is RUN/baselines/<sex> (`sphr risk` reads them from RUN/baselines/folds/<sex>/)."""
    from pathlib import Path

    from sphr.baselines.pipeline import FOLD_REPRESENTATIONS, fit_fold_baselines
    from sphr.layout import baselines_dir, fold_baselines_dir, fold_count

    cohort_dir = Path(cohort_dir)
    run, sex = cohort_dir.parent.parent, cohort_dir.name
    names = [n for n in FOLD_REPRESENTATIONS if n in args.representations]
    if not (names and fold_count(cohort_dir) and cohort_dir.parent.name == "cohorts"
            and Path(out).resolve() == baselines_dir(run, sex).resolve()):
        return
    folds = fold_baselines_dir(run, sex, 0).parent
    fit_fold_baselines(cohort_dir, folds, seed=args.seed, device=args.device, params=params,
                       names=names)
    print(f"{sex}: {', '.join(names)} of the cross-fit's {fold_count(cohort_dir)} folds; "
          f"wrote {folds}/")
