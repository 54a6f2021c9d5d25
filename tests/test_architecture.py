"""The import direction of docs/ARCHITECTURE.md, enforced: no stage imports a later stage.

    synth (sphr.synth): a data source beside real exports, rank 0 beside ingest; may import
      the catalog (sphr.data.fields, sphr.data.headers); no stage imports it
    ingest (sphr.data) -> cohorts (sphr.cohorts) -> train (sphr.train, sphr.losses,
      sphr.models) -> embed (sphr.baselines) -> evaluate (sphr.evaluate) | risk (sphr.risk)
      -> report (sphr.report)
    retrieval (sphr.retrieval): a separate branch; may import sphr.losses and sphr.models
    shared (sphr.io, layout, artifacts, errors, labels, device, plots, progress, profiles, survival,
    representation): importable by all, import no stage

Imports are read with ``ast``: module-level and function-level ``import`` / ``from``
statements (relative ones resolved), ``importlib.import_module("...")`` string literals, and
string constants naming a ``sphr`` module (the lazy ``_LAZY`` maps of package
``__init__`` files). ``sphr.cli`` (the entry point that registers every stage's command) and
``sphr.settings`` (a run's settings, composed of the stages' own settings classes) stand
above every stage: they may import any stage, and no stage or shared module imports them.
``sphr/__init__.py`` (``lazy_exports``) is shared. The Dagster package ``sphr_dagster`` has
layers of its own (``DAGSTER_LAYERS``), and ``sphr`` never imports Dagster. No two modules of
either package import each other, directly or through others (any import counts:
function-level, ``TYPE_CHECKING``, lazy maps). Loading
a fitted risk model (the package ``sphr.risk.model``) imports nothing of the fit of a run, the
stage's commands and reports, or the run directory; reading a saved model and scoring with it
import nothing of the model's own fitting either. No function in either package is longer
than ``MAX_FUNCTION_LINES`` (80), no module longer than ``MAX_MODULE_LINES`` (500) and no
class longer than ``MAX_CLASS_LINES`` (200).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import pytest

SPHR = Path(__file__).resolve().parents[1] / "sphr"

#: stage of each package / module prefix, and its rank along the flow
STAGES: dict[str, str] = {
    "sphr.synth": "synth", "sphr.data": "ingest", "sphr.cohorts": "cohorts", "sphr.train": "train",
    "sphr.losses": "train", "sphr.models": "train", "sphr.baselines": "embed",
    "sphr.evaluate": "evaluate", "sphr.risk": "risk", "sphr.report": "report",
    "sphr.retrieval": "retrieval",
}
RANK: dict[str, int] = {"shared": -1, "synth": 0, "ingest": 0, "cohorts": 1, "train": 2, "embed": 3,
                        "evaluate": 4, "risk": 4, "report": 5}
SHARED: tuple[str, ...] = ("sphr.io", "sphr.layout", "sphr.artifacts", "sphr.errors", "sphr.labels",
                           "sphr.device", "sphr.plots", "sphr.progress", "sphr.profiles",
                           "sphr.survival", "sphr.stats", "sphr.health_distance", "sphr.beyond_age",
                           "sphr.representation", "sphr.options", "sphr.values")
#: above every stage: the CLI registers every stage's command, and the run's settings
#: (sphr.settings) compose every stage's config class. They may import any stage; no stage
#: imports them (a stage's settings class lives in the stage's own config module)
COMPOSE: tuple[str, ...] = ("sphr.cli", "sphr.settings")
#: the package root: ``lazy_exports``, which the packages' ``__init__`` files use
ROOT = "sphr"
#: what the retrieval branch may import besides the shared modules
RETRIEVAL_MAY_IMPORT: tuple[str, ...] = ("sphr.losses", "sphr.models")
#: what the synthetic generator may import of the ingest stage: the field catalog and the
#: header styles its export writer names the columns with. The generator is a data source, as
#: a real export is: its cohort reaches the pipeline only as a file that ``sphr ingest`` reads,
#: so no stage imports it (only the CLI, which registers ``sphr synth``, and the settings)
SYNTH_MAY_IMPORT: tuple[str, ...] = ("sphr.data.fields", "sphr.data.headers")

#: Known violations of today's code, (importing module, imported module). Each one is a
#: debt to pay, not a licence: the test fails on any import not listed here, and
#: on a listed one that no longer exists (so the list only shrinks).
ALLOWED: dict[tuple[str, str], str] = {
    # the evaluate and risk stages render their own report.html / report.pdf with the
    # report toolkit (templates, figures, colours, HTML -> PDF): the report step runs inside them
    ("sphr.evaluate.report", "sphr.report"): "evaluate renders evaluate/report.html itself",
    # the risk report package (sphr.risk.report), module by module: its lazy map re-exports
    # the toolkit's find_chromium / render_png, the rest render with the toolkit
    ("sphr.risk.report", "sphr.report"): "risk renders risk/report.html itself",
    ("sphr.risk.report.assembly", "sphr.report"): "report.html's template, PDF and summary PNG",
    ("sphr.risk.report.figures", "sphr.report"): "the risk report's figures",
    ("sphr.risk.report.tables", "sphr.report"): "the risk report's tables",
    ("sphr.risk.report.names", "sphr.report"): "the risk groups' colours (COLORS)",
    ("sphr.risk.report.absolute", "sphr.report"): "the risk report's absolute-risk section",
    ("sphr.risk.report.main", "sphr.report"): "the main report's four pages (tables)",
    ("sphr.risk.report.main_figures", "sphr.report"): "the main report's figures",
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SPHR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(SPHR.rglob("*.py"))}


def _resolve(name: str) -> str | None:
    """The sphr module an imported name lives in (``sphr.io.write_json`` -> ``sphr.io``)."""
    while name:
        if name in MODULES:
            return name
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return None


def imported_names(path: Path, known: Mapping[str, Path] | None = None) -> set[str]:
    """Every dotted name ``path`` imports, anywhere in the file (relative imports resolved);
    string constants that name a module of ``known`` count too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    known = MODULES if known is None else known
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            names.update(f"{module}.{a.name}" for a in node.names)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and node.value in known):
            # importlib.import_module("sphr.x") and the lazy {"name": "sphr.x.y"} maps
            names.add(node.value)
    return names


