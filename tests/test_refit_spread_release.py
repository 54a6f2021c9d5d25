"""The library is never written by its benchmarks: a study's results stay under
benchmarks/results/, and the refit spread the report reads (package data of sphr.risk) is
written only by the release step ``make refit-spread`` (scripts/release_refit_spread.py)."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

from sphr.risk import refits

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
RESULTS = BENCHMARKS / "results" / "refit_spread.json"
#: calls that write their first argument (a path), their second (sphr.io's writers take
#: the object first), or their receiver (``path.write_text``, ``frame.to_csv``)
WRITE_ARG0 = {"atomic_path", "write_parquets"}
WRITE_ARG1 = {"write_json", "write_text", "write_bytes", "write_parquet", "write_npz"}
WRITE_SELF = {"write_text", "write_bytes"}
WRITE_TO = {"to_csv", "to_parquet", "to_json", "savefig", "write_table"}


def _library_names(tree: ast.Module) -> set[str]:
    """Module-level names bound to a path under sphr/ (``REPO / "sphr" / ...`` or a string
    starting with ``sphr/``)."""
    return {t.id for node in tree.body if isinstance(node, ast.Assign)
            and _names_library(node.value, set()) for t in node.targets
            if isinstance(t, ast.Name)}


def _names_library(node: ast.AST, names: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and (
                sub.value == "sphr" or sub.value.startswith("sphr/")):
            return True
        if isinstance(sub, ast.Name) and sub.id in names:
            return True
    return False


def _write_targets(tree: ast.Module):
    """(line, the expression written to) of every write call of a module."""
    def writes(mode: ast.AST | None) -> bool:
        return isinstance(mode, ast.Constant) and bool(set(str(mode.value)) & set("wax+"))

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        if name == "open" and isinstance(node.func, ast.Name) and node.args:
            mode = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "mode"), None)
            if writes(mode):
                yield node.lineno, node.args[0]
        elif name == "open" and isinstance(node.func, ast.Attribute) and node.args \
                and writes(node.args[0]):  # path.open("w")
            yield node.lineno, node.func.value
        elif name in WRITE_ARG0 and node.args:
            yield node.lineno, node.args[0]
        elif name in WRITE_ARG1 and isinstance(node.func, ast.Name) and len(node.args) > 1:
            yield node.lineno, node.args[1]
        elif name in WRITE_SELF and isinstance(node.func, ast.Attribute):
            yield node.lineno, node.func.value
        elif name in WRITE_TO and node.args:
            yield node.lineno, node.args[0]


def test_no_benchmark_opens_a_path_under_the_library_for_writing():
    offenders = []
    for path in sorted(BENCHMARKS.rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = _library_names(tree)
        offenders += [f"{path.relative_to(REPO)}:{line}" for line, target in _write_targets(tree)
                      if _names_library(target, names)]
    assert offenders == []
    # the check sees the old spelling of the spread file's write
    old = ast.parse('SPREAD = REPO / "sphr" / "risk" / "x.json"\nwrite_json(held, SPREAD)\n'
                    'open("sphr/x", "w")\n')
    assert len([t for _, t in _write_targets(old) if _names_library(t, _library_names(old))]) == 2


def test_the_benchmark_records_its_spread_under_its_results():
    # spread_file.py is a module of the nhanes_crossfit folder (relative imports): read its
    # constant instead of importing it
    tree = ast.parse((BENCHMARKS / "nhanes_crossfit" / "spread_file.py").read_text())
    spread = next(ast.unparse(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", "") == "SPREAD_FILE" for t in n.targets))
    assert spread == "REPO / 'benchmarks' / 'results' / 'refit_spread.json'"


def test_the_report_reads_the_released_spread_from_the_package():
    assert refits.SPREAD_FILE == REPO / "sphr" / "risk" / "refit_spread.json"
    # package data (pyproject's [tool.setuptools.package-data]): a wheel's report reads it
    assert '"risk/refit_spread.json"' in (REPO / "pyproject.toml").read_text()
    assert refits.check_spreads(json.loads(RESULTS.read_text())) == []
    # the package holds the released results: run `make refit-spread` after --record-spread
    assert refits.SPREAD_FILE.read_bytes() == RESULTS.read_bytes()


def test_the_release_step_checks_before_it_copies(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("release_refit_spread",
                                                  REPO / "scripts" / "release_refit_spread.py")
    release = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(release)
    packaged = tmp_path / "package" / "refit_spread.json"
    assert release.release(RESULTS, packaged) and packaged.read_bytes() == RESULTS.read_bytes()
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"demo": {"default": {"spread": {}}}, "nightly": {}}))
    assert not release.release(broken, packaged)
    assert packaged.read_bytes() == RESULTS.read_bytes()  # nothing written
    problems = refits.check_spreads(json.loads(broken.read_text()))
    assert any("nightly" in p for p in problems) and any("missing" in p for p in problems)
