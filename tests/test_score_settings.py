"""``sphr score``'s settings (sphr.risk.config.ScoreSettings): its options, the ``[score]``
table of ``--config FILE`` under them, errors naming the file and the key, and the
re-anchoring seed apart from the bootstrap's (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sphr.cli import _read_settings_table, build_parser
from sphr.errors import ConfigError
from sphr.risk.commands import score_settings_from_args
from sphr.risk.config import REANCHOR_PARTS, REANCHOR_SEED, RiskConfig, ScoreSettings

pytest.importorskip("tomllib")  # reading a settings file needs Python 3.11


def _settings(*argv: str) -> ScoreSettings:
    args = build_parser().parse_args(["score", "run", "new.csv", "--out", "out", *argv])
    _read_settings_table(args)
    return score_settings_from_args(args)


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.toml"
    path.write_text(text)
    return path


def test_defaults_come_from_the_dataclass():
    assert _settings() == ScoreSettings()
    assert ScoreSettings().reanchor_parts == REANCHOR_PARTS


def test_the_reanchor_seed_is_not_the_bootstrap_seed(monkeypatch):
    """--seed once defaulted to RiskConfig's bootstrap seed and set both; the re-anchoring
    has its own seed now, and --seed is the bootstrap's alone."""
    monkeypatch.setattr(RiskConfig, "seed", 17)  # a bootstrap seed that is not the default
    assert _settings().reanchor_seed == REANCHOR_SEED != 17
    assert _settings("--reanchor-seed", "5").reanchor_seed == 5
    both = _settings("--seed", "5")
    assert both.seed == 5 and both.reanchor_seed == REANCHOR_SEED


def test_the_score_table_under_the_command_line(tmp_path):
    path = _toml(tmp_path, '[score]\nreanchor = true\nreanchor_seed = 3\non_drift = "refuse"\n'
                           'reanchor_parts = ["bounds"]\ndevice = "cpu"\n')
    got = _settings("--config", str(path))
    assert got == ScoreSettings(reanchor=True, reanchor_seed=3, on_drift="refuse",
                                reanchor_parts=("bounds",), device="cpu")
    # the command line wins over the file; what it leaves unset, the file keeps
    got = _settings("--config", str(path), "--reanchor-seed", "8", "--on-drift", "warn")
    assert (got.reanchor_seed, got.on_drift, got.reanchor, got.device) == (8, "warn", True, "cpu")


def test_a_file_without_a_score_table_changes_nothing(tmp_path):
    assert _settings("--config", str(_toml(tmp_path, "[cohorts]\nseed = 3\n"))) == ScoreSettings()


@pytest.mark.parametrize(("text", "message"), [
    ("[score]\nreanchor_sed = 3\n", "[score]: no key 'reanchor_sed'"),
    ('[score]\nreanchor_seed = "three"\n', "[score] reanchor_seed"),
    ("[score]\nreanchor = 1\n", "[score] reanchor"),
    ('[score]\nreanchor_parts = "bounds"\n', "[score] reanchor_parts"),
])
def test_an_unknown_key_or_a_wrong_type_names_the_file_and_the_key(tmp_path, text, message):
    path = _toml(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        _settings("--config", str(path))
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_bad_value_is_a_config_error_naming_the_file(tmp_path):
    for text, key in (('[score]\nreanchor_parts = ["wheels"]\n', "reanchor_parts"),
                      ('[score]\non_drift = "panic"\n', "on_drift")):
        path = _toml(tmp_path, text)
        with pytest.raises(ConfigError, match=key) as err:
            _settings("--config", str(path))
        assert str(err.value).startswith(f"{path}: [score]")
    with pytest.raises(ConfigError, match="reanchor_parts"):
        _settings("--reanchor-parts", "wheels")


def test_a_run_settings_file_may_hold_the_score_table(tmp_path):
    """One settings file for the run and for sphr score: the run reads past [score]."""
    from sphr.settings import resolve

    path = _toml(tmp_path, "[cohorts]\nseed = 3\n[score]\nreanchor = true\n")
    assert resolve(path).stages["cohorts"]["seed"] == 3
    assert "score" not in resolve(path).stages


def test_the_release_outcome_file_is_an_option_and_a_key(tmp_path):
    """``sphr score --outcomes release.json``, as ``sphr_dagster run --outcomes`` takes it."""
    assert ScoreSettings().outcomes is None
    assert _settings("--outcomes", "release.json").outcomes == "release.json"
    path = _toml(tmp_path, '[score]\noutcomes = "rel.json"\n')
    assert _settings("--config", str(path)).outcomes == "rel.json"
    assert _settings("--config", str(path), "--outcomes", "cli.json").outcomes == "cli.json"
