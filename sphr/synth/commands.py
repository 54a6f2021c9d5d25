"""``sphr synth``: write a synthetic cohort as a UK Biobank export."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sphr.synth.config import SynthConfig


def register(sub: argparse._SubParsersAction) -> None:
    # every option of a setting is generated from the library's SynthConfig: its default, and
    # its help the field's doc (sphr.options)
    from sphr.options import Option, add_settings
    from sphr.synth.config import FORMATS, WORLDS, SynthConfig

    defaults = SynthConfig()
    p = sub.add_parser("synth", help="write a synthetic cohort as a UK Biobank export",
                       description="Generate a synthetic cohort in true UKB export format. The "
                       "latent ground truth goes to NAME.truth.parquet next to the export.")
    options = add_settings(p, SynthConfig, defaults=defaults, options={
        "format": Option(kwargs={"choices": FORMATS}),
        "world": Option(kwargs={"choices": WORLDS}),
        "linked": Option("--no-linked-records", {"dest": "linked", "action": "store_false"},
                         note="this option: leave them out")}, stage="synth")
    p.add_argument("--out", type=Path, required=True, help="export file to write")
    p.set_defaults(func=_synth, setting_options=options)


def config_from_args(args: argparse.Namespace) -> SynthConfig:
    """The library's SynthConfig the parsed options ask for."""
    from sphr.synth.config import SynthConfig

    return SynthConfig(**args.setting_options.values(args))


def _synth(args: argparse.Namespace) -> int:
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import write_export

    cfg = config_from_args(args)
    cohort = generate_cohort(cfg.participants, cfg.seed, world=cfg.world)
    path = write_export(cohort, args.out, cfg.format, decoys=cfg.decoys, seed=cfg.seed,
                        linked=cfg.linked)
    ceiling = cohort.truth.attrs["world"]["oracle_auroc"]["labels"]["unhealthy"]["all"]
    print(f"wrote {path} ({cfg.participants} participants, {cfg.format}, {cfg.world} world; "
          f"oracle AUROC unhealthy {ceiling:.3f})")
    return 0
