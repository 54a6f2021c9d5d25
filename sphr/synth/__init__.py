"""The synthetic UK Biobank generator: a data source beside real exports.

``sphr synth`` draws a cohort (:func:`generate_cohort`, :mod:`sphr.synth.cohort`) in one of two
frozen, versioned worlds (:mod:`sphr.synth.worlds`, docs/SYNTH.md) and writes it in any UK
Biobank export layout (:func:`write_export`, :mod:`sphr.synth.export`), which ``sphr ingest``
then reads as it reads a real one. The generator may read the field catalog
(:mod:`sphr.data.fields`) and the header styles (:mod:`sphr.data.headers`); nothing in the
pipeline imports the generator (docs/ARCHITECTURE.md).

Modules: ``config`` (the defaults, :class:`SynthConfig`), ``params`` (every published
parameter), ``copula`` and ``markers`` (the 64 predictors), ``codes`` (self-reported codes),
``worlds`` (conditions and hazards), ``linked`` (hospital, cancer and death records),
``cohort`` (the generator), ``export`` (the export writer), ``checks`` (``python -m
sphr.synth.checks``: the measured correlations and trends), ``commands`` (``sphr synth``).
"""

from __future__ import annotations

from sphr import lazy_exports

#: public names and their modules, imported on first use (PEP 562), so that ``sphr --help``
#: reads the defaults without pandas, scipy or polars
_LAZY: dict[str, tuple[str, ...]] = {
    "sphr.synth.config": ("FORMATS", "WORLDS", "SynthConfig"),
    "sphr.synth.cohort": ("SyntheticCohort", "generate_cohort"),
    "sphr.synth.export": ("default_suffix", "truth_path", "write_export"),
    "sphr.synth.worlds": ("read_world",),
}
__all__ = sorted(name for names in _LAZY.values() for name in names)
__getattr__ = lazy_exports(__name__, _LAZY)
