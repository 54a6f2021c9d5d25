"""The units check of new people: a fitted feature whose new values fall mostly outside the
range seen in training is refused (module docstring of :mod:`sphr.risk.model`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sphr.cohorts.normalize import QuantileNormalizer
from sphr.data.fields import BY_NAME
from sphr.errors import InputError

#: share of a feature's new values outside the training range that means "wrong units"
OUT_OF_RANGE_SHARE = 0.5


def ukb_field(name: str) -> str:
    """The UKB field of a feature as errors name it (``30740-0.0 (glucose)``)."""
    f = BY_NAME.get(name)
    return f"{f.id}-0.0 ({name})" if f else name


def check_units(frame: pd.DataFrame, norm: QuantileNormalizer, export: Path | None, *,
                allow_out_of_range: bool = False) -> dict[str, float]:
    """Share of values outside the training range per feature; refuse the implausible ones."""
    shares = {}
    lo, hi = norm.quantiles_[0], norm.quantiles_[-1]
    for j, name in enumerate(norm.features_):
        v = frame[name].to_numpy(float)
        v = v[~np.isnan(v)]
        if v.size == 0:
            continue
        out = (v < lo[j]) | (v > hi[j])
        shares[name] = float(out.mean())
        if shares[name] > OUT_OF_RANGE_SHARE and not allow_out_of_range:
            med, ref = float(np.median(v)), float(np.median(norm.quantiles_[:, j]))
            ratio = med / ref if ref else float("nan")
            unit = getattr(BY_NAME.get(name), "unit", "")
            raise InputError(
                f"{out.sum()} of {v.size} values ({shares[name]:.0%}) are outside the range "
                f"the model was fitted on [{lo[j]:.4g}, {hi[j]:.4g}] {unit}; median {med:.4g} vs "
                f"{ref:.4g} in training (ratio {ratio:.3g}): wrong units (e.g. mg/dL instead of "
                "mmol/L)? Convert, or pass --allow-out-of-range", file=export,
                field=ukb_field(name))
    return shares
