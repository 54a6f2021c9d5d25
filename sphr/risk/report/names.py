"""How the risk report names and orders things: the method order of every figure and
table, the references shown beside the distances, display and short names, age-group order
and the linked outcome the summary shows."""

from __future__ import annotations

import pandas as pd

from sphr.report import GROUP_COLORS
from sphr.risk.config import DISPLAY, SHORT
from sphr.risk.supervised import is_supervised

#: every figure and table lists methods in this order: the distances, then the references
METHOD_ORDER: tuple[str, ...] = ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation",
                                 "p0_euclidean", "deep_patient", "sphr", "sphr_age_line",
                                 "sphr_young", "sphr_joint", "phenoage",
                                 "supervised_xgboost", "age")
#: scores shown beside the distances for scale, not as peers: PhenoAge acceleration (what
#: researchers already use), the supervised ceilings (they see the outcome) and age alone
REFERENCES: frozenset[str] = frozenset({"phenoage", "supervised_xgboost", "age"})

#: the colour of each risk group in every figure
COLORS = GROUP_COLORS
def is_reference(method: str) -> bool:
    """A reference, not a peer of the distances: :data:`REFERENCES` and every supervised
    comparator (``supervised_death``, ...)."""
    return method in REFERENCES or is_supervised(method)


def method_name(method: str) -> str:
    if method in DISPLAY:
        return DISPLAY[method]
    if is_supervised(method):
        return f"Supervised XGBoost: {method.removeprefix('supervised_').replace('_', ' ')} " \
               "(uses outcome)"
    return method


def short_name(method: str) -> str:
    if method not in SHORT and is_supervised(method):
        return "Supervised: " + method.removeprefix("supervised_").replace("_", " ")
    return SHORT.get(method, method_name(method))


def ordered(methods) -> list[str]:
    """The report's method order; supervised comparators of linked outcomes sit where the
    repeat-visit one does (before age alone), the rest at the end."""
    present = set(methods)
    order = []
    for m in METHOD_ORDER:
        if m == "supervised_xgboost":
            order += sorted(x for x in present if is_supervised(x) and x not in METHOD_ORDER)
        order.append(m)
    return [m for m in order if m in present] + sorted(present - set(order))


def age_order(groups) -> list[str]:
    def start(g: str) -> float:
        try:
            return float(str(g).split("-")[0])
        except ValueError:
            return float("inf")

    return sorted(set(groups), key=start)


def main_outcome(linked: dict[str, pd.DataFrame] | None) -> str | None:
    """The linked outcome the summary shows: the one with the most events among the
    validated people (both sexes), so that a cohort followed for death shows death."""
    disc = (linked or {}).get("discrimination")
    if disc is None or disc.empty:
        curves = (linked or {}).get("cumulative_incidence")
        return None if curves is None or curves.empty else str(curves["outcome"].iloc[0])
    events = disc.groupby(["outcome", "sex"])["events"].max().groupby("outcome").sum()
    return str(events.idxmax()) if events.max() > 0 else None
