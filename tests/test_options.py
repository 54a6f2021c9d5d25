"""The command line's stage settings are generated from the stages' dataclasses
(:mod:`sphr.options`): every field has an option, its help is the field's ``#:`` doc (the
Dagster launchpad's description), and the parsed options build the library's config."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from sphr.baselines.config import BaselinesConfig
from sphr.cohorts.config import CohortConfig
from sphr.data.config import IngestSettings
from sphr.evaluate.config import EvalConfig
from sphr.options import add_settings, field_docs, plain_doc
from sphr.profiles import DEFAULT_PROFILE
from sphr.retrieval.profiles import ComparisonConfig
from sphr.risk.config import RiskConfig
from sphr.synth.config import SynthConfig
from sphr.train.config import TrainConfig

#: sub-command with its required arguments -> the dataclass its settings options come from
GENERATED = {("train", "cohort"): TrainConfig,
             ("cohorts", "baseline.parquet", "--out", "out"): CohortConfig,
             ("baselines", "cohort", "--out", "out"): BaselinesConfig,
             ("evaluate", "run"): EvalConfig,
             ("risk", "run"): RiskConfig,
             ("retrieval", "digits"): ComparisonConfig,
             ("synth", "--out", "export.csv"): SynthConfig,
             ("ingest", "export.csv", "--out", "out"): IngestSettings}
#: fields a command sets otherwise than by an option each: sphr ingest's outcome table,
#: censoring dates and First Occurrence fields come as one JSON file (--outcomes FILE)
SET_OTHERWISE = {"ingest": ("outcomes", "censoring", "first_occurrence_fields")}


def _command(name: str) -> argparse.ArgumentParser:
    from sphr.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _parse(*argv: str) -> argparse.Namespace:
    from sphr.cli import build_parser

    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize("argv", list(GENERATED), ids=[a[0] for a in GENERATED])
def test_every_setting_has_an_option_whose_help_is_the_field_doc(argv):
    cls = GENERATED[argv]
    command = _command(argv[0])
    options = command.get_default("setting_options")
    assert options.cls is cls
    docs = field_docs(cls)
    actions = {a.dest: a for a in command._actions}
    fields = [f.name for f in dataclasses.fields(cls)
              if f.name not in SET_OTHERWISE.get(argv[0], ())]
    assert [a.field for a in options.added] == fields  # every setting, none twice
    for name in fields:
        assert docs.get(name), f"{cls.__name__}.{name} has no #: doc"
        action = actions[options.dest(name)]
        assert action.help.startswith(plain_doc(docs[name]).replace("%", "%%")), name
        # and the option is on the command line: parsing it reaches the namespace
        assert action.option_strings and action.option_strings[0].startswith("--")


def test_the_dagster_configs_describe_with_the_same_docs():
    """One source for the help: a field's option help and its launchpad description."""
    from sphr_dagster.assets.training import TrainingConfig

    docs = field_docs(TrainConfig)
    for name in ("lr", "dropout", "validation_size"):
        assert TrainingConfig.model_fields[name].description == docs[name]
    help_ = {a.dest: a.help for a in _command("train")._actions}
    assert help_["lr"].startswith(plain_doc(docs["lr"]))


@pytest.mark.parametrize("stage", ["risk", "retrieval", "synth", "ingest"])
def test_the_converted_stages_launchpad_and_help_share_the_docs(stage):
    """The risk, retrieval, synth and ingest stages' Dagster fields describe themselves with
    the docs their command-line options' help starts with."""
    from sphr_dagster.assets.ingest import IngestConfig
    from sphr_dagster.assets.retrieval import RetrievalSettings
    from sphr_dagster.assets.risk import RiskSettings
    from sphr_dagster.resources import SYNTH_PREFIX, DataSource

    argv = next(a for a in GENERATED if a[0] == stage)
    configs = {"risk": (RiskSettings, ""), "retrieval": (RetrievalSettings, ""),
               "synth": (DataSource, SYNTH_PREFIX), "ingest": (IngestConfig, "")}
    config, prefix = configs[stage]
    docs = field_docs(GENERATED[argv])
    options = _command(stage).get_default("setting_options")
    help_ = {a.dest: a.help for a in _command(stage)._actions}
    shared = [a.field for a in options.added if prefix + a.field in config.model_fields]
    assert shared, stage
    for name in shared:
        assert config.model_fields[prefix + name].description == docs[name], name
        assert help_[options.dest(name)].startswith(plain_doc(docs[name]).replace("%", "%%"))