def imports_of(path: Path) -> set[str]:
    """Every sphr module ``path`` imports, anywhere in the file."""
    me = _module_name(path)
    found = {_resolve(n) for n in imported_names(path) if n == "sphr" or n.startswith("sphr.")}
    return {m for m in found if m and m != me}


def stage_of(module: str) -> str:
    if module == ROOT:
        return "shared"
    for prefix in COMPOSE:
        if module == prefix or module.startswith(prefix + "."):
            return "compose"
    for prefix in SHARED:
        if module == prefix or module.startswith(prefix + "."):
            return "shared"
    for prefix, stage in STAGES.items():
        if module == prefix or module.startswith(prefix + "."):
            return stage
    raise AssertionError(f"{module} belongs to no stage: add it to tests/test_architecture.py "
                         "and docs/ARCHITECTURE.md")


def _allowed_by_direction(src: str, dst: str) -> bool:
    a, b = stage_of(src), stage_of(dst)
    if b == "compose":
        return a == "compose"  # no stage, and no shared module, reads the run's settings
    if a == "compose" or a == b or b == "shared":
        return True
    if a == "shared":
        return False  # shared utilities import no stage
    if b == "synth":
        return False  # the pipeline reads the generator's export files, never the generator
    if a == "synth":
        return any(dst == p or dst.startswith(p + ".") for p in SYNTH_MAY_IMPORT)
    if b == "retrieval":
        return False  # nothing in the health pipeline depends on the retrieval branch
    if a == "retrieval":
        return any(dst == p or dst.startswith(p + ".") for p in RETRIEVAL_MAY_IMPORT)
    if {a, b} == {"evaluate", "risk"}:
        return False  # siblings: neither reads the other
    return RANK[b] <= RANK[a]


