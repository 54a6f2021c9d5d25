"""The run's settings file (sphr.settings) and what `python -m sphr_dagster run` makes of it:
errors that name the file and the key, the values in the assets' run config, the profile a
real export gets, RUN/run_settings.json, and --outcomes / --ranges reaching ingest and cohorts."""

from __future__ import annotations

import json

import pytest
import yaml

from sphr.errors import ConfigError
from sphr.settings import RUN_SETTINGS_FILE, resolve


def _toml(tmp_path, text: str, name: str = "run.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- errors
def test_unknown_key_names_the_file_the_key_and_the_valid_keys(tmp_path):
    path = _toml(tmp_path, "[cohorts]\nsed = 3\n")
    with pytest.raises(ConfigError) as err:
        resolve(path)
    message = str(err.value)
    assert str(path) in message and "'sed'" in message and "[cohorts]" in message
    assert "valid keys: " in message and "seed" in message and "n_triplets" in message


def test_a_run_field_in_a_stage_table_says_where_it_goes(tmp_path):
    with pytest.raises(ConfigError, match=r"\[train\]: device is set for the whole run"):
        resolve(_toml(tmp_path, '[train]\ndevice = "cpu"\n'))


def test_a_removed_key_says_it_was_removed(tmp_path):
    """[risk] validate_on had one legal value and was ignored; a file that still sets it is
    told it was removed, and why (not merely that the key is unknown)."""
    path = _toml(tmp_path, '[risk]\nvalidate_on = "test"\n')
    with pytest.raises(ConfigError) as err:
        resolve(path)
    message = str(err.value)
    assert message.startswith(f"{path}: [risk]: validate_on was removed (")
    assert "test partition" in message and "delete it" in message


def test_the_library_config_of_a_stage_refuses_a_key_it_does_not_know():
    """What a run or a Dagster Config hands the library is checked key for key: an unknown
    key is an error naming it, never dropped; the extras' keys (the comparison's losses) are
    keys of the table, not of TrainConfig, and pass."""
    from sphr.settings import library_config, stage_defaults
    from sphr.train.config import TrainConfig

    values = stage_defaults("train")
    assert "comparison_losses" in values
    assert isinstance(library_config("train", values, device="cpu"), TrainConfig)
    with pytest.raises(ConfigError, match=r"\[train\]: no key 'pnorm'"):
        library_config("train", {**values, "pnorm": 2}, device="cpu")
    with pytest.raises(ConfigError, match=r"\[risk\]: validate_on was removed"):
        library_config("risk", {"validate_on": "test"})


def test_the_dagster_configs_hand_the_library_their_stage_keys_only():
    """An asset's own Config fields (the evaluation's and the comparison's losses) stay the
    asset's; the library gets the stage's keys and builds its dataclass from them."""
    from sphr.evaluate.config import EvalConfig
    from sphr.train.config import TrainConfig
    from sphr_dagster.assets.evaluation import EvaluationConfig
    from sphr_dagster.assets.training import LossComparisonConfig, TrainingConfig
    from sphr_dagster.config import library_config

    assert isinstance(library_config("evaluate", EvaluationConfig(), device="cpu"), EvalConfig)
    for config in (TrainingConfig(), LossComparisonConfig()):
        assert isinstance(library_config("train", config, device="cpu"), TrainConfig)


def test_unknown_table_is_an_error(tmp_path):
    path = _toml(tmp_path, "[cohort]\nseed = 3\n")
    with pytest.raises(ConfigError) as err:
        resolve(path)
    assert str(path) in str(err.value) and "[cohort]" in str(err.value)
    assert "[cohorts]" in str(err.value)  # the valid tables


@pytest.mark.parametrize(("text", "key", "expected"), [
    ('[cohorts]\nseed = "3"\n', "[cohorts] seed", "integer"),
    ("[train]\nepochs = 2.5\n", "[train] epochs", "integer"),
    ('[train]\nlr = "fast"\n', "[train] lr", "number"),
    ("[risk]\nmethods = \"sphr\"\n", "[risk] methods", "a list of strings"),
    ("[cohorts]\nbalanced_triplets = 1\n", "[cohorts] balanced_triplets", "boolean"),
    ('[evaluate.nn]\nepochs = "x"\n', "[evaluate] nn epochs", "integer"),
    ("[run]\nlosses = \"no\"\n", "[run] losses", "boolean"),
])
def test_wrong_type_names_file_key_and_type(tmp_path, text, key, expected):
    path = _toml(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        resolve(path)
    message = str(err.value)
    assert message.startswith(f"{path}: {key} must be") and expected in message


def test_a_value_the_library_refuses_names_the_file_and_stage(tmp_path):
    path = _toml(tmp_path, '[train]\nloss = "nope"\n')
    with pytest.raises(ConfigError, match=r"run\.toml: \[train\] unknown loss 'nope'"):
        resolve(path)


def test_bad_outcomes_and_ranges_files_are_errors(tmp_path):
    (tmp_path / "o.json").write_text('{"censoring": {"hospital": "31/03/2021"}}')
    with pytest.raises(ConfigError, match="not a date"):
        resolve(outcomes=str(tmp_path / "o.json"))
    (tmp_path / "o.json").write_text('{"censor": {}}')
    with pytest.raises(ConfigError, match=r"o\.json \(docs/OUTCOMES\.md\): no key 'censor'"):
        resolve(outcomes=str(tmp_path / "o.json"))
    (tmp_path / "r.json").write_text('{"glucos": {"high": 6.0}}')
    with pytest.raises(ConfigError, match="no clinical range for 'glucos'"):
        resolve(ranges=str(tmp_path / "r.json"))


def test_a_range_overrides_keys_are_checked_for_each_sex_too():
    """A key of a sex's range override that is no range field is an error naming the marker
    and the sex (it was a TypeError from dataclasses.replace), as for the common keys."""
    from sphr.cohorts.ranges import with_overrides

    with pytest.raises(ConfigError, match="range override for 'hdl' female: no key 'lo'"):
        with_overrides({"hdl": {"female": {"lo": 1.2}}})
    with pytest.raises(ConfigError, match="range override for 'hdl': no key 'hihg'"):
        with_overrides({"hdl": {"hihg": 1.2}})
    assert with_overrides({"hdl": {"female": {"low": 1.2}}})


def test_the_documented_example_is_valid(tmp_path):
    """The example in sphr.settings' docstring (docs/ARCHITECTURE.md points there) resolves."""
    import textwrap

    import sphr.settings

    doc = sphr.settings.__doc__
    block = doc.split("::\n", 1)[1].split("\nAn unknown table", 1)[0]
    settings = resolve(_toml(tmp_path, textwrap.dedent(block)))
    assert (settings.profile, settings.losses) == ("paper", False)
    assert settings.stages["ingest"]["censoring"]["hospital"] == "2023-03-31"
    assert settings.stages["cohorts"]["ranges"] == {"glucose": {"high": 6.0}}
    assert settings.stages["train"]["epochs"] == 200


# ----------------------------------------------------------------------------- values
def test_file_values_reach_the_assets_run_config(tmp_path):
    from sphr_dagster.assets import cohorts, evaluation, training
    from sphr_dagster.run_config import run_config

    settings = resolve(_toml(tmp_path, "[cohorts]\nseed = 3\n[train]\nepochs = 2\n"
                                       "[evaluate.nn]\nepochs = 7\n"))
    ops = run_config(settings)["ops"]
    assert ops[cohorts.cohorts.op.name]["config"]["seed"] == 3
    assert ops[training.sphr_training.op.name]["config"]["epochs"] == 2
    # the comparison trains with the same settings, so it can copy the NPLB model
    assert ops[training.loss_comparison.op.name]["config"]["epochs"] == 2
    assert ops[evaluation.evaluation_tables.op.name]["config"]["nn"]["epochs"] == 7
    # the rest is the profile's: the file changes only what it names
    assert ops[cohorts.cohorts.op.name]["config"]["n_triplets"] == 20_000
    assert ops[evaluation.evaluation_tables.op.name]["config"]["nn"]["batch_size"] == 512


def test_the_library_gets_back_what_the_file_set(tmp_path):
    """From the file to the asset's Config and back to the library's dataclass."""
    from sphr_dagster.assets.cohorts import CohortConfig
    from sphr_dagster.config import from_settings, library_config

    settings = resolve(_toml(tmp_path, "[cohorts]\nseed = 3\nage_groups = [[40, 59], [60, 75]]\n"
                                       "[cohorts.augment_fold]\nbona_fide_healthy = 1\n"))
    config = from_settings(CohortConfig, settings.stages["cohorts"])
    built = library_config("cohorts", config, sexes=("female",))
    assert built == settings.config("cohorts", sexes=("female",))
    assert (built.seed, built.age_groups, built.augment_fold) == \
        (3, ((40, 59), (60, 75)), {"bona_fide_healthy": 1})


def test_command_line_overrides_the_file(tmp_path):
    path = _toml(tmp_path, '[run]\nprofile = "paper"\njobs = 1\nrun_dir = "out"\n'
                           '[synth]\nworld = "nonlinear"\n')
    from_file = resolve(path)
    assert (from_file.profile, from_file.jobs) == ("paper", 1)
    assert from_file.run_dir == str(tmp_path / "out")  # relative to the file
    assert from_file.stages["synth"]["world"] == "nonlinear"
    flags = resolve(path, profile="demo", jobs=2, world="linear")
    assert (flags.profile, flags.jobs, flags.stages["synth"]["world"]) == ("demo", 2, "linear")
    assert flags.stages["train"]["epochs"] == 8 and from_file.stages["train"]["epochs"] == 1000


def test_a_real_export_gets_the_export_profile_and_no_comparisons(tmp_path):
    """With --export: EXPORT_PROFILE (the pre-registered rule's choice), the 7-loss and
    image-retrieval comparisons off unless asked; without (the synthetic demo): demo, both on,
    as `make pipeline` always ran."""
    from sphr.settings import EXPORT_PROFILE
    from sphr.train.config import TrainConfig
    from sphr_dagster.__main__ import build_parser, settings_from_args

    def settings(*argv):
        return settings_from_args(build_parser().parse_args(["run", *argv]))

    demo = settings()
    assert (demo.profile, demo.losses, demo.retrieval, demo.export) == ("demo", True, True, None)
    export = tmp_path / "ukb.csv"
    real = settings("--export", str(export))
    assert (real.profile, real.losses, real.retrieval) == (EXPORT_PROFILE, False, False)
    assert real.export == str(export)
    assert real.stages["train"]["epochs"] == TrainConfig.profile(EXPORT_PROFILE).epochs
    assert settings("--export", str(export), "--profile", "paper").stages["train"][
        "epochs"] == 1000
    asked = settings("--export", str(export), "--losses", "--retrieval", "--profile", "demo")
    assert (asked.profile, asked.losses, asked.retrieval) == ("demo", True, True)
    assert settings("--no-losses").losses is False
    from_file = resolve(_toml(tmp_path, f'[run]\nexport = "{export}"\n'))
    assert (from_file.profile, from_file.losses) == (EXPORT_PROFILE, False)


def test_the_demo_cross_fits_complete_cases_in_two_folds_and_an_export_everyone_in_five(
        tmp_path):
    """The demo's protocol (sphr.cohorts.config.DEMO_PROTOCOL) and an export's defaults; a
    settings file's own [cohorts] values win over either."""
    export = tmp_path / "ukb.csv"
    cohorts = [resolve(**kw).stages["cohorts"] for kw in ({}, {"export": str(export)})]
    assert [(c["folds"], c["impute"]) for c in cohorts] == [(2, False), (5, True)]
    own = resolve(_toml(tmp_path, "[cohorts]\nfolds = 0\n")).stages["cohorts"]
    assert (own["folds"], own["impute"]) == (0, False)


def test_outcomes_and_ranges_reach_ingest_and_cohorts_config(tmp_path):
    from sphr_dagster.assets import cohorts, ingest
    from sphr_dagster.run_config import run_config

    (tmp_path / "outcomes.json").write_text(json.dumps(
        {"censoring": {"hospital": "2021-03-31"},
         "outcomes": {"copd": {"codes": ["J44"], "sources": ["hospital", "death"]}}}))
    (tmp_path / "ranges.json").write_text('{"glucose": {"high": 6.0}}')
    path = _toml(tmp_path, "[ingest.censoring]\ndeath = 2021-12-31\n"
                           "[cohorts.ranges.hdl]\nlow = 1.1\n")
    settings = resolve(path, outcomes=str(tmp_path / "outcomes.json"),
                       ranges=str(tmp_path / "ranges.json"))
    ops = run_config(settings)["ops"]
    censoring = ops[ingest.ingest.op.name]["config"]["censoring"]
    # the file's date (a TOML date), the --outcomes file's, and the default of the third
    assert censoring == {"hospital": "2021-03-31", "cancer_registry": "2020-12-31",
                         "first_occurrence": "2022-10-31", "algorithmic": "2022-10-31",
                         "death": "2021-12-31"}
    assert ops[ingest.ingest.op.name]["config"]["outcomes"]["copd"]["codes"] == ["J44"]
    outcome_config = settings.config("ingest").outcome_config()
    assert "copd" in [o.name for o in outcome_config.outcomes]
    assert outcome_config.censoring["cancer_registry"].provider != "user override"
    assert ops[cohorts.cohorts.op.name]["config"]["ranges"] == \
        {"hdl": {"low": 1.1}, "glucose": {"high": 6.0}}


# ----------------------------------------------------------------------------- the command
def test_announce_prints_first_and_writes_run_settings(tmp_path, capsys):
    from sphr_dagster.__main__ import announce

    (tmp_path / "o.json").write_text('{"censoring": {"hospital": "2021-03-31"}}')
    settings = resolve(_toml(tmp_path, "[cohorts]\nseed = 3\n"), export=str(tmp_path / "x.csv"),
                       outcomes=str(tmp_path / "o.json"), run_dir=str(tmp_path / "run"))
    path = announce(settings, ["python", "-m", "sphr_dagster", "run"])
    first = capsys.readouterr().out.splitlines()[0]
    from sphr.settings import EXPORT_PROFILE
    from sphr.train.config import TrainConfig

    for part in (f"profile {EXPORT_PROFILE}", f"export {tmp_path / 'x.csv'}",
                 f"outcomes {tmp_path / 'o.json'}", "ranges P0",
                 f"config {tmp_path / 'run.toml'}", "losses off", "retrieval off", "device auto"):
        assert part in first, (part, first)
    assert path == tmp_path / "run" / RUN_SETTINGS_FILE
    written = json.loads(path.read_text())
    assert set(written) >= {"profile", "export", "outcomes", "ranges", "config_file", "losses",
                            "retrieval", "device", "stages", "written", "command"}
    assert (written["profile"], written["losses"], written["retrieval"]) == (EXPORT_PROFILE, False,
                                                                             False)
    assert set(written["stages"]) == {"synth", "ingest", "cohorts", "train", "baselines",
                                      "evaluate", "risk", "retrieval"}
    assert written["stages"]["cohorts"]["seed"] == 3
    # the export profile, resolved
    assert written["stages"]["train"]["epochs"] == TrainConfig.profile(EXPORT_PROFILE).epochs
    assert written["stages"]["ingest"]["censoring"]["hospital"] == "2021-03-31"
    assert written["stages"]["evaluate"]["nn"]["epochs"] == 100
    assert written["command"] == ["python", "-m", "sphr_dagster", "run"]
    assert not list(path.parent.glob("*.tmp"))


def test_config_command_prints_the_launchpad_yaml(tmp_path, capsys):
    from sphr_dagster.__main__ import main

    path = _toml(tmp_path, "[cohorts]\nseed = 3\n[train]\nepochs = 2\n")
    assert main(["config", str(path), "--export", str(tmp_path / "ukb.csv")]) == 0
    out = capsys.readouterr().out
    from sphr.settings import EXPORT_PROFILE

    assert out.startswith(f"# settings: profile {EXPORT_PROFILE}")
    config = yaml.safe_load(out)
    assert config["ops"]["cohorts"]["config"]["seed"] == 3
    assert config["ops"]["sphr_training"]["config"]["epochs"] == 2
    assert config["resources"]["data_source"]["config"]["export_path"] == \
        str(tmp_path / "ukb.csv")
    assert main(["config", str(_toml(tmp_path, "[x]\n", "bad.toml"))]) == 2
    assert "unknown table [x]" in capsys.readouterr().err


@pytest.mark.parametrize("job", ["sphr_pipeline", "retrain", "cohort_refresh", "risk_refresh"])
def test_launchpad_config_is_valid_for_the_defined_jobs(tmp_path, job):
    """What `python -m sphr_dagster config` prints is what a job's launchpad accepts."""
    import dagster as dg

    from sphr_dagster.definitions import defs
    from sphr_dagster.run_config import job_run_config

    settings = resolve(_toml(tmp_path, "[cohorts]\nseed = 3\n"), export=str(tmp_path / "x.csv"))
    config = job_run_config(settings, job)
    dg.validate_run_config(defs.resolve_job_def(job), config)
    assert config["resources"]["storage"]["config"]["root"] == settings.run_dir


# ----------------------------------------------------------------------------- end to end
SMALL = """
[run]
jobs = 1
[cohorts]
n_triplets = 3000
# the settings path is what is tested here, not the cross-fit (tests/test_pipeline.py)
folds = 0
impute = false
[train]
epochs = 2
batch_size = 512
[baselines]
deep_patient_epochs = 2
diffmap_landmarks = 500
[evaluate]
n_splits = 2
classifiers = ["knn", "lda"]
[risk]
methods = ["raw_euclidean", "mahalanobis", "sphr"]
n_bootstrap = 20
n_bootstrap_linked = 20
"""


@pytest.mark.slow
def test_run_on_an_export_with_outcomes_and_ranges(tmp_path, ukb_export, monkeypatch, capsys):
    """`python -m sphr_dagster run --export ... --outcomes ... --ranges ...` on a small export:
    the first line, run_settings.json, and the censoring date and clinical range in the
    ingest and cohort reports."""
    from sphr_dagster.__main__ import main

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    (tmp_path / "outcomes.json").write_text('{"censoring": {"hospital": "2021-03-31"}}')
    (tmp_path / "ranges.json").write_text('{"glucose": {"high": 6.1}}')
    run = tmp_path / "run"
    code = main(["run", "--config", str(_toml(tmp_path, SMALL)), "--export", str(ukb_export),
                 "--outcomes", str(tmp_path / "outcomes.json"),
                 "--ranges", str(tmp_path / "ranges.json"), "--run-dir", str(run)])
    out, err = capsys.readouterr()
    assert code == 0, (out + err)[-3000:]
    from sphr.settings import EXPORT_PROFILE
    from sphr.train.config import TrainConfig

    assert out.splitlines()[0].startswith(f"settings: profile {EXPORT_PROFILE} | export ")
    written = json.loads((run / RUN_SETTINGS_FILE).read_text())
    assert written["outcomes"] == str(tmp_path / "outcomes.json") and written["losses"] is False
    report = json.loads((run / "ingest" / "ingest_report.json").read_text())
    assert report["outcomes"]["censoring_dates"]["hospital"]["date"] == "2021-03-31"
    assert report["outcomes"]["censoring_dates"]["death"]["date"] == "2022-11-30"
    for sex in ("female", "male"):
        cohort = json.loads((run / "cohorts" / sex / "cohort_report.json").read_text())
        glucose = [r for r in cohort["clinical_ranges"] if r["marker"] == "glucose"]
        assert glucose and all(r["high"] == 6.1 for r in glucose)
    # the export profile's training settings, two epochs: what the file asked for
    train = json.loads((run / "train" / "female" / "nplb" / "train_report.json").read_text())
    assert train["config"]["epochs"] == 2
    assert train["config"]["patience"] == TrainConfig.profile(EXPORT_PROFILE).patience
    assert not (run / "train" / "female" / "comparison").exists()  # losses off with an export
    assert not (run / "retrieval").exists()
    assert (run / "risk" / "risk_report.json").exists()