def test_every_existing_option_keeps_its_name():
    """The options before the generation keep their names (and argparse destinations)."""
    names = {"train": ("--loss", "--epochs", "--batch-size", "--seed", "--device", "--precision",
                       "--compile", "--threads", "--checkpoint-every", "--set", "--fast",
                       "--losses", "--profile", "--resume", "--out"),
             "cohorts": ("--seed", "--completeness", "--test-size", "--bfh-fold", "--augment",
                         "--calibration-size", "--triplets", "--balanced-triplets",
                         "--age-matched-triplets", "--triplet-classes", "--ranges", "--sex",
                         "--profile", "--out"),
             "baselines": ("--representations", "--seed", "--device", "--landmarks",
                           "--dp-epochs", "--use-augmented", "--out"),
             "evaluate": ("--out", "--sexes", "--representations", "--classifiers", "--splits",
                          "--seed", "--no-stratify", "--n-jobs", "--device", "--nn-epochs",
                          "--xgboost-method", "--refit-baselines", "--no-fit-baselines",
                          "--landmarks", "--dp-epochs", "--losses", "--no-losses",
                          "--no-train-losses", "--loss-profile", "--loss-set",
                          "--loss-classifiers"),
             "risk": ("--out", "--methods", "--modes", "--min-group-size", "--bootstrap",
                      "--seed", "--device", "--distance-space", "--png"),
             "score": ("--out", "--allow-out-of-range", "--device", "--on-drift", "--reanchor",
                       "--reanchor-parts", "--seed"),
             "retrieval": ("--losses", "--seeds", "--out", "--profile", "--device", "--threads",
                           "--epochs", "--batch-size", "--m-per-class", "--lr", "--weight-decay",
                           "--dim", "--backbone", "--weights", "--image-size", "--no-augment",
                           "--val-fraction", "--code-heads", "--paper-schedules",
                           "--data-option", "--no-strips", "--write-manifest"),
             "synth": ("--participants", "--seed", "--format", "--decoys", "--world",
                       "--no-linked-records", "--out"),
             "ingest": ("--out", "--drop-truncated-last-row", "--outcomes")}
    for command, flags in names.items():
        known = {s for a in _command(command)._actions for s in a.option_strings}
        assert set(flags) <= known, (command, set(flags) - known)


def test_train_options_set_only_what_is_given():
    from sphr.train.commands import _overrides

    assert _overrides(_parse("train", "c")) == {}
    args = _parse("train", "c", "--epochs", "4", "--compile", "--lr", "0.002",
                  "--loss-params", '{"scale": 2}', "--patience", "3", "--set", "lr=0.5")
    assert _overrides(args) == {"epochs": 4, "compile": True, "lr": 0.5,
                                "loss_params": {"scale": 2}, "patience": 3}
    assert (args.loss, args.device) == (None, TrainConfig().device)


def test_cohort_options_build_the_librarys_config():
    from sphr.cohorts.commands import config_from_args

    assert config_from_args(_parse("cohorts", "b", "--out", "o")) == \
        CohortConfig.profile(DEFAULT_PROFILE)
    got = config_from_args(_parse("cohorts", "b", "--out", "o", "--bfh-fold", "5", "--sex",
                                  "male", "--triplets", "77", "--age-groups", "[[30, 50]]",
                                  "--n-quantiles", "10"))
    assert got == CohortConfig.profile(DEFAULT_PROFILE, augment_fold={"bona_fide_healthy": 5},
                                       sexes=("male",), n_triplets=77, age_groups=((30, 50),),
                                       n_quantiles=10)


def test_evaluate_options_build_the_librarys_config():
    from sphr.evaluate.config import NN_EHR_CONFIG

    def config(*argv: str) -> EvalConfig:
        args = _parse("evaluate", "run", *argv)
        return EvalConfig(**args.setting_options.values(args))

    assert config() == EvalConfig()
    assert config("--splits", "3", "--no-stratify", "--nn-epochs", "7", "--n-jobs", "2") == \
        EvalConfig(n_splits=3, stratify=False, n_jobs=2,
                   nn=dataclasses.replace(NN_EHR_CONFIG, epochs=7))


def test_p_is_described_as_nplbs_power_not_a_norm():
    """TrainConfig.p is the exponent of NPLB's regularizer (sphr.losses.nplb_per_triplet), and
    its doc (the CLI help and the launchpad's description) says so."""
    from sphr_dagster.assets.training import TrainingConfig

    doc = field_docs(TrainConfig)["p"]
    assert doc.startswith("NPLB's power") and "(d(p,n) - d(a,n))^p" in doc
    assert "p-norm of the distances" not in doc
    assert TrainingConfig.model_fields["p"].description == doc
    help_ = {a.dest: a.help for a in _command("train")._actions}
    assert help_["p"].startswith(plain_doc(doc)[:40])