def violations() -> set[tuple[str, str]]:
    return {(src, dst) for src, path in MODULES.items() for dst in imports_of(path)
            if not _allowed_by_direction(src, dst)}


def test_no_stage_imports_a_later_stage():
    new = sorted(violations() - set(ALLOWED))
    assert not new, ("imports against the stage order (docs/ARCHITECTURE.md); move the shared "
                     "code to an earlier stage or a shared module:\n"
                     + "\n".join(f"  {a} imports {b}" for a, b in new))


#: the training-stage modules the evaluation library may import: the comparison's loss names
EVALUATE_MAY_IMPORT_FROM_TRAIN: tuple[str, ...] = ("sphr.train.config",)
#: the command layer, which runs the training stage's comparison for a standalone evaluate
EVALUATE_COMMANDS = "sphr.evaluate.commands"


def test_the_evaluation_library_trains_nothing():
    """Only the loss comparison's names come from the training stage: the models are its
    outputs (RUN/train/<sex>/comparison), which the evaluation reads (docs/ARCHITECTURE.md)."""
    bad = sorted((src, dst) for src, path in MODULES.items()
                 if stage_of(src) == "evaluate" and src != EVALUATE_COMMANDS
                 for dst in imports_of(path)
                 if stage_of(dst) == "train" and dst not in EVALUATE_MAY_IMPORT_FROM_TRAIN)
    assert not bad, f"the evaluation library imports the training stage: {bad}"


def test_allow_list_only_shrinks():
    gone = sorted(set(ALLOWED) - violations())
    assert not gone, f"fixed, remove from ALLOWED: {gone}"


@pytest.mark.parametrize(("src", "dst", "ok"), [
    ("sphr.risk.spaces", "sphr.train", True),        # a later stage reads an earlier one
    ("sphr.train.run", "sphr.evaluate.protocol", False),
    ("sphr.cohorts.build", "sphr.train.config", False),
    ("sphr.evaluate.tables", "sphr.risk.model", False),
    ("sphr.io", "sphr.cohorts.build", False),
    ("sphr.retrieval.train", "sphr.losses.triplet", True),
    ("sphr.retrieval.train", "sphr.evaluate.protocol", False),
    ("sphr.risk.model", "sphr.retrieval.metrics", False),
    ("sphr.report", "sphr.labels", True),
    ("sphr.synth.export", "sphr.data.fields", True),  # the generator reads the catalog
    ("sphr.synth.export", "sphr.data.headers", True),
    ("sphr.synth.cohort", "sphr.io", True),
    ("sphr.synth.export", "sphr.data.ingest", False),  # a source, not a reader of exports
    ("sphr.synth.cohort", "sphr.cohorts.build", False),
    ("sphr.data.ingest", "sphr.synth.cohort", False),  # ingest reads files, real or synthetic
    ("sphr.data.reader", "sphr.synth.export", False),
    ("sphr.risk.model", "sphr.synth.worlds", False),
    # the settings compose the stages' own settings; no stage reads them (ingest once did,
    # and through them depended on the training stage)
    ("sphr.data.commands", "sphr.settings.stages", False),
    ("sphr.data.commands", "sphr.settings", False),
    ("sphr.io", "sphr.settings.run", False),
    ("sphr.risk.commands", "sphr.cli", False),
    ("sphr.settings.stages", "sphr.train.config", True),
    ("sphr.settings", "sphr.data.config", True),
    ("sphr.cli", "sphr.risk.commands", True),
    ("sphr.settings.run", "sphr.cli", True),
    ("sphr.data.ingest", "sphr", True),              # lazy_exports
])
def test_the_rule_itself(src, dst, ok):
    assert _allowed_by_direction(src, dst) is ok


