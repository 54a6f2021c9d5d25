"""The fitted methods of a sex and their entries in ``risk_model.json``.

A method is either a distance (:class:`DistanceMethod`: a space of :mod:`sphr.risk.spaces`
and one :class:`~sphr.risk.distance.DistanceModel` per mode, with the references, age
standardizer and bounds) or a score given per person (:class:`ScoreMethod`: PhenoAge's line
on age or the supervised fold models, and the calibrated
:class:`~sphr.risk.comparators.ScoreModel`).

Each saved entry states its ``kind`` (:data:`KINDS`), which says how it is read (a model
folder of an older layout is refused before: :func:`sphr.risk.model.persistence.read_spec`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr.errors import InputError
from sphr.risk.calibration import CalibratedBounds
from sphr.risk.comparators import ScoreModel, phenoage_acceleration_new
from sphr.risk.distance import DistanceModel
from sphr.risk.model.frames import NewPeople
from sphr.risk.spaces import Space, load_space
from sphr.risk.supervised import SupervisedScore

#: the kinds of method a saved entry states: a distance to the BFH reference, PhenoAge
#: acceleration (its line on age), a supervised comparator (its fold models)
DISTANCE, PHENOAGE, SUPERVISED = "distance", "phenoage", "supervised"
KINDS: tuple[str, ...] = (DISTANCE, PHENOAGE, SUPERVISED)


@dataclass
class DistanceMethod:
    """A distance method: its fitted space, whether it reads the marker space, one model a mode."""

    space: Space
    input: str
    modes: dict[str, DistanceModel]

    kind = DISTANCE

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        return {"kind": self.kind,
                "modes": {mode: m.to_dict() for mode, m in self.modes.items()},
                "input": self.input, "space": self.space.to_spec(directory, method)}

    @classmethod
    def from_spec(cls, entry: dict[str, Any], directory: Path, features: list[str],
                  device: str) -> DistanceMethod:
        space = load_space(entry["space"], directory, features, device)
        return cls(space, entry["input"],
                   {mode: DistanceModel.from_dict(m, space) for mode, m in entry["modes"].items()})

    @property
    def calibrated_bounds(self) -> CalibratedBounds | None:
        """The bounds of mode ``calibrated`` (None without that mode)."""
        model = self.modes.get("calibrated")
        return model.bounds_ if model is not None else None

    def score(self, people: NewPeople, method: str) -> pd.DataFrame:
        data = people.marker() if self.input == "marker" else people.normalized
        # the age itself, for a standardization linear in age
        data = data.assign(age_years=people.frame["age"].to_numpy(float))
        return pd.concat([people.rows(m.transform(data), method, mode)
                          for mode, m in self.modes.items()], ignore_index=True)


@dataclass
class ScoreMethod:
    """A score given per person, calibrated: PhenoAge acceleration (``line``: PhenoAge on age)
    or a supervised comparator (``supervised``: the fold models); ``about``: what the
    score is, as risk_model.json records it."""

    model: ScoreModel
    about: dict[str, Any]
    line: list[float] | None = None
    supervised: SupervisedScore | None = None

    @property
    def kind(self) -> str:
        return PHENOAGE if self.line is not None else SUPERVISED

    @property
    def calibrated_bounds(self) -> CalibratedBounds | None:
        return self.model.bounds

    def to_spec(self, directory: Path, method: str) -> dict[str, Any]:
        spec = {"kind": self.kind, "modes": {"calibrated": self.model.to_dict()}, **self.about}
        if self.line is not None:
            spec["phenoage_line"] = self.line
        if self.supervised is not None:
            spec["supervised"] = self.supervised.save(directory, method)
        return spec

    @classmethod
    def from_spec(cls, entry: dict[str, Any], directory: Path) -> ScoreMethod:
        about = {k: v for k, v in entry.items() if k not in ("kind", "modes", "phenoage_line",
                                                             "supervised")}
        sup = SupervisedScore.load(entry["supervised"], directory) if "supervised" in entry \
            else None
        return cls(ScoreModel.from_dict(entry["modes"]["calibrated"]), about,
                   entry.get("phenoage_line"), sup)

    def score(self, people: NewPeople, method: str) -> pd.DataFrame:
        if self.line is not None:
            raw = phenoage_acceleration_new(people.as_read, self.line)
        else:
            raw = self.supervised.predict_margin(
                people.normalized[people.features].to_numpy(np.float32))
        return people.rows(self.model.transform(raw, people.groups,
                                                people.frame["age"].to_numpy(float)),
                           method, "calibrated")


def load_method(name: str, entry: dict[str, Any], directory: Path, features: list[str],
                device: str) -> DistanceMethod | ScoreMethod:
    """The method ``name`` saved in ``entry`` of the sex folder ``directory``."""
    kind = entry.get("kind")
    if kind == DISTANCE:
        return DistanceMethod.from_spec(entry, directory, features, device)
    if kind in (PHENOAGE, SUPERVISED):
        return ScoreMethod.from_spec(entry, directory)
    raise InputError(f"method {name!r} of the risk model has the unknown kind {kind!r} "
                     f"(known: {', '.join(KINDS)})", file=directory, field=f"methods.{name}.kind")