def test_risk_has_no_validate_on():
    """validate_on had one legal value and was ignored: no field, no option, no launchpad field."""
    from sphr_dagster.assets.risk import RiskSettings

    assert "validate_on" not in {f.name for f in dataclasses.fields(RiskConfig)}
    assert "validate_on" not in RiskSettings.model_fields
    with pytest.raises(SystemExit):
        _parse("risk", "run", "--validate-on", "test")


def test_risk_options_build_the_librarys_config():
    from sphr.risk.commands import config_from_args

    assert config_from_args(_parse("risk", "run")) == RiskConfig()
    args = _parse("risk", "run", "--methods", "sphr,mahalanobis", "--modes", "paper",
                  "--bootstrap", "50", "--seed", "3", "--distance-space", "quantile",
                  "--sexes", "male", "--absolute-recalibrate", "--n-bootstrap-linked", "20")
    assert (args.methods, args.bootstrap) == (["sphr", "mahalanobis"], 50)  # as before
    assert config_from_args(args) == RiskConfig(
        methods=("sphr", "mahalanobis"), modes=("paper",), n_bootstrap=50, seed=3,
        distance_space="quantile", sexes=("male",), absolute_recalibrate=True,
        n_bootstrap_linked=20)


def test_retrieval_options_build_the_librarys_config():
    from sphr.retrieval.commands import config_from_args

    assert config_from_args(_parse("retrieval", "digits")) == ComparisonConfig()
    args = _parse("retrieval", "digits", "--losses", "nplb", "triplet_dams:threshold=0.9",
                  "--seeds", "4", "5", "--profile", "quick", "--device", "cpu")
    assert (args.losses, args.seeds) == (["nplb", "triplet_dams:threshold=0.9"], [4, 5])
    assert config_from_args(args) == ComparisonConfig(
        losses=("nplb", "triplet_dams:threshold=0.9"), seeds=(4, 5), profile="quick",
        device="cpu")


def test_synth_options_build_the_librarys_config():
    from sphr.synth.commands import config_from_args

    assert config_from_args(_parse("synth", "--out", "x")) == SynthConfig()
    args = _parse("synth", "--out", "x", "--participants", "100", "--seed", "2", "--format",
                  "tsv", "--decoys", "0", "--world", "nonlinear", "--no-linked-records")
    assert (args.participants, args.linked) == (100, False)  # the old destinations
    assert config_from_args(args) == SynthConfig(participants=100, seed=2, format="tsv",
                                                 decoys=0, world="nonlinear", linked=False)


def test_ingest_options_build_the_librarys_settings():
    """--drop-truncated-last-row is generated; the outcome fields come as one file, whose
    keys are exactly the fields the command leaves to it."""
    from sphr.data.commands import OUTCOME_FILE_KEYS
    from sphr.data.outcomes.config import _OVERRIDE_KEYS

    assert OUTCOME_FILE_KEYS == SET_OTHERWISE["ingest"] == _OVERRIDE_KEYS

    def settings(*argv: str) -> IngestSettings:
        args = _parse("ingest", "e", "--out", "o", *argv)
        return IngestSettings(**args.setting_options.values(args))

    assert settings() == IngestSettings()
    args = _parse("ingest", "e", "--out", "o", "--drop-truncated-last-row", "--outcomes", "f")
    assert (args.drop_truncated_last_row, str(args.outcomes)) == (True, "f")
    assert settings("--drop-truncated-last-row") == IngestSettings(drop_truncated_last_row=True)


@dataclasses.dataclass(frozen=True)
class _WithANewSetting(BaselinesConfig):
    #: a setting the library gains after the command line was written (50% of it)
    new_share: float = 0.5
    #: a list setting
    names: tuple[str, ...] = ("a", "b")


def test_a_new_setting_gets_an_option_with_no_edit():
    parser = argparse.ArgumentParser()
    options = add_settings(parser, _WithANewSetting, defaults=_WithANewSetting())
    help_ = {a.dest: a.help for a in parser._actions}
    assert help_["new_share"] == ("a setting the library gains after the command line was "
                                  "written (50%% of it) (default: %(default)s)")
    assert options.values(parser.parse_args([]))["new_share"] == 0.5
    values = options.values(parser.parse_args(["--new-share", "0.25", "--names", "x,y"]))
    assert (values["new_share"], values["names"]) == (0.25, ("x", "y"))
    assert _WithANewSetting(**values).names == ("x", "y")


def test_a_setting_without_a_doc_is_refused():
    @dataclasses.dataclass
    class Undocumented:
        size: int = 1

    with pytest.raises(TypeError, match="no #: doc"):
        add_settings(argparse.ArgumentParser(), Undocumented)
