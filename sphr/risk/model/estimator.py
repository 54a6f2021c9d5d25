"""The fitted risk model: :class:`SexModel` (one sex) and :class:`RiskModel` (every sex), each
``fit`` / ``save`` / ``load`` / ``score_cohort`` (module docstring of :mod:`sphr.risk.model`). The
work is done by :mod:`~sphr.risk.model.fitting`, :mod:`~sphr.risk.model.persistence` and
:mod:`~sphr.risk.model.scoring`; these classes hold what was fitted."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sphr import __version__
from sphr.cohorts.age import DEFAULT_AGE_GROUPS
from sphr.cohorts.normalize import MarkerScaler, QuantileNormalizer
from sphr.errors import InputError
from sphr.io import write_json
from sphr.labels import SEX_CODE
from sphr.risk.config import RiskConfig
from sphr.risk.model.fitting import SexFit
from sphr.risk.model.frames import CohortInputs, Scores, predict_none
from sphr.risk.model.methods import DistanceMethod, ScoreMethod
from sphr.risk.model.persistence import (
    MODEL_FILE,
    MODEL_VERSION,
    SexParts,
    config_from,
    find_model_dir,
    read_sex,
    read_spec,
    write_sex,
)
from sphr.risk.model.scoring import MAX_IMPUTED_SHARE, score_sex
from sphr.risk.population import PopulationSummary, observed_values


class SexModel:
    """The fitted risk model of one sex (module docstring). Fitted attributes:
    ``features_``, ``normalizer_``, ``clinical_ranges_`` (records), ``population_`` (the
    training population, :mod:`sphr.risk.population`), ``marker_scaler_``
    (None without a marker-space method), ``methods_`` (name -> :class:`DistanceMethod` or
    :class:`ScoreMethod`), ``skipped_`` and ``unscored_``; after ``fit`` also ``rows_``."""

    def __init__(self, sex: str) -> None:
        self.sex = sex

    def _reset(self, features: list[str], normalizer: QuantileNormalizer,
               clinical_ranges: list[dict[str, Any]]) -> None:
        self.features_, self.normalizer_ = list(features), normalizer
        self.clinical_ranges_ = list(clinical_ranges)
        self.population_ = PopulationSummary.from_normalizer(normalizer)
        self.marker_scaler_: MarkerScaler | None = None
        self.methods_: dict[str, DistanceMethod | ScoreMethod] = {}
        self.skipped_: dict[str, str] = {}
        self.unscored_: dict[str, dict[str, Any]] = {}
        self.absolute_: dict[str, dict[str, Any]] = {}
        self.absolute_rows_ = predict_none()
        self._saved: tuple[Path, dict[str, Any]] | None = None

    def fitted_copy(self) -> SexModel:
        """A model with every fitted part of this one (each container its own), not saved and
        without the fit's rows: what re-anchoring replaces parts of. Listed beside
        :meth:`_reset`, so a part added to the model is carried over too."""
        out = SexModel(self.sex)
        out._reset(self.features_, self.normalizer_, self.clinical_ranges_)
        out.population_, out.marker_scaler_ = self.population_, self.marker_scaler_
        out.methods_ = dict(self.methods_)
        out.skipped_, out.unscored_ = dict(self.skipped_), dict(self.unscored_)
        out.absolute_ = self.absolute_
        return out

    def fit(self, inputs: CohortInputs, config: RiskConfig,
            age_groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS) -> SexModel:
        """Fit every method and mode of ``config`` (module docstring)."""
        if inputs.sex != self.sex:
            raise InputError(f"inputs of {inputs.sex} given to the {self.sex} model")
        self._reset(inputs.features, inputs.normalizer, inputs.clinical_ranges)
        if inputs.raw is not None:  # the training population the drift table compares with
            train = inputs.raw["train"]
            real = ~train["augmented"].to_numpy(bool) if "augmented" in train else \
                np.ones(len(train), bool)
            self.population_ = PopulationSummary().fit(observed_values(
                train.loc[real], inputs.features, inputs.imputed), inputs.features)
        fitted = SexFit(self.sex, inputs, config, tuple(tuple(g) for g in age_groups)).run()
        self.methods_, self.marker_scaler_ = fitted.methods, fitted.marker_scaler
        self.skipped_, self.unscored_ = fitted.skipped, fitted.unscored
        self.absolute_, self.absolute_rows_ = fitted.absolute, fitted.absolute_rows
        self.rows_ = fitted.rows
        return self

    def save(self, directory: Path) -> dict[str, Any]:
        """Write the sex's folder; return its entry of risk_model.json. A model read from a
        folder is saved as that folder, byte for byte (nothing in it was refitted)."""
        directory = Path(directory)
        if self._saved is not None:
            source, spec = self._saved
            if source.resolve() != directory.resolve():
                shutil.copytree(source, directory, dirs_exist_ok=True)
            return spec
        spec = write_sex(directory, SexParts(
            self.features_, self.normalizer_, self.clinical_ranges_, self.population_,
            self.marker_scaler_, self.methods_, self.absolute_))
        self._saved = directory, spec
        return spec

    @classmethod
    def load(cls, directory: Path, spec: dict[str, Any], device: str = "auto") -> SexModel:
        """The sex's folder as :meth:`save` wrote it; files are checked against their checksums."""
        directory = Path(directory)
        parts = read_sex(directory, spec, device)
        model = cls(directory.name)
        model._reset(parts.features, parts.normalizer, parts.clinical_ranges)
        model.marker_scaler_, model.population_ = parts.marker_scaler, parts.population
        model.methods_, model.absolute_ = parts.methods, parts.absolute
        model._saved = directory, spec
        return model

    def score_cohort(self, baseline: pd.DataFrame, *, age_groups: tuple[tuple[int, int], ...],
              source: Path | None = None, allow_out_of_range: bool = False, impute: bool = True,
              max_imputed_share: float = MAX_IMPUTED_SHARE) -> Scores:
        """Rows (``COLUMNS``), participants (eid, sex, imputed_features, imputed), unscorable
        (eid, sex, reason) and the report of this sex's people in ``baseline``."""
        return score_sex(self, baseline, age_groups=age_groups,
                         directory=self._saved[0] if self._saved else None, source=source,
                         allow_out_of_range=allow_out_of_range, impute=impute,
                         max_imputed_share=max_imputed_share)