def test_the_parser_sees_function_level_and_importlib_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "sphr" / "cohorts"
    pkg.mkdir(parents=True)
    (tmp_path / "sphr" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text(
        "import importlib\n\n\ndef f():\n    from sphr.train.run import data_key\n"
        "    return importlib.import_module('sphr.risk.serve.apply'), data_key\n")
    for name in ("sphr.train.run", "sphr.risk.serve.apply", "sphr.cohorts.x"):
        monkeypatch.setitem(MODULES, name, tmp_path / "unused.py")
    monkeypatch.setattr(f"{__name__}.SPHR", tmp_path / "sphr")
    assert imports_of(pkg / "x.py") == {"sphr.train.run", "sphr.risk.serve.apply"}


# ----------------------------------------------------------------------------- import circles
def import_edges(modules: Mapping[str, Path], strings: bool = True) -> dict[str, set[str]]:
    """Module -> the modules of ``modules`` it imports, anywhere in the file: module-level,
    function-level and ``TYPE_CHECKING`` imports, relative ones, and (``strings``) string
    constants naming a module (``importlib.import_module`` and the lazy-export maps of package
    ``__init__`` files). ``from package import module`` imports the module, not the package; a
    name in a module (``from sphr.io import write_json``) imports that module."""

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for src, path in modules.items():
        package = src if path.name == "__init__.py" else src.rpartition(".")[0]
        found: set[str | None] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found.update(resolve(a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    module = ".".join([*base, *([module] if module else [])])
                subs = [f"{module}.{a.name}" for a in node.names]
                found.update(resolve(m) if m in modules else resolve(module) for m in subs)
            elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value in modules:
                found.add(node.value)
        edges[src] = {m for m in found if m and m != src}
    return edges


def import_circles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (each a circle), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while not group or group[-1] != v:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(circles)


def test_no_import_circle():
    """No two modules of sphr and sphr_dagster import each other, directly or through others,
    whatever the import's place in the file (a function-level one hid risk.calibration <->
    risk.model)."""
    modules = {**MODULES, **DAGSTER_MODULES}
    circles = import_circles(import_edges(modules))
    assert not circles, "import circles:\n" + "\n".join("  " + " <-> ".join(c) for c in circles)


def test_the_circle_check_finds_constructed_circles(tmp_path, monkeypatch):
    monkeypatch.setattr(f"{__name__}.SPHR", tmp_path / "sphr")
    pkg = tmp_path / "sphr" / "risk"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("LAZY = {'sphr.risk.c': ('C',)}\n")
    (pkg / "a.py").write_text("def f():\n    from sphr.risk.b import B\n    return B\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from .c import C\nB = 1\n")
    (pkg / "c.py").write_text("import sphr.risk.a\nC = 2\n")
    (pkg / "d.py").write_text("from sphr.risk import c\n")  # the module c, not the package
    (pkg / "e.py").write_text("from sphr.risk import LAZY\n")
    modules = {_module_name(p): p for p in sorted(pkg.rglob("*.py"))}
    assert import_circles(import_edges(modules)) == [["sphr.risk.a", "sphr.risk.b",
                                                      "sphr.risk.c"]]
    (pkg / "c.py").write_text("C = 2\n")  # break it
    assert import_circles(import_edges(modules)) == []
    # a package whose lazy map names a module that imports the package back
    (pkg / "c.py").write_text("from sphr.risk import LAZY\n")
    assert import_circles(import_edges(modules)) == [["sphr.risk", "sphr.risk.c"]]


#: what loading and applying a fitted risk model must never import: the fit of a run, the
#: stage's commands and reports (the package and each of its modules), and the run
#: directory's layout (it reads the model folder only)
NOT_IN_THE_MODEL_WALK: tuple[str, ...] = (
    "sphr.risk.fit", "sphr.risk.pipeline", "sphr.risk.serve", "sphr.risk.report",
    "sphr.risk.commands", "sphr.artifacts", "sphr.layout",
    "sphr.baselines.pipeline")
#: the fitted model's own fitting, which reading a saved model and scoring with it never import
MODEL_FITTING: tuple[str, ...] = ("sphr.risk.model.fitting", "sphr.risk.model.estimator")


def imported_by(start: str, edges: Mapping[str, set[str]]) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for dst in edges[todo.pop()] - seen:
            seen.add(dst)
            todo.append(dst)
    return seen


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def test_the_fitted_risk_model_imports_no_fit_and_no_run_layout():
    seen = imported_by("sphr.risk.model", import_edges(MODULES))
    bad = sorted(m for m in seen if _under(m, NOT_IN_THE_MODEL_WALK))
    assert not bad, bad
    assert {"sphr.representation", "sphr.risk.spaces", "sphr.train.embedding",
            "sphr.risk.model.fitting", "sphr.risk.model.persistence"} <= seen


def test_reading_and_scoring_a_saved_model_import_none_of_its_fitting():
    edges = import_edges(MODULES)
    for start in ("sphr.risk.model.persistence", "sphr.risk.model.scoring"):
        seen = imported_by(start, edges)
        bad = sorted(m for m in seen if _under(m, (*MODEL_FITTING, *NOT_IN_THE_MODEL_WALK)))
        assert not bad, (start, bad)
        assert "sphr.risk.model.methods" in seen


def test_the_model_walk_sees_a_report_module():
    """A module under sphr.risk.report counts as the report (the package has many)."""
    assert _under("sphr.risk.report.figures", NOT_IN_THE_MODEL_WALK)
    assert not _under("sphr.risk.reporting", NOT_IN_THE_MODEL_WALK)


#: the risk wing's rooms, lowest first (docs/ARCHITECTURE.md, "The risk wing"): the fit and
#: the model (every module of sphr.risk not named here) <- validation <- the report <- serving
#: new people <- the stage's pipeline and commands; a room imports only its own and lower ones
RISK_ROOMS: dict[str, int] = {"sphr.risk.validation": 1, "sphr.risk.report": 2,
                              "sphr.risk.serve": 3, "sphr.risk.pipeline": 4,
                              "sphr.risk.commands": 4, "sphr.risk": 4}


def risk_room(module: str) -> int:
    """The room of a module of sphr.risk (the package itself is the top: it re-exports)."""
    for prefix, room in RISK_ROOMS.items():
        if module == prefix or (prefix != "sphr.risk" and module.startswith(prefix + ".")):
            return room
    return 0


def test_the_risk_wing_imports_run_one_way_through_its_rooms():
    edges = import_edges(MODULES)
    bad = sorted((src, dst) for src, dsts in edges.items() if _under(src, ("sphr.risk",))
                 for dst in dsts if _under(dst, ("sphr.risk",)) and dst != "sphr.risk"
                 and risk_room(dst) > risk_room(src))
    assert not bad, bad
    # each room holds modules, so the rule is not vacuous
    rooms = {risk_room(m) for m in MODULES if _under(m, ("sphr.risk",))}
    assert rooms == {0, 1, 2, 3, 4}
    assert risk_room("sphr.risk.serve.apply") == 3 and risk_room("sphr.risk.fit") == 0


# ----------------------------------------------------------------------------- the Dagster package
DAGSTER = SPHR.parent / "sphr_dagster"
#: layers of the Dagster package, lowest first; a module imports only its own layer and lower
#: ones, so imports run one way: resources and helpers <- assets <- definitions <- entry points
DAGSTER_LAYERS: dict[str, int] = {
    "sphr_dagster": 0, "sphr_dagster.config": 0, "sphr_dagster.resources": 0,
    "sphr_dagster.metadata": 0, "sphr_dagster.partitions": 0, "sphr_dagster.io_manager": 0,
    "sphr_dagster.home": 0, "sphr_dagster.fits": 0, "sphr_dagster.slurm": 0,
    "sphr_dagster.k8s_client": 0, "sphr_dagster.failures": 0,
    "sphr_dagster.assets": 1, "sphr_dagster.checks": 1, "sphr_dagster.automation": 1,
    "sphr_dagster.definitions": 2,
    "sphr_dagster.run_config": 3, "sphr_dagster.runner": 3, "sphr_dagster.k8s": 3,
    "sphr_dagster.__main__": 3,
}
DAGSTER_MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(DAGSTER.rglob("*.py"))}


def dagster_layer(module: str, layers: Mapping[str, int] = DAGSTER_LAYERS) -> int:
    """The layer of a module of the package (a package's layer covers its modules)."""
    name = module
    while name:
        if name in layers:
            return layers[name]
        name = name.rpartition(".")[0]
    raise AssertionError(f"{module} has no layer: add it to DAGSTER_LAYERS in "
                         "tests/test_architecture.py and to docs/ARCHITECTURE.md")


def dagster_violations(modules: Mapping[str, Path],
                       layers: Mapping[str, int] = DAGSTER_LAYERS) -> set[tuple[str, str]]:
    """(module, what it imports) for every import from a lower layer to a higher one."""
    bad = set()
    for src, path in modules.items():
        for name in imported_names(path, modules):
            if name.split(".")[0] != "sphr_dagster":
                continue
            dst = name
            while dst not in modules and "." in dst:  # a name in a module -> the module
                dst = dst.rpartition(".")[0]
            if dst in modules and dst != src and dagster_layer(dst, layers) > \
                    dagster_layer(src, layers):
                bad.add((src, dst))
    return bad


def test_every_dagster_module_has_a_layer():
    for module in DAGSTER_MODULES:
        dagster_layer(module)


def test_dagster_imports_run_one_way():
    """Resources, metadata, partitions, IO manager and config never import the assets or the
    definitions (function-level imports included); the assets never import the definitions."""
    bad = sorted(dagster_violations(DAGSTER_MODULES))
    assert not bad, ("imports against the Dagster package's layers (docs/ARCHITECTURE.md):\n"
                     + "\n".join(f"  {a} imports {b}" for a, b in bad))


def test_the_dagster_rule_sees_function_level_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "sphr_dagster"
    (pkg / "assets").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "assets" / "__init__.py").write_text("")
    (pkg / "assets" / "cohorts.py").write_text("from sphr_dagster.resources import RunStorage\n")
    (pkg / "definitions.py").write_text("from sphr_dagster.assets import cohorts\n")
    (pkg / "resources.py").write_text(
        "def default_resources():\n    from sphr_dagster.definitions import defs\n"
        "    from .assets.cohorts import CohortConfig\n    return defs, CohortConfig\n")
    monkeypatch.setattr(f"{__name__}.SPHR", tmp_path / "sphr")
    modules = {_module_name(p): p for p in sorted(pkg.rglob("*.py"))}
    assert dagster_violations(modules) == {
        ("sphr_dagster.resources", "sphr_dagster.definitions"),
        ("sphr_dagster.resources", "sphr_dagster.assets.cohorts")}


#: the one Dagster distribution the library may use: the dependency-free Pipes protocol
#: (sphr.train.pipes_entry, the training step's far side)
LIBRARY_MAY_IMPORT_DAGSTER: tuple[str, ...] = ("dagster_pipes",)


def test_the_library_never_imports_dagster():
    """Read from the source, function-level imports included (test_pipeline.py checks the
    same by importing every module)."""
    bad = sorted((src, name) for src, path in MODULES.items() for name in imported_names(path)
                 if (name.split(".")[0] == "dagster" or name.startswith("dagster_"))
                 and name.split(".")[0] not in LIBRARY_MAY_IMPORT_DAGSTER)
    assert not bad, f"sphr/ imports Dagster: {bad}"


# ----------------------------------------------------------------------------- function length
#: the longest a function may be (``end_lineno - lineno + 1``: from ``def`` to its last line,
#: docstring and comments included): longer ones get split into named steps
MAX_FUNCTION_LINES = 80
#: the folders held to the size limits: both packages, and the benchmark scripts and their
#: helper modules (issue 49: a 937-line benchmark had grown outside them)
PACKAGES: tuple[str, ...] = ("sphr", "sphr_dagster", "benchmarks")


def _sources(root: Path) -> list[Path]:
    return [p for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]


def definition_lengths(path: Path, root: Path, kinds: tuple[type, ...]) -> dict[str, int]:
    """``{"<path from root>:<qualified name>": lines}`` of every definition of ``kinds`` in
    ``path`` (``end_lineno - lineno + 1``), nested ones included (``Class.method``,
    ``outer.inner``, a class inside a function)."""
    rel = path.relative_to(root).as_posix()
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if isinstance(child, kinds):
                    out[f"{rel}:{name}"] = child.end_lineno - child.lineno + 1
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(), filename=str(path)), "")
    return out


