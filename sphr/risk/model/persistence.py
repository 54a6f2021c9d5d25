"""The saved risk model: ``risk_model.json`` and one folder per sex.

A sex's folder holds the cohort's quantile normalizer (``normalizer.json``), its features,
the clinical ranges its classes were labelled with (``clinical_ranges.json``), the training
population of the drift table, the marker scaler (:data:`MARKER_SCALER`, with a marker-space
method) and the files of the methods' spaces; its entry of ``risk_model.json`` holds the
features, one entry per method (:mod:`sphr.risk.model.methods`, each stating its ``kind``)
and the absolute-risk models. Loading reads only this folder; files are checked against
their checksums.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.cohorts.ranges import P0_RANGES, ranges_for
from sphr.errors import InputError
from sphr.io import read_json, write_json
from sphr.risk import absolute
from sphr.risk.config import RiskConfig
from sphr.risk.model.methods import DistanceMethod, ScoreMethod, load_method
from sphr.risk.population import POPULATION_FILE, PopulationSummary

log = logging.getLogger(__name__)

#: the version written into risk_model.json
MODEL_VERSION = 3
MODEL_FILE = "risk_model.json"
#: the marker scaler's file in a sex's folder of the saved model
MARKER_SCALER = "marker_scaler.json"


def find_model_dir(path: str | Path) -> Path:
    """RUN_DIR, RUN/risk or RUN/risk/model: the folder holding risk_model.json."""
    path = Path(path)
    for cand in (path / "risk" / "model", path / "model", path):
        if (cand / MODEL_FILE).is_file():
            return cand
    raise InputError("no fitted risk model here (run `sphr risk` first): looked for "
                     "risk/model/risk_model.json", file=path)


def config_from(data: dict[str, Any]) -> RiskConfig:
    """The :class:`RiskConfig` saved in risk_model.json (settings it does not know dropped)."""
    names = {f.name for f in dataclasses.fields(RiskConfig)}
    return RiskConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
                         if k in names})


@dataclass
class SexParts:
    """The fitted parts of a sex its folder holds; ``population`` and ``marker_scaler`` are
    None where the folder has none (saved before the population was, no marker space)."""

    features: list[str]
    normalizer: QuantileNormalizer
    clinical_ranges: list[dict[str, Any]]
    population: PopulationSummary | None
    marker_scaler: MarkerScaler | None
    methods: dict[str, DistanceMethod | ScoreMethod]
    absolute: dict[str, dict[str, Any]]


def write_sex(directory: Path, parts: SexParts) -> dict[str, Any]:
    """Write a sex's folder; return its entry of risk_model.json."""
    directory.mkdir(parents=True, exist_ok=True)
    parts.normalizer.save(directory / "normalizer.json")
    write_json(parts.features, directory / "features.json")
    # the BFH ranges the cohort was labelled with: new people are labelled alike
    write_json(parts.clinical_ranges, directory / "clinical_ranges.json")
    parts.population.save(directory / POPULATION_FILE)
    if parts.marker_scaler is not None:
        parts.marker_scaler.save(directory / MARKER_SCALER)
    methods = {name: m.to_spec(directory, name) for name, m in parts.methods.items()}
    return {"features": parts.features, "methods": methods,
            "absolute": {outcome: {cand: m.to_dict() for cand, m in models.items()}
                         for outcome, models in parts.absolute.items()}}


def read_sex(directory: Path, spec: dict[str, Any], device: str) -> SexParts:
    """The parts of the sex folder ``directory`` as :func:`write_sex` wrote them."""
    norm = QuantileNormalizer.load(directory / "normalizer.json")
    if norm.features_ != spec["features"]:
        raise InputError("normalizer and risk model disagree on the features", file=directory)
    ranges = directory / "clinical_ranges.json"
    if ranges.is_file():
        records = read_json(ranges)
    else:  # saved before the ranges were (MODEL_VERSION < 3)
        log.warning("%s: no clinical_ranges.json; labelling BFH with the default P0 ranges",
                    directory)
        records = [dataclasses.asdict(r) for r in ranges_for(directory.name, P0_RANGES)]
    scaler = MarkerScaler.load(directory / MARKER_SCALER) \
        if (directory / MARKER_SCALER).is_file() else None
    population = PopulationSummary.load(directory / POPULATION_FILE) \
        if (directory / POPULATION_FILE).is_file() else None
    features = list(spec["features"])
    methods = {name: load_method(name, entry, directory, features, device)
               for name, entry in spec["methods"].items()}
    models = {outcome: {cand: absolute.load_model(m) for cand, m in by_cand.items()}
              for outcome, by_cand in spec.get("absolute", {}).items()}
    return SexParts(spec["features"], norm, records, population, scaler, methods, models)
