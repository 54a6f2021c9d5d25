"""One source for every default: the CLI options and the Dagster configs take theirs from the
library's config dataclasses (and the library's own functions from the same ones).

Each table below maps an option or a config field to the library setting it stands for; a
test fails when a CLI default, a Dagster config default or a library signature default differs
from the library's dataclass.
"""

from __future__ import annotations

import argparse
import inspect

import pytest

from sphr.baselines.config import BaselinesConfig
from sphr.cohorts.config import CohortConfig
from sphr.data.synth_config import SynthConfig
from sphr.profiles import DEFAULT_PROFILE
from sphr.retrieval.profiles import PIPELINE_COMPARISON, ComparisonConfig
from sphr.risk.config import RiskConfig

COHORT, BASE, SYNTH, RISK, COMPARE = (CohortConfig(), BaselinesConfig(), SynthConfig(), RiskConfig(),
                                      ComparisonConfig())

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
    ("score", "run", "export.csv", "--out", "out"): {"device": RISK.device},
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
COMMAND_MODULES = ("data", "cohorts", "baselines", "risk", "retrieval")


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


def test_dagster_configs_defaults_are_the_librarys():
    from sphr_dagster.assets.baselines import BaselinesConfig as BaselinesRun
    from sphr_dagster.assets.cohorts import CohortConfig as CohortRun
    from sphr_dagster.assets.retrieval import RetrievalSettings
    from sphr_dagster.assets.risk import RiskSettings
    from sphr_dagster.resources import DataSource

    cohort = CohortRun()
    assert {k: getattr(cohort, k) for k in ("profile", "seed", "bfh_fold", "n_triplets",
                                            "completeness", "augment", "calibration_size")} == {
        "profile": DEFAULT_PROFILE, "seed": COHORT.seed,
        "bfh_fold": COHORT.augment_fold["bona_fide_healthy"], "n_triplets": None,
        "completeness": COHORT.completeness, "augment": COHORT.augment,
        "calibration_size": COHORT.calibration_size}
    base = BaselinesRun()
    assert (base.representations, base.seed, base.deep_patient_epochs, base.diffmap_landmarks) \
        == (list(BASE.representations), BASE.seed, BASE.deep_patient_epochs, BASE.diffmap_landmarks)
    risk = RiskSettings()
    assert (risk.methods, risk.modes, risk.n_bootstrap) == \
        (list(RISK.methods), list(RISK.modes), RISK.n_bootstrap)
    # the pipeline's comparison is its own (the quick budget, one seed), also from the library
    retrieval = RetrievalSettings()
    assert (retrieval.losses, retrieval.seeds, retrieval.profile) == \
        (list(PIPELINE_COMPARISON.losses), list(PIPELINE_COMPARISON.seeds),
         PIPELINE_COMPARISON.profile)
    source = DataSource()
    assert (source.synthetic_participants, source.synthetic_seed, source.synthetic_world) == \
        (SYNTH.participants, SYNTH.seed, SYNTH.world)


def _default(func, name: str):
    return inspect.signature(func).parameters[name].default


def test_library_signatures_take_the_config_defaults():
    from sphr.cohorts.filtering import CompletenessFilter
    from sphr.cohorts.normalize import QuantileNormalizer
    from sphr.cohorts.triplets import mine_triplets
    from sphr.data.export import build_export_frame, write_export
    from sphr.data.synth import generate_cohort
    from sphr.risk.discrimination import discrimination
    from sphr.risk.linked import linked_validation

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