def function_lengths(path: Path, root: Path) -> dict[str, int]:
    """Every function and method in ``path`` (:func:`definition_lengths`)."""
    return definition_lengths(path, root, (ast.FunctionDef, ast.AsyncFunctionDef))


def long_functions(root: Path = SPHR.parent) -> dict[str, int]:
    lengths: dict[str, int] = {}
    for path in _sources(root):
        lengths.update(function_lengths(path, root))
    return {name: n for name, n in lengths.items() if n > MAX_FUNCTION_LINES}


def test_no_function_is_longer_than_the_limit():
    long = long_functions()
    assert not long, (f"functions over {MAX_FUNCTION_LINES} lines; split them into named steps:\n"
                      + "\n".join(f"  {name} ({n} lines)" for name, n in sorted(long.items())))


def test_the_length_check_finds_a_long_function(tmp_path):
    (tmp_path / "sphr").mkdir()
    (tmp_path / "sphr_dagster").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    (tmp_path / "sphr" / "m.py").write_text(
        f"def short():\n{body}\n\ndef long():\n{body}    return 1\n")
    assert long_functions(tmp_path) == {"sphr/m.py:long": MAX_FUNCTION_LINES + 1}


def test_function_lengths_see_methods_and_nested_functions(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f():\n    def g():\n        return 1\n    return g\n\n\n"
        "class C:\n    async def h(self):\n        x = 1\n\n        return x\n")
    assert function_lengths(tmp_path / "m.py", tmp_path) == {
        "m.py:f": 4, "m.py:f.g": 2, "m.py:C.h": 4}


