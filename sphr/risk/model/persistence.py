"""The saved risk model: ``risk_model.json`` and one folder per sex.

A sex's folder holds the cohort's quantile normalizer (``normalizer.json``), its features,
the clinical ranges its classes were labelled with (``clinical_ranges.json``), the training
population of the drift table, the marker scaler (:data:`MARKER_SCALER`, with a marker-space
method) and the files of the methods' spaces; its entry of ``risk_model.json`` holds the
features, one entry per method (:mod:`sphr.risk.model.methods`, each stating its ``kind``)
and the absolute-risk models. Loading reads only this folder; files are checked against
their checksums.

``risk_model.json`` states the layout it was written in (``version``, :data:`MODEL_VERSION`)
and the sphr that wrote it (``sphr_version``). A folder of another layout is refused with one
message saying so (:func:`check_written_by`): this sphr reads its own layout only, so no
reader of an older one is kept beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sphr import __version__
from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.errors import InputError, check_keys
from sphr.io import read_json, write_json
from sphr.risk import absolute
from sphr.risk.config import RiskConfig
from sphr.risk.model.methods import DistanceMethod, ScoreMethod, load_method
from sphr.risk.population import POPULATION_FILE, PopulationSummary

#: the layout of a model folder, written into risk_model.json as ``version``: raised with
#: every change of what the folder holds (4: method entries state their kind, bounds their
#: tail, every sex its clinical ranges and population; [risk] validate_on gone)
MODEL_VERSION = 4
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


def check_written_by(record: dict[str, Any], key: str, current: int, file: Path,
                     redo: str) -> None:
    """One :class:`InputError` when the folder whose ``record`` (its risk_model.json, its
    risk_report.json) states layout ``record[key]`` was written in another layout than
    ``current``: which sphr wrote it and what to do (``redo``: the command that writes it
    again with this version). The one version check of every folder sphr reads back."""
    found = record.get(key)
    if found == current:
        return
    wrote = (f"sphr {record['sphr_version']}, " if record.get("sphr_version") else "") + \
        (f"layout {found}" if found is not None else "no layout stated")
    age = "a newer" if isinstance(found, int) and found > current else "an older"
    raise InputError(f"written by {age} sphr ({wrote}; this sphr {__version__} reads layout "
                     f"{current} only): {redo} with this version, or use the sphr version "
                     "that wrote it", file=file)


def read_spec(directory: Path) -> dict[str, Any]:
    """``directory``'s risk_model.json, once its layout is this sphr's (else one error)."""
    spec = read_json(directory / MODEL_FILE)
    check_written_by(spec, "version", MODEL_VERSION, directory / MODEL_FILE,
                     "re-fit the model (sphr risk RUN_DIR)")
    return spec


def config_from(data: dict[str, Any], file: Path) -> RiskConfig:
    """The :class:`RiskConfig` saved in risk_model.json; a key that is no setting is an error
    naming it (the file is this sphr's layout, so it is a damaged file, never dropped)."""
    check_keys(data, (f.name for f in dataclasses.fields(RiskConfig)), f"{file}: config")
    return RiskConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


@dataclass
class SexParts:
    """The fitted parts of a sex its folder holds; ``marker_scaler`` is None without a
    marker-space method."""

    features: list[str]
    normalizer: QuantileNormalizer
    clinical_ranges: list[dict[str, Any]]
    population: PopulationSummary
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
    records = read_json(directory / "clinical_ranges.json")
    scaler = MarkerScaler.load(directory / MARKER_SCALER) \
        if (directory / MARKER_SCALER).is_file() else None
    population = PopulationSummary.load(directory / POPULATION_FILE)
    features = list(spec["features"])
    methods = {name: load_method(name, entry, directory, features, device)
               for name, entry in spec["methods"].items()}
    models = {outcome: {cand: absolute.load_model(m) for cand, m in by_cand.items()}
              for outcome, by_cand in spec["absolute"].items()}
    return SexParts(spec["features"], norm, records, population, scaler, methods, models)
