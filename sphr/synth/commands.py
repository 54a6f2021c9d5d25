"""``sphr synth``: write a synthetic cohort as a UK Biobank export."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    # every default and every default in a help text is read from the library's SynthConfig
    from sphr.synth.config import FORMATS, WORLDS, SynthConfig

    defaults = SynthConfig()
    p = sub.add_parser("synth", help="write a synthetic cohort as a UK Biobank export",
                       description="Generate a synthetic cohort in true UKB export format. The "
                       "latent ground truth goes to NAME.truth.parquet next to the export.")
    p.add_argument("--participants", type=int, default=defaults.participants,
                   help="default: %(default)s")
    p.add_argument("--seed", type=int, default=defaults.seed, help="default: %(default)s")
    p.add_argument("--format", default=defaults.format, choices=FORMATS,
                   help="default: %(default)s")
    p.add_argument("--decoys", type=int, default=defaults.decoys,
                   help="columns of fields the pipeline does not use (default: %(default)s)")
    p.add_argument("--world", default=defaults.world, choices=WORLDS,
                   help="how conditions and new diagnoses depend on the health state: linear "
                   "(the null world) or nonlinear (a positive control: ratios, U-shapes, "
                   "latent subtypes, age interactions); docs/SYNTH.md. The truth file's metadata "
                   "holds the world and its oracle ceilings (default: %(default)s)")
    p.add_argument("--no-linked-records", dest="linked", action="store_false",
                   default=defaults.linked,
                   help="leave out the hospital, cancer and death records (41270/41280, "
                   "40005/40006, 40000-40002)")
    p.add_argument("--out", type=Path, required=True, help="export file to write")
    p.set_defaults(func=_synth)


def _synth(args: argparse.Namespace) -> int:
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import write_export

    cohort = generate_cohort(args.participants, args.seed, world=args.world)
    path = write_export(cohort, args.out, args.format, decoys=args.decoys, seed=args.seed,
                        linked=args.linked)
    ceiling = cohort.truth.attrs["world"]["oracle_auroc"]["labels"]["unhealthy"]["all"]
    print(f"wrote {path} ({args.participants} participants, {args.format}, {args.world} world; "
          f"oracle AUROC unhealthy {ceiling:.3f})")
    return 0