# ------------------------------------------------------------------------ module and class size
#: the longest a module may be (lines in the file): a longer one gets split into modules named
#: after the parts of the domain it holds
MAX_MODULE_LINES = 500
#: the longest a class may be (``end_lineno - lineno + 1``, from ``class`` to its last line):
#: a longer one gets split into named parts (helpers, one reader per source, ...)
MAX_CLASS_LINES = 200
def long_modules(root: Path = SPHR.parent) -> dict[str, int]:
    """``{"<path from root>": lines}`` of every module over :data:`MAX_MODULE_LINES`."""
    lengths = {p.relative_to(root).as_posix(): len(p.read_text().splitlines())
               for p in _sources(root)}
    return {name: n for name, n in lengths.items() if n > MAX_MODULE_LINES}


def class_lengths(path: Path, root: Path) -> dict[str, int]:
    """Every class in ``path``, nested ones included (:func:`definition_lengths`)."""
    return definition_lengths(path, root, (ast.ClassDef,))


def long_classes(root: Path = SPHR.parent) -> dict[str, int]:
    lengths: dict[str, int] = {}
    for path in _sources(root):
        lengths.update(class_lengths(path, root))
    return {name: n for name, n in lengths.items() if n > MAX_CLASS_LINES}


def test_no_module_is_longer_than_the_limit():
    long = long_modules()
    assert not long, (f"modules over {MAX_MODULE_LINES} lines; split them into modules named "
                      "after their parts:\n"
                      + "\n".join(f"  {name} ({n} lines)" for name, n in sorted(long.items())))


