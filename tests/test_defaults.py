"""One source for every default: the CLI options and the Dagster configs take theirs from the
library's config dataclasses (and the library's own functions from the same ones).

Each table below maps an option or a config field to the library setting it stands for; a
test fails when a CLI default, a Dagster config default or a library signature default differs
from the library's dataclass.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect

import pytest

from sphr.baselines.config import BaselinesConfig
from sphr.cohorts.config import CohortConfig
from sphr.profiles import DEFAULT_PROFILE
from sphr.retrieval.profiles import PIPELINE_COMPARISON, ComparisonConfig
from sphr.risk.config import RiskConfig
from sphr.synth.config import SynthConfig

COHORT, BASE, SYNTH, RISK, COMPARE = (CohortConfig(), BaselinesConfig(), SynthConfig(),
                                      RiskConfig(), ComparisonConfig())

#: sub-command with its required arguments -> {option dest: the library default it stands for}
CLI: dict[tuple[str, ...], dict[str, object]] = {
    ("synth", "--out", "x.csv"): {
        "participants": SYNTH.participants, "seed": SYNTH.seed, "format": SYNTH.format,
        "decoys": SYNTH.decoys, "world": SYNTH.world, "linked": SYNTH.linked},
    ("cohorts", "baseline.parquet", "--out", "out"): {
        "profile": DEFAULT_PROFILE, "seed": COHORT.seed, "completeness": COHORT.completeness,
        "test_size": COHORT.test_size, "bfh_fold": COHORT.augment_fold["bona_fide_healthy"],
        "augment": COHORT.augment, "calibration_size": COHORT.calibration_size,
        "balanced_triplets": COHORT.balanced_triplets,
        "age_matched_triplets": COHORT.age_matched_triplets,
        "triplets": None, "sex": None, "ranges": None},  # None: the profile's, both, P0's
    ("baselines", "cohort", "--out", "out"): {
        "representations": list(BASE.representations), "seed": BASE.seed, "device": BASE.device,
        "landmarks": BASE.diffmap_landmarks, "dp_epochs": BASE.deep_patient_epochs,
        "use_augmented": BASE.use_augmented},
    ("risk", "run"): {
        "methods": list(RISK.methods), "modes": list(RISK.modes),
        "min_group_size": RISK.min_group_size, "bootstrap": RISK.n_bootstrap, "seed": RISK.seed,
        "device": RISK.device},
    # sphr score's options are unset until the [score] table and the defaults resolve them
    # (test_score_defaults_resolve_to_the_librarys)
    ("score", "run", "export.csv", "--out", "out"): {"device": None, "seed": None},
    ("retrieval", "digits"): {
        "losses": list(COMPARE.losses), "seeds": list(COMPARE.seeds), "profile": COMPARE.profile,
        "device": COMPARE.device},
}


def _parse(argv: tuple[str, ...]) -> argparse.Namespace:
    from sphr.cli import build_parser

    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv", list(CLI), ids=[a[0] for a in CLI])
def test_cli_defaults_are_the_librarys(argv):
    args = vars(_parse(argv))
    got = {k: args[k] for k in CLI[argv]}
    assert got == CLI[argv]


def test_cli_without_options_builds_the_librarys_config():
    from sphr.cohorts.commands import config_from_args as cohort_config
    from sphr.risk.commands import config_from_args as risk_config

    assert cohort_config(_parse(("cohorts", "b.parquet", "--out", "o"))) == \
        CohortConfig.profile(DEFAULT_PROFILE)
    assert risk_config(_parse(("risk", "run"))) == RISK


#: the command modules whose options map to the library configs above
COMMAND_MODULES = ("data", "cohorts", "train", "baselines", "risk", "retrieval")


@pytest.mark.parametrize("stage", COMMAND_MODULES)
def test_no_option_spells_out_its_default(stage):
    """No ``default=`` literal (None, False and [] aside) and no number after "default" in a
    help text: both are read from the library (``%(default)s`` in the help)."""
    import ast
    import re
    from pathlib import Path

    import sphr

    path = Path(sphr.__file__).parent / stage / "commands.py"
    literal = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        for kw in node.keywords:
            if kw.arg == "default" and isinstance(kw.value, (ast.Constant, ast.List, ast.Tuple)):
                if ast.literal_eval(kw.value) not in (None, False, []):
                    literal.append((node.lineno, ast.unparse(kw.value)))
            if kw.arg == "help":
                for part in ast.walk(kw.value):
                    if isinstance(part, ast.Constant) and isinstance(part.value, str) \
                            and re.search(r"default:? \d", part.value):
                        literal.append((node.lineno, part.value))
    assert not literal, f"{path}: defaults spelt out, read them from the library: {literal}"


def _dagster_configs() -> list[tuple[type, str, tuple[str, ...]]]:
    """(the asset's Config class, its stage, the stage keys it leaves out)."""
    from sphr_dagster.assets import (
        baselines,
        cohorts,
        evaluation,
        ingest,
        retrieval,
        risk,
        training,
    )

    return [(ingest.IngestConfig, "ingest", ()), (cohorts.CohortConfig, "cohorts", ()),
            (training.TrainingConfig, "train", ("comparison_losses",)),
            (training.LossComparisonConfig, "train", ("loss", "comparison_losses")),
            (baselines.BaselinesConfig, "baselines", ()),
            (evaluation.EvaluationConfig, "evaluate", ()), (risk.RiskSettings, "risk", ()),
            (retrieval.RetrievalSettings, "retrieval", ())]


@pytest.mark.parametrize("config_class,stage,left_out", _dagster_configs(),
                         ids=[c.__name__ for c, _, _ in _dagster_configs()])
def test_dagster_configs_hold_every_library_field_and_default(config_class, stage, left_out):
    """Every field of the stage's library dataclass (less the ones the run sets: the device,
    the partition's sex) is a field of the asset's Config, with the default profile's value as
    its default: a launch from the UI without config runs the library's defaults."""
    import dataclasses

    from sphr import settings as lib

    cls = lib.stage_class(stage)
    base = lib.stage_defaults(stage, DEFAULT_PROFILE)
    run_sets = lib.runtime_fields(stage)
    wanted = [f.name for f in dataclasses.fields(cls) if f.name not in run_sets + left_out]
    fields = config_class.model_fields
    missing = [k for k in wanted if k not in fields]
    assert not missing, f"{config_class.__name__} lacks {cls.__name__} fields {missing}"
    instance = config_class()
    got = {k: lib.plain(getattr(instance, k).model_dump() if hasattr(getattr(instance, k),
                                                                     "model_dump")
                        else getattr(instance, k)) for k in wanted}
    assert got == {k: lib.plain(base[k]) for k in wanted}
    # and the Config builds the library's dataclass back, equal to the profile's (its own
    # fields, such as the evaluation's losses, are the asset's: the library refuses them)
    from sphr_dagster.config import library_config

    assert library_config(stage, instance) == lib.library_config(stage, base)


def test_dagster_configs_defaults_are_the_librarys():
    from sphr.evaluate.protocol import EvalConfig
    from sphr.train.config import TrainConfig
    from sphr_dagster.assets.cohorts import CohortConfig as CohortRun
    from sphr_dagster.assets.evaluation import EvaluationConfig
    from sphr_dagster.assets.retrieval import RetrievalSettings
    from sphr_dagster.assets.training import TrainingConfig
    from sphr_dagster.resources import DataSource

    # the profile-dependent ones hold the default profile's values
    assert CohortRun().n_triplets == CohortConfig.profile(DEFAULT_PROFILE).n_triplets
    assert TrainingConfig().epochs == TrainConfig.profile(DEFAULT_PROFILE).epochs
    # seeds, classifiers and the NN for EHR's epochs: the library's, not restated
    evaluation, library = EvaluationConfig(), EvalConfig()
    assert (evaluation.seed, evaluation.classifiers, evaluation.nn.epochs) == \
        (library.seed, list(library.classifiers), library.nn.epochs)
    assert TrainingConfig().seed == TrainConfig().seed
    # the pipeline's comparison is its own (the quick budget, one seed), also from the library
    retrieval = RetrievalSettings()
    assert (retrieval.losses, retrieval.seeds, retrieval.profile) == \
        (list(PIPELINE_COMPARISON.losses), list(PIPELINE_COMPARISON.seeds),
         PIPELINE_COMPARISON.profile)
    source = DataSource()
    assert {k: getattr(source, f"synthetic_{k}") for k in vars(SYNTH)} == vars(SYNTH)


@dataclasses.dataclass
class _RiskWithANewField(RiskConfig):
    #: a field the library gains after the Dagster code was written
    new_threshold: float = 0.25


def test_a_new_library_field_reaches_the_dagster_config(monkeypatch):
    """The Config classes are generated from the dataclass: a field added to RiskConfig shows
    up in the launchpad, with its default, and reaches the library, with no Dagster edit."""
    from sphr import settings as lib
    from sphr_dagster.config import library_config, stage_config

    monkeypatch.setitem(lib.STAGES, "risk", dataclasses.replace(
        lib.STAGES["risk"], config=f"{__name__}:_RiskWithANewField"))
    config_class = stage_config("risk", "RiskSettings", "test")
    field = config_class.model_fields["new_threshold"]
    assert field.default == 0.25 and "after the Dagster code" in field.description
    built = library_config("risk", config_class(new_threshold=0.5), device="cpu")
    assert isinstance(built, _RiskWithANewField) and built.new_threshold == 0.5


def _default(func, name: str):
    return inspect.signature(func).parameters[name].default


def test_library_signatures_take_the_config_defaults():
    from sphr.cohorts.filtering import CompletenessFilter
    from sphr.cohorts.normalize import QuantileNormalizer
    from sphr.cohorts.triplets import mine_triplets
    from sphr.risk.validation.discrimination import discrimination
    from sphr.risk.validation.linked import linked_validation
    from sphr.synth.cohort import generate_cohort
    from sphr.synth.export import build_export_frame, write_export

    assert CompletenessFilter().threshold == COHORT.completeness
    assert _default(QuantileNormalizer, "n_quantiles") == COHORT.n_quantiles
    assert (_default(mine_triplets, "n"), _default(mine_triplets, "balanced")) == \
        (COHORT.n_triplets, COHORT.balanced_triplets)
    assert {k: _default(generate_cohort, k) for k in ("n", "seed", "linked", "world")} == \
        {"n": SYNTH.participants, "seed": SYNTH.seed, "linked": SYNTH.linked, "world": SYNTH.world}
    for writer in (build_export_frame, write_export):
        assert {k: _default(writer, k) for k in ("fmt", "decoys", "seed", "linked")} == \
            {"fmt": SYNTH.format, "decoys": SYNTH.decoys, "seed": SYNTH.seed,
             "linked": SYNTH.linked}
    assert (_default(discrimination, "n_bootstrap"), _default(discrimination, "seed")) == \
        (RISK.n_bootstrap, RISK.seed)
    assert (_default(linked_validation, "n_bootstrap"), _default(linked_validation, "seed")) == \
        (RISK.n_bootstrap_linked, RISK.seed)


def test_estimators_and_the_comparison_take_the_config_defaults():
    """The torch-backed ones: DiffMap, DeepPatient, run_comparison."""
    from sphr.baselines.deep_patient import DeepPatient
    from sphr.baselines.diffmap import DiffMap
    from sphr.retrieval.compare import run_comparison

    assert DiffMap().n_landmarks == BASE.diffmap_landmarks
    assert DeepPatient().epochs == BASE.deep_patient_epochs
    assert {k: _default(run_comparison, k) for k in ("losses", "seeds", "device", "profile")} == \
        {"losses": COMPARE.losses, "seeds": COMPARE.seeds, "device": COMPARE.device,
         "profile": COMPARE.profile}


def test_score_defaults_resolve_to_the_librarys():
    from sphr.risk.commands import score_settings_from_args
    from sphr.risk.config import ScoreSettings

    resolved = score_settings_from_args(_parse(("score", "run", "export.csv", "--out", "out")))
    assert resolved == ScoreSettings() and resolved.device == RISK.device
