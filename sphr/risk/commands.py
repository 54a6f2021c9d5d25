"""``sphr risk`` and ``sphr score`` (column definitions: :mod:`sphr.risk`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphr.risk.config import RiskConfig


def register(sub: argparse._SubParsersAction) -> None:
    # every option of a setting is generated from the library's RiskConfig: its default, and
    # its help the field's doc (sphr.options); every default in a help text is read from there
    from sphr.options import Option, add_settings, csv_list
    from sphr.risk.config import (
        ABSOLUTE_CANDIDATES,
        DISTANCE_SPACES,
        ON_DRIFT,
        REANCHOR_ALL_PARTS,
        REANCHOR_PARTS,
        RiskConfig,
    )
    from sphr.risk.config import ALL_METHODS as METHODS
    from sphr.risk.config import REANCHOR_MIN_BFH as MIN_BFH
    from sphr.risk.intervals import MODES

    defaults = RiskConfig()

    p = sub.add_parser(
        "risk", help="Normal / Lower Risk / Higher Risk groups, validation, HTML report",
        description="Fit the single-visit risk references (BFH of the training partition, per "
        "sex and age group) for each method, calibrate the bounds on the calibration partition, "
        "group every real participant, validate the held-out (test) participants against the "
        "repeat visit and write OUT/risk_groups.{parquet,csv}, thresholds, discrimination and "
        "validation tables, model/ (for sphr score) and report.html.")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    p.add_argument("--out", type=Path, default=None, help="output folder (default RUN_DIR/risk)")
    options = add_settings(p, RiskConfig, defaults=defaults, options={
        "methods": Option(note=f"this option: comma-separated, of {','.join(METHODS)}"),
        "modes": Option(note=f"this option: comma-separated, of {','.join(MODES)}"),
        "validate_on": Option(kwargs={"choices": ("test",)}),
        "n_bootstrap": Option("--bootstrap"),
        "sexes": Option(note="this option: comma-separated"),
        "distance_space": Option(kwargs={"choices": DISTANCE_SPACES}),
        "absolute_method": Option(kwargs={"choices": ABSOLUTE_CANDIDATES})})
    p.add_argument("--png", action="store_true",
                   help="also render report.html to report.png with headless Chromium")
    p.set_defaults(func=_risk, setting_options=options)

    p = sub.add_parser(
        "score", help="risk groups for a new UKB export with a fitted risk model",
        description="Ingest NEW_EXPORT, apply the saved normalizer, representations and "
        "thresholds of RUN_DIR/risk/model (nothing is refitted) and write OUT/risk_groups."
        "{parquet,csv}, OUT/absolute_risk.parquet (5- and 10-year risk with an interval and "
        "the risk-equivalent age per linked outcome), drift.csv, report.html and "
        "score_report.json. Refuses an export whose fields or units do not match the fitted "
        "model. --reanchor refits the parts that describe a population on the export's own "
        "healthy people (docs/METHODS.md, 'Re-anchoring') and saves that model as OUT/model.")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                   help="run directory (or its risk/ or risk/model/ folder)")
    p.add_argument("export", type=Path, metavar="NEW_EXPORT")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--allow-out-of-range", action="store_true",
                   help="score even when most values of a field lie outside the fitted range")
    p.add_argument("--device", default=defaults.device, help="default: %(default)s")
    p.add_argument("--on-drift", choices=ON_DRIFT, default=ON_DRIFT[0],
                   help="when a feature drifted from the training population (drift.csv): warn "
                   "and score, or refuse (exit non-zero, nothing written); default %(default)s")
    p.add_argument("--reanchor", action="store_true",
                   help="refit the parts of --reanchor-parts on the export's own people (never "
                   f"their outcomes; at least {MIN_BFH} bona fide healthy per sex) and save the "
                   "re-anchored model as OUT/model")
    p.add_argument("--reanchor-parts", type=csv_list, default=list(REANCHOR_PARTS),
                   help=f"comma-separated subset of {','.join(REANCHOR_ALL_PARTS)} (default: "
                   f"{','.join(REANCHOR_PARTS)}, the pre-registered rule's choice; "
                   "docs/notes/TRANSPORT.md)")
    p.add_argument("--seed", type=int, default=defaults.seed,
                   help="seed of the re-anchoring's anchor / calibration split (default "
                   "%(default)s)")
    p.set_defaults(func=_score)


def config_from_args(args: argparse.Namespace) -> RiskConfig:
    """The library's RiskConfig the parsed ``sphr risk`` options ask for."""
    from sphr.risk.config import RiskConfig

    return RiskConfig(**args.setting_options.values(args))


def _risk(args: argparse.Namespace) -> int:
    from sphr.risk.pipeline import run_risk

    summary = run_risk(args.run_dir, args.out, config_from_args(args))
    out = Path(summary["out"])
    print(f"{summary['rows']} rows ({', '.join(summary['sexes'])}; methods "
          f"{', '.join(summary['methods'])}; modes {', '.join(summary['modes'])})")
    for what, why in summary["skipped"].items():
        print(f"skipped {what}: {why}")
    for what, v in summary.get("unscored", {}).items():
        if what not in summary["skipped"]:
            print(f"not scored {what}: {v['n']} of {v['of']} ({v['reason']})")
    if args.png:
        from sphr.risk.report import render_png

        print(f"rendered {render_png(out / 'report.html', out / 'report.png')}")
    print(f"wrote {out}/risk_groups.parquet, discrimination.parquet, validation.md, report.html, "
          "report.pdf")
    return 0


def _score(args: argparse.Namespace) -> int:
    from sphr.risk.apply import run_score

    report = run_score(args.run_dir, args.export, args.out,
                       allow_out_of_range=args.allow_out_of_range, device=args.device,
                       on_drift=args.on_drift, reanchor=args.reanchor,
                       reanchor_parts=tuple(args.reanchor_parts), seed=args.seed)
    print(report["drift"]["line"])
    if args.reanchor:
        done = report["reanchored"]
        print(f"re-anchored {', '.join(done['reanchored'])} on " + "; ".join(
            f"{sex}: {c['bfh_anchor']} + {c['bfh_calibration']} BFH of {c['people']} people"
            for sex, c in done["people"].items()) + f"; model saved to {args.out}/model")
    for sex, r in report["sexes"].items():
        print(f"{sex}: scored {r['scored']} of {r['participants']} "
              f"({r['left_out_missing_values']} left out for missing values)")
        for method, n in r.get("not_scored", {}).items():
            print(f"  {method}: {n} of them not scored (inputs missing)")
    print(f"wrote {args.out}/risk_groups.parquet ({report['rows']} rows)")
    return 0
