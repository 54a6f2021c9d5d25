"""``sphr retrieval``: compare image-retrieval losses on a manifest or an embedded dataset."""

from __future__ import annotations

import argparse
from typing import Any

from sphr.options import parse_value
from sphr.retrieval.catalog import loss_help
from sphr.retrieval.profiles import PROFILES, ComparisonConfig

_EPILOG = f"""\
DATASET is `digits` (scikit-learn's bundled handwritten digits, class-level
retrieval), `forensic` (the project's synthetic knee radiographs: subjects at
baseline and years 1, 2, 4, 8; subject-level matching) or a manifest CSV /
parquet with columns path, subject, years (optional, 0 = baseline), label
(optional), split (optional: train / test).

losses (--losses NAME or NAME:key=value,key=value, e.g. triplet_dams:threshold=0.9):
{loss_help()}

default losses: {' '.join(ComparisonConfig.losses)}

Writes OUT/comparison.md (loss x metric, mean ± standard error over seeds),
comparison.parquet, per_seed.parquet, per_year.parquet, margin_curves.parquet,
runs.parquet, config.json, margin_curves.png and strips/<loss>.png.
CMC is the standard first-match CMC. comparison.md also gives, per loss,
last- and best-epoch mAP (best on held-out training subjects), the margin
curve, final margins and a collapse flag; mAP_H<S> are trained S-bit heads,
mAP_H<S>_proj projected codes. See docs/notes/RETRIEVAL.md.
"""


def _kv(text: str) -> tuple[str, Any]:
    key, eq, value = text.partition("=")
    if not eq:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), parse_value(value)


def _by_profile(setting: str) -> str:
    """The profiles' values of ``setting``, those that share one together:
    ``quick / demo 128, ...``."""
    names: dict[Any, list[str]] = {}
    for name, profile in PROFILES.items():
        names.setdefault(getattr(profile, setting), []).append(name)
    return ", ".join(f"{' / '.join(n)} {value!r}" for value, n in names.items())


def register(sub: argparse._SubParsersAction) -> None:
    # every option of a setting is generated from the library's ComparisonConfig (sphr.options);
    # every other default and default in a help text is read from the library's Profile
    from sphr.options import Option, add_settings

    defaults = ComparisonConfig()
    p = sub.add_parser(
        "retrieval", help="compare image-retrieval losses (AdaTriplet, DAMS, OCAM, NPLB, ...)",
        description="Train an embedding network with each loss and seed, evaluate retrieval "
                    "(mAP, mAP@R, CMC, Recall@k, AUC, P@Z, Hamming) and write the comparison.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", metavar="DATASET",
                   help="digits, forensic, or a manifest .csv / .parquet")
    # the comparison's settings: one option per ComparisonConfig field, its help the field's doc
    options = add_settings(p, ComparisonConfig, defaults=defaults, options={
        "losses": Option(kwargs={"nargs": "+", "type": str, "metavar": "LOSS"},
                         note="this option: space-separated"),
        "seeds": Option(kwargs={"nargs": "+", "type": int, "metavar": None}, read=tuple,
                        note="this option: space-separated")}, stage="retrieval")
    p.add_argument("--out", default=None,
                   help="output folder (default runs/demo/retrieval/<dataset>)")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: all allowed cores)")
    p.add_argument("--epochs", type=int, help="override the profile's epochs")
    p.add_argument("--batch-size", type=int, help="images per batch (m per class x classes)")
    p.add_argument("--m-per-class", type=int, help="images per subject / class in a batch")
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--dim", type=int,
                   help=f"embedding size D (profile default: {_by_profile('dim')})")
    p.add_argument("--backbone", choices=["small_cnn", "resnet18"])
    p.add_argument("--weights",
                   help="local ResNet-18 state-dict file (torchvision layout); no download")
    p.add_argument("--image-size", type=int, help="model input size for this dataset")
    p.add_argument("--no-augment", action="store_true", help="train without augmentation")
    p.add_argument("--val-fraction", type=float,
                   help="share of training subjects held out for best-epoch selection "
                        f"(0: none; profile default: {_by_profile('val_fraction')})")
    p.add_argument("--code-heads", metavar="LOSSES",
                   help="losses whose S-bit code heads are trained: comma-separated names, "
                        f"'all' or '' (profile default: {_by_profile('code_heads')})")
    p.add_argument("--paper-schedules", action="store_true",
                   help="keep the papers' per-epoch Linear / DAMS steps (no scaling to the epochs) "
                        "and no AutoMargin warm-up")
    p.add_argument("--data-option", action="append", type=_kv, default=[], metavar="KEY=VALUE",
                   help="dataset loader option, e.g. n_subjects=500, channels=3, load_size=280, "
                        "split_seed=1")
    p.add_argument("--no-strips", action="store_true", help="skip the query / result strip PNGs")
    p.add_argument("--write-manifest", metavar="DIR",
                   help="write DATASET as PNG files + DIR/manifest.csv and stop (no training)")
    p.set_defaults(func=_run, setting_options=options)


def config_from_args(args: argparse.Namespace) -> ComparisonConfig:
    """The library's ComparisonConfig the parsed options ask for."""
    return ComparisonConfig(**args.setting_options.values(args))


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from sphr.device import configure_threads
    from sphr.retrieval.compare import run_comparison
    from sphr.retrieval.data import load_retrieval_data
    from sphr.retrieval.profiles import get_profile

    configure_threads(args.threads)
    cfg = config_from_args(args)
    data_options = dict(args.data_option)
    if args.write_manifest:
        from sphr.retrieval.data import write_manifest

        prof = get_profile(cfg.profile)
        kind = args.dataset if args.dataset in prof.data else "manifest"
        data = load_retrieval_data(args.dataset, **{**prof.data.get(kind, {}), **data_options})
        path = write_manifest(data, args.write_manifest)
        print(f"wrote {len(data.train) + len(data.test)} images and {path}")
        return 0
    overrides: dict[str, Any] = {}
    for flag, key in [("epochs", "epochs"), ("batch_size", "batch_size"),
                      ("m_per_class", "m_per_class"), ("lr", "lr"),
                      ("weight_decay", "weight_decay"), ("dim", "dim"), ("backbone", "backbone"),
                      ("weights", "weights")]:
        if getattr(args, flag) is not None:
            overrides[key] = getattr(args, flag)
    if args.no_augment:
        overrides["augment"] = False
    if args.val_fraction is not None:
        overrides["val_fraction"] = args.val_fraction
    if args.code_heads is not None:
        overrides["code_heads"] = args.code_heads
    if args.paper_schedules:
        overrides["scale_schedules"] = False
        overrides["loss_options"] = {}
    if args.image_size is not None:
        base = get_profile(cfg.profile).image_size
        kind = args.dataset if args.dataset in base else "manifest"
        overrides["image_size"] = {**base, kind: args.image_size}
    name = Path(args.dataset).stem if args.dataset not in ("digits", "forensic") else args.dataset
    out = args.out or f"runs/demo/retrieval/{name}"
    result = run_comparison(args.dataset, cfg.losses, cfg.seeds, out_dir=out, device=cfg.device,
                            profile=cfg.profile, data_options=data_options,
                            profile_overrides=overrides, strips=not args.no_strips)
    print(result.markdown)
    print(f"wrote {len(result.files)} files to {out}")
    return 0
