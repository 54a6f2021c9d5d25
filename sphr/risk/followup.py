"""The repeat visit's answers the risk stage reads: the conditions asked about and whether a
participant reports any new diagnosis. The fit trains the repeat-visit comparator on them
(:func:`sphr.risk.fit.first_visit_any`) and the validation judges the groups by them
(:mod:`sphr.risk.validation.groups`), so they live below both."""

from __future__ import annotations

import numpy as np
import pandas as pd

#: the conditions of the repeat visit's ``new_<condition>`` answers (Table 4's rows)
CONDITIONS: tuple[str, ...] = ("cancer", "diabetes", "other_serious")


def new_any_diagnosis(frame: pd.DataFrame) -> pd.Series:
    """True if any new diagnosis; False only if all three answers are known and negative."""
    cols = frame[[f"new_{c}" for c in CONDITIONS]].astype("boolean")
    anyv = cols.fillna(False).any(axis=1)
    known = cols.notna().all(axis=1)
    return pd.Series(np.where(anyv, True, np.where(known, False, pd.NA)), index=frame.index,
                     dtype="boolean")