def test_no_class_is_longer_than_the_limit():
    long = long_classes()
    assert not long, (f"classes over {MAX_CLASS_LINES} lines; split them into named parts:\n"
                      + "\n".join(f"  {name} ({n} lines)" for name, n in sorted(long.items())))


def test_the_size_checks_find_a_long_module_and_a_long_class(tmp_path):
    for package in PACKAGES:
        (tmp_path / package / "sub").mkdir(parents=True)
    (tmp_path / "sphr" / "ok.py").write_text("x = 1\n" * MAX_MODULE_LINES)
    (tmp_path / "sphr_dagster" / "sub" / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert long_modules(tmp_path) == {"sphr_dagster/sub/big.py": MAX_MODULE_LINES + 1}
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_CLASS_LINES - 1))
    (tmp_path / "sphr" / "c.py").write_text(
        f"class Short:\n{body}\n\nclass Long:\n{body}    y = 1\n")
    assert long_classes(tmp_path) == {"sphr/c.py:Long": MAX_CLASS_LINES + 1}


def test_class_lengths_see_nested_classes(tmp_path):
    (tmp_path / "m.py").write_text(
        "class A:\n    class B:\n        x = 1\n\n    def f(self):\n"
        "        class C:\n            y = 2\n        return C\n")
    assert class_lengths(tmp_path / "m.py", tmp_path) == {
        "m.py:A": 8, "m.py:A.B": 2, "m.py:A.f.C": 2}


