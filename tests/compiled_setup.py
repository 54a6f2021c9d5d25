"""What the compiled tests (``torch.compile`` on the CPU) share, so that each compiled step is
built once per test run.

Each distinct compiled step (stack size, losses, input shapes, batch size, dropout, anchor
weight, thread count) is one inductor graph of about 25 s from a cold cache on 2 cores.
Inductor's FX graph cache hands a graph built by one test (or one pytest-xdist worker) to the
next when everything it sees is the same, so the compiled tests build their steps from the
values below, and are marked ``compiled``: conftest skips them where no C++ compiler is
found, and under pytest-xdist sends their files to one worker first, so that it builds each
graph once while the other worker runs the rest (docs/BENCHMARKS.md).
"""

from __future__ import annotations

import pytest

#: a test that builds torch.compile graphs on the CPU
compiled = pytest.mark.compiled
#: the files that hold them (rootdir-relative): one pytest-xdist work unit, run first
COMPILED_FILES = ("tests/test_losses_composition.py", "tests/test_train_anchor.py",
                  "tests/test_train_fused.py", "tests/test_train_graph.py")


def node_file(nodeid: str) -> str:
    """The file (rootdir-relative) of a test's node id (``path::name[params]``)."""
    return nodeid.split("::")[0]


def in_compiled_files(nodeid: str) -> bool:
    """Whether a test's node id lies in one of COMPILED_FILES."""
    return node_file(nodeid) in COMPILED_FILES


#: the marker matrix of the compiled steps: rows x features (tests/test_train_graph.py's
#: _data and tests/test_losses_composition.py's train_data draw it)
ROWS, FEATURES = 240, 12
#: whole batches of this size (a short last batch is a graph of its own)
BATCH = 128
#: the stack of three pure losses at their defaults
PURE_THREE = (("nplb", {}), ("triplet", {}), ("distance_swap", {}))
#: the anchor's step: test_train_selection's data (300 rows, 8 features), R3's weight
ANCHOR_ROWS, ANCHOR_FEATURES, ANCHOR_WEIGHT = 300, 8, 1.0
