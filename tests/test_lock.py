"""The lock file agrees with pyproject.toml: every requirement pinned, every pin allowed.

``make install`` installs with ``-c requirements.lock``; after a change of pyproject.toml,
``make lock`` refreshes it (docs/REPRODUCIBILITY.md). This test fails until it is refreshed.
"""

from __future__ import annotations

import importlib.metadata
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

# Python 3.11's TOML reader (the suite runs on 3.11; docs/REPRODUCIBILITY.md)
tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in (*project["dependencies"],
                                     *project["optional-dependencies"]["dev"])]


def lock_pins(text: str) -> dict[str, list[tuple[Version, str]]]:
    """name -> [(version, marker text)]: a universal lock may pin a name once per platform."""
    pins: dict[str, list[tuple[Version, str]]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-")):
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier  # a lock pins exactly: name==version
        assert spec.operator == "==", line
        marker = str(requirement.marker) if requirement.marker else ""
        pins.setdefault(canonicalize_name(requirement.name), []).append(
            (Version(spec.version), marker))
    return pins


def disagreements(requirements: list[Requirement], pins: dict) -> list[str]:
    environment = default_environment() | {"python_version": "3.11",
                                           "python_full_version": "3.11.0"}
    lines = []
    for req in requirements:
        if req.marker and not req.marker.evaluate(environment):
            continue
        name = canonicalize_name(req.name)
        if name not in pins:
            lines.append(f"{req.name}: in pyproject.toml, not in requirements.lock")
            continue
        for version, _marker in pins[name]:
            if not req.specifier.contains(version, prereleases=True):
                lines.append(f"{req.name}: locked {version}, pyproject.toml asks {req.specifier}")
    return lines


def test_the_lock_pins_every_requirement_within_its_range():
    pins = lock_pins((ROOT / "requirements.lock").read_text())
    lines = disagreements(project_requirements(), pins)
    assert not lines, "run `make lock`: " + "; ".join(lines)


def test_a_disagreement_is_found():
    pins = lock_pins("numpy==1.26.4\ntorch==2.13.0\n")
    lines = disagreements([Requirement("numpy>=2.0"), Requirement("torch==2.13.0"),
                           Requirement("polars>=1.20")], pins)
    assert lines == ["numpy: locked 1.26.4, pyproject.toml asks >=2.0",
                     "polars: in pyproject.toml, not in requirements.lock"]


def test_the_lock_keeps_torch_at_the_cpu_build_pin():
    # an open torch pin would pull a CUDA build and several GB of nvidia-* wheels
    (torch,) = lock_pins((ROOT / "requirements.lock").read_text())["torch"]
    assert torch[0] == Version("2.13.0")


def test_make_install_installed_the_locks_versions():
    """Every installed package the lock pins is at its pin (a local build tag such as
    torch's ``+cpu`` aside: an index's CPU build of the pinned release)."""
    if not (Path(sys.prefix) / ".installed").exists():
        pytest.skip("this environment was not installed by `make install`")
    pins = lock_pins((ROOT / "requirements.lock").read_text())
    environment = default_environment()
    wrong = []
    # the environment's own packages: not the copies a package vendors with their metadata
    # (setuptools/_vendor holds an older packaging, on sys.path once setuptools is imported)
    for dist in importlib.metadata.distributions(path=[sysconfig.get_path("purelib")]):
        name = canonicalize_name(dist.metadata["Name"])
        allowed = [v for v, marker in pins.get(name, [])
                   if not marker or Marker(marker).evaluate(environment)]
        if allowed and Version(Version(dist.version).public) not in allowed:
            wrong.append(f"{name} {dist.version}, locked {allowed[0]}")
    assert not wrong, "; ".join(wrong)
