"""One override syntax: ``--set STAGE.KEY=VALUE`` reads a value as the settings file would,
merges over the file's keys, and is checked by the file's one checker (issue 65, item 5)."""

from __future__ import annotations

import argparse
import datetime

import pytest

from sphr.errors import ConfigError
from sphr.options import Override, override_tables, parse_override, parse_value
from sphr.settings.run import resolve


@pytest.mark.parametrize("text, value", [
    ("200", 200), ("0.5", 0.5), ("-3", -3), ("true", True), ("Off", False), ("yes", True),
    ("null", None), ("None", None), ("severity", "severity"), ('"a b"', "a b"),
    ("[[40, 50], [51, 73]]", [[40, 50], [51, 73]]), ("{high = 6.0}", {"high": 6.0}),
    ("2023-03-31", datetime.date(2023, 3, 31)), ("nplb,triplet", "nplb,triplet"),
])
def test_a_value_reads_as_toml_reads_it(text, value):
    assert parse_value(text) == value
    assert type(parse_value(text)) is type(value)


def test_an_item_names_its_table_and_nested_key():
    assert parse_override("train.epochs=7") == Override("train", ("epochs",), 7)
    assert parse_override("epochs=7", "train") == Override("train", ("epochs",), 7)
    # a nested key names its table even where the command has one of its own
    assert parse_override("cohorts.ranges.glucose.high=6.0", "train") == Override(
        "cohorts", ("ranges", "glucose", "high"), 6.0)
    for bad in ("train.epochs", "epochs=3", "=3", "train..x=1"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"STAGE\.KEY=VALUE"):
            parse_override(bad)


def test_items_merge_over_the_file_keeping_what_they_do_not_name():
    file = {"cohorts": {"ranges": {"glucose": {"low": 3.0, "high": 5.5}}, "seed": 1},
            "train": {"epochs": 10}}
    items = [parse_override(t) for t in ("cohorts.ranges.glucose.high=6.0", "train.epochs=5",
                                         "train.epochs=6", "risk.bootstrap=0")]
    merged = override_tables(items, file)
    assert merged == {"cohorts": {"ranges": {"glucose": {"low": 3.0, "high": 6.0}}, "seed": 1},
                      "train": {"epochs": 6}, "risk": {"bootstrap": 0}}
    assert file["cohorts"]["ranges"]["glucose"]["high"] == 5.5  # the file's tables unchanged


def _file_error(tmp_path, text: str) -> str:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        resolve(path)
    return str(err.value)


def _set_error(*items: str) -> str:
    with pytest.raises(ConfigError) as err:
        resolve(overrides=[parse_override(t) for t in items])
    return str(err.value)


def test_a_bad_key_or_type_is_refused_as_the_file_refuses_it(tmp_path):
    file_msg = _file_error(tmp_path, "[train]\nepochs = \"many\"\n")
    set_msg = _set_error("train.epochs=many")
    # one checker: the same words, only the source differs
    assert file_msg.split("epochs", 1)[1] == set_msg.split("epochs", 1)[1]
    assert "must be" in set_msg and "'many'" in set_msg
    file_msg = _file_error(tmp_path, "[train]\nepoch = 3\n")
    set_msg = _set_error("train.epoch=3")
    assert "epoch" in set_msg and "epochs" in set_msg  # the unknown key names the valid ones
    assert file_msg.split("epoch", 1)[1].split("valid", 1)[-1] == \
        set_msg.split("epoch", 1)[1].split("valid", 1)[-1]
    assert "nosuch" in _set_error("nosuch.x=1")
    assert "[run]" in _set_error("run.export=x.csv")


def test_overrides_win_over_the_file(tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("[train]\nepochs = 10\nlr = 0.01\n")
    settings = resolve(path, overrides=[parse_override("train.epochs=3")])
    assert settings.stages["train"]["epochs"] == 3
    assert settings.stages["train"]["lr"] == 0.01
    assert resolve(path).stages["train"]["epochs"] == 10


def _stage_args(*argv: str) -> argparse.Namespace:
    from sphr.cli import build_parser

    return build_parser().parse_args(list(argv))


def test_a_stage_command_refuses_another_stages_item():
    args = _stage_args("cohorts", "x.parquet", "--out", "o", "--set", "train.epochs=3")
    with pytest.raises(ConfigError, match=r"--set train\.\*: this command sets \[cohorts\]"):
        args.setting_options.values(args)
    args = _stage_args("cohorts", "x.parquet", "--out", "o", "--set", "seed=4")
    assert args.setting_options.values(args)["seed"] == 4


def test_the_loss_comparison_takes_train_items_and_the_older_spelling():
    args = _stage_args("evaluate", "run", "--set", "train.epochs=5", "--loss-set", "lr=0.5")
    from sphr.train.config import TrainConfig

    assert args.setting_options.overrides(args, "train", TrainConfig) == {"epochs": 5, "lr": 0.5}
    args = _stage_args("evaluate", "run", "--loss-set", "epochs=many")
    with pytest.raises(ConfigError, match=r"--set train\.epochs must be"):
        args.setting_options.overrides(args, "train", TrainConfig)


def test_the_main_command_prints_the_overridden_config(capsys):
    from sphr_dagster.__main__ import main

    assert main(["config", "--set", "train.epochs=3", "--set", "risk.n_bootstrap=7"]) == 0
    out = capsys.readouterr().out
    assert "epochs: 3" in out and "n_bootstrap: 7" in out
