"""``sphr risk`` and ``sphr score`` (column definitions: :mod:`sphr.risk`)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphr.risk.config import RiskConfig, ScoreSettings


def register(sub: argparse._SubParsersAction) -> None:
    # every option of a setting is generated from the library's RiskConfig: its default, and
    # its help the field's doc (sphr.options); every default in a help text is read from there
    from sphr.options import Option, add_settings
    from sphr.risk.config import (
        ABSOLUTE_CANDIDATES,
        DISTANCE_SPACES,
        ON_DRIFT,
        RiskConfig,
        ScoreSettings,
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
        "n_bootstrap": Option("--bootstrap"),
        "sexes": Option(note="this option: comma-separated"),
        "distance_space": Option(kwargs={"choices": DISTANCE_SPACES}),
        "absolute_method": Option(kwargs={"choices": ABSOLUTE_CANDIDATES})}, stage="risk")
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
    p.add_argument("--config", type=Path, default=None, metavar="FILE",
                   help="a settings file (TOML) whose [score] table sets any option below "
                   "(the command line wins; docs/ARCHITECTURE.md)")
    # generated from ScoreSettings; unset (None) unless given, so the file's [score] table,
    # then the dataclass's defaults, fill the rest (the help shows the defaults)
    shown = {f.name: Option(unset=_shown(getattr(ScoreSettings(), f.name)))
             for f in dataclasses.fields(ScoreSettings)}
    shown["on_drift"] = dataclasses.replace(shown["on_drift"], kwargs={"choices": ON_DRIFT})
    shown["reanchor"] = dataclasses.replace(
        shown["reanchor"], note=f"at least {MIN_BFH} bona fide healthy people per sex")
    shown["reanchor_parts"] = dataclasses.replace(shown["reanchor_parts"],
                                                  note="this option: comma-separated")
    shown["outcomes"] = dataclasses.replace(shown["outcomes"], unset="the default outcome table",
                                            kwargs={"metavar": "FILE"})
    options = add_settings(p, ScoreSettings, options=shown, stage="score")
    # sphr.cli reads the [score] table of --config into args.file_settings
    p.set_defaults(func=_score, setting_options=options, settings_table="score")


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


def _shown(value: object) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def score_settings_from_args(args: argparse.Namespace) -> ScoreSettings:
    """``sphr score``'s settings: the options given, over the ``[score]`` table of
    ``--config`` (``args.file_settings``, read by :mod:`sphr.cli`), over the defaults."""
    from sphr.errors import ConfigError
    from sphr.risk.config import ScoreSettings

    in_file = getattr(args, "file_settings", {})
    try:  # the file's values alone first, so that an error names the file
        ScoreSettings(**in_file).check()
    except ConfigError as err:
        raise ConfigError(f"{args.config}: [score] {err}") from None
    return ScoreSettings(**{**in_file, **args.setting_options.values(args)}).check()


def _score(args: argparse.Namespace) -> int:
    from sphr.risk.serve.apply import run_score

    settings = score_settings_from_args(args)
    report = run_score(args.run_dir, args.export, args.out, settings)
    print(report["drift"]["line"])
    if settings.reanchor:
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
