"""What ``sphr synth`` writes by default: one dataclass, read by the generator, the export
writer, the CLI and the Dagster data source.

The defaults live here and nowhere else (:func:`sphr.synth.cohort.generate_cohort`,
:func:`sphr.synth.export.write_export`, ``sphr synth`` and
``sphr_dagster.resources.DataSource`` take theirs from this class). Only light imports, so
``sphr --help`` builds its parser without pandas, scipy or polars.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the generator's worlds (:mod:`sphr.synth.worlds`, docs/SYNTH.md): ``linear`` is the null
#: world, ``nonlinear`` a positive control
WORLDS: tuple[str, ...] = ("linear", "nonlinear")
#: export layouts :func:`sphr.synth.export.write_export` writes
FORMATS: tuple[str, ...] = ("ukbconv", "tsv", "tab", "rap", "rap-labels", "parquet")


@dataclass(frozen=True)
class SynthConfig:
    #: participants in the synthetic cohort
    participants: int = 20_000
    #: seed of the cohort and of its export (same seed, same files)
    seed: int = 0
    #: how conditions and new diagnoses depend on the health state, one of :data:`WORLDS`:
    #: linear (the null world) or nonlinear (a positive control: ratios, U-shapes, latent
    #: subtypes, age interactions); docs/SYNTH.md. The truth file's metadata holds the world
    #: and its oracle ceilings
    world: str = "linear"
    #: export layout, one of :data:`FORMATS`
    format: str = "ukbconv"
    #: columns of fields the pipeline does not use, as a real main dataset has
    decoys: int = 40
    #: with the hospital, cancer and death records (41270/41280, 40005/40006, 40000-40002)
    linked: bool = True