# ----------------------------------------------------------------------------- the benchmarks
BENCHMARKS = SPHR.parent / "benchmarks"


def benchmark_modules(root: Path = BENCHMARKS) -> dict[str, Path]:
    """The benchmarks' modules by the names they import each other by: a script's folder is on
    ``sys.path`` when it runs (``from _measure import measure``, ``nhanes_crossfit.fits``)."""
    out: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def benchmark_circles(root: Path = BENCHMARKS) -> list[list[str]]:
    """Import circles among the benchmarks. String constants do not count: a script's command
    lines hold words such as "train" that name a benchmark script too."""
    return import_circles(import_edges(benchmark_modules(root), strings=False))


def test_no_import_circle_among_the_benchmarks():
    circles = benchmark_circles()
    assert not circles, "import circles:\n" + "\n".join("  " + " <-> ".join(c) for c in circles)


def test_the_benchmark_checks_see_helpers_circles_and_sizes(tmp_path):
    pkg = tmp_path / "benchmarks" / "helpers"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from .b import B\n    return B\n")
    (pkg / "b.py").write_text("B = ['train']\n")
    (tmp_path / "benchmarks" / "train.py").write_text("from helpers.a import f\n")
    assert benchmark_circles(tmp_path / "benchmarks") == []  # "train" is a word, not an import
    (pkg / "b.py").write_text("import train\nB = 1\n")
    assert benchmark_circles(tmp_path / "benchmarks") == [["helpers.a", "helpers.b", "train"]]
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (pkg / "b.py").write_text(f"def long():\n{body}" + "y = 1\n" * MAX_MODULE_LINES)
    assert long_functions(tmp_path) == {"benchmarks/helpers/b.py:long": MAX_FUNCTION_LINES + 1}
    assert long_modules(tmp_path) == {
        "benchmarks/helpers/b.py": MAX_FUNCTION_LINES + 1 + MAX_MODULE_LINES}