class RiskModel:
    """The fitted risk model of every sex (module docstring).

    Parameters: ``config`` (:class:`~sphr.risk.config.RiskConfig`: methods, modes, pooling,
    seeds, the device SPHR embeds on) and ``age_groups`` (the cohort's). Fitted attributes:
    ``sexes_`` (sex -> :class:`SexModel`), ``skipped_`` and ``unscored_`` ("sex/method" ->
    why), ``version_``, ``sphr_`` (the shipped SPHR score and its refit spread),
    ``provenance_`` (None, or for a model :meth:`reanchored` made, what was refitted on whom:
    :func:`sphr.risk.serve.reanchor.reanchor`); after ``fit`` also ``rows_`` (the ``risk_groups``
    rows of every fitted participant), after ``load`` ``path_`` (the folder it was read from).
    """

    def __init__(self, config: RiskConfig | None = None,
                 age_groups: tuple[tuple[int, int], ...] = DEFAULT_AGE_GROUPS) -> None:
        self.config = config
        self.age_groups = age_groups

    @property
    def age_group_bounds(self) -> tuple[tuple[int, int], ...]:
        """``age_groups`` as (low, high) pairs of ints, as the sex models take them."""
        return tuple(tuple(int(v) for v in g) for g in self.age_groups)

    def _init_fitted(self, version: int) -> None:
        self.sexes_: dict[str, SexModel] = {}
        self.skipped_: dict[str, str] = {}
        self.unscored_: dict[str, dict[str, Any]] = {}
        self.version_, self.path_ = version, None
        #: the shipped SPHR score and its measured refit spread (sphr.risk.refits.sphr_record)
        self.sphr_: dict[str, Any] = {}
        #: how a re-anchored model was made (:meth:`reanchored`); None for a fitted one
        self.provenance_: dict[str, Any] | None = None

    def fit(self, inputs: Sequence[CohortInputs]) -> RiskModel:
        """Fit each sex of ``inputs`` (one :class:`CohortInputs` per sex)."""
        config = self.config or RiskConfig()
        config.check()
        self._init_fitted(MODEL_VERSION)
        if not inputs:
            raise InputError("no cohort to fit the risk model on")
        rows = []
        for inp in inputs:
            sex = SexModel(inp.sex).fit(inp, config, self.age_group_bounds)
            self.sexes_[inp.sex] = sex
            self.skipped_.update({f"{inp.sex}/{m}": why for m, why in sex.skipped_.items()})
            self.unscored_.update({f"{inp.sex}/{m}": v for m, v in sex.unscored_.items()})
            rows.append(sex.rows_)
        self.rows_ = pd.concat(rows, ignore_index=True) if len(rows) > 1 else rows[0]
        self.absolute_rows_ = pd.concat([s.absolute_rows_ for s in self.sexes_.values()],
                                        ignore_index=True)
        return self

    def save(self, directory: str | Path) -> Path:
        """``directory/risk_model.json`` and one folder per sex (module docstring)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        sexes = {sex: m.save(directory / sex) for sex, m in self.sexes_.items()}
        groups = [list(g) for g in self.age_group_bounds]
        spec = {"version": self.version_, "sphr_version": __version__, "age_groups": groups,
                "config": dataclasses.asdict(self.config or RiskConfig()), "sexes": sexes,
                "skipped": self.skipped_, "unscored": self.unscored_,
                "shipped_sphr": self.sphr_.get("shipped_sphr"),
                "sphr_refits": {k: v for k, v in self.sphr_.items() if k != "shipped_sphr"}}
        return write_json(spec, directory / MODEL_FILE)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> RiskModel:
        """The model saved in ``path`` (RUN, RUN/risk or the model folder); SPHR embeds on
        ``device`` (None: the device it was fitted with)."""
        directory = find_model_dir(path)
        spec = read_spec(directory)
        config = config_from(spec["config"], directory / MODEL_FILE)
        model = cls(config, tuple(tuple(g) for g in spec["age_groups"]))
        model._init_fitted(spec["version"])
        for sex, sex_spec in spec["sexes"].items():
            model.sexes_[sex] = SexModel.load(directory / sex, sex_spec, device or config.device)
        model.skipped_ = dict(spec["skipped"])
        model.unscored_ = dict(spec["unscored"])
        model.sphr_ = {"shipped_sphr": spec["shipped_sphr"], **spec["sphr_refits"]}
        model.path_ = directory
        return model

    @classmethod
    def combine(cls, models: Sequence[RiskModel]) -> RiskModel:
        """One model of the sexes of ``models`` (each fitted or loaded alone; nothing refitted):
        the settings and age groups of the first."""
        if not models:
            raise InputError("no risk models to combine")
        out = cls(models[0].config, models[0].age_groups)
        out._init_fitted(models[0].version_)
        for m in models:
            out.sexes_.update(m.sexes_)
            out.skipped_.update(m.skipped_)
            out.unscored_.update(m.unscored_)
        out.sphr_ = dict(models[0].sphr_)
        return out

    def reanchored(self, sexes: Mapping[str, SexModel], provenance: Mapping[str, Any]
                   ) -> RiskModel:
        """A new model with ``sexes`` in place of this one's sex models and everything else as
        fitted (settings, age groups, version, skipped and unscored methods, the SPHR record:
        re-anchoring refits no network); ``provenance`` becomes its ``provenance_``. This
        model is left as it is (:func:`sphr.risk.serve.reanchor.reanchor` builds the sex models)."""
        unknown = sorted(set(sexes) - set(self.sexes_))
        if unknown:
            raise InputError(f"re-anchored sex models {unknown} that the model does not have")
        out = RiskModel(self.config, self.age_groups)
        out._init_fitted(self.version_)
        out.sexes_ = {**self.sexes_, **sexes}
        out.skipped_, out.unscored_ = dict(self.skipped_), dict(self.unscored_)
        out.sphr_ = dict(self.sphr_)
        out.provenance_ = dict(provenance)
        return out

    def score_cohort(self, baseline: pd.DataFrame, *, source: str | Path | None = None,
                     allow_out_of_range: bool = False, impute: bool = True,
                     max_imputed_share: float = MAX_IMPUTED_SHARE) -> Scores:
        """The :class:`Scores` of every sex of the model on ``baseline``
        (``ingest/baseline.parquet``'s columns, UKB units): the rows of every method and mode,
        the participants, the unscorable, the report and the absolute risks. ``source``: the
        export, named in errors and the report."""
        source = Path(source) if source is not None else None
        frames, people, lost, risks = [], [], [], []
        report: dict[str, Any] = {"export": str(source), "model": str(self.path_), "sexes": {}}
        for sex, model in self.sexes_.items():
            res = model.score_cohort(baseline, age_groups=self.age_group_bounds,
                                     source=source, allow_out_of_range=allow_out_of_range,
                                     impute=impute, max_imputed_share=max_imputed_share)
            frames.append(res.rows)
            people.append(res.participants)
            lost.append(res.unscorable)
            risks.append(res.absolute)
            report["sexes"][sex] = res.report
        fitted = [SEX_CODE[s] for s in self.sexes_]
        other = baseline.loc[~baseline["sex"].isin(fitted)]
        reason = np.where(other["sex"].isna(), "sex missing", "sex not in the fitted model")
        lost.append(pd.DataFrame({"eid": other["eid"].to_numpy(np.int64),
                                  "sex": other["sex"].astype(str).to_numpy(), "reason": reason}))
        report["left_out_sex_not_fitted"] = len(other)
        rows = pd.concat(frames, ignore_index=True)
        report["rows"] = len(rows)
        unscorable = pd.concat([f for f in lost if len(f)] or [lost[-1]], ignore_index=True)
        risks = [r for r in risks if len(r)] or [predict_none()]
        return Scores(rows, pd.concat(people, ignore_index=True), unscorable, report,
                      pd.concat(risks, ignore_index=True))
