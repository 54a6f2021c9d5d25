"""Touchscreen answers and coded arrays (conditions, medication, illness and cancer codes) of
the synthetic cohort's visits, as UK Biobank writes them."""

from __future__ import annotations

import numpy as np


def answer(rng: np.random.Generator, truth: np.ndarray, m: int) -> np.ndarray:
    """Touchscreen answer: 1 yes, 0 no, with UKB's share of -1 do not know, -3 prefer not to
    answer."""
    ans = truth.astype(np.int64)
    u = rng.random(m)
    ans[u < 0.012] = -1
    ans[(u >= 0.012) & (u < 0.017)] = -3
    return ans


def medication_arrays(rng: np.random.Generator, male: np.ndarray, cond: dict[str, np.ndarray],
                      m: int) -> dict[str, np.ndarray]:
    """6177 (men, 3 arrays) and 6153 (women, 4 arrays): codes, -7 none, -1/-3 no answer."""
    u = rng.random(m)
    special = np.where(u < 0.006, -1.0, np.where(u < 0.01, -3.0, np.nan))
    out = {}
    for name, is_sex, codes, width in (
        ("medication_men", male, (1, 2, 3), 3),
        ("medication_women", ~male, (1, 2, 3, 4, 5), 4),
    ):
        keys = ("statin", "bp_med", "insulin", "hrt", "pill")
        arr = _codes_to_arrays({code: cond[keys[code - 1]] for code in codes}, m, width)
        arr[:, 0] = np.where(np.isnan(arr[:, 0]), -7.0, arr[:, 0])  # answered: none of the above
        answered_special = ~np.isnan(special)
        arr[answered_special] = np.nan
        arr[answered_special, 0] = special[answered_special]
        arr[~is_sex] = np.nan  # the question is asked of one sex only
        out[name] = arr
    return out


def illness_codes(rng: np.random.Generator, cond: dict[str, np.ndarray], m: int) -> np.ndarray:
    draws = {
        1065: cond["bp_med"] & (rng.random(m) < 0.85),
        1223: cond["diabetes"] & (rng.random(m) < 0.7),
        1220: cond["diabetes"] & (rng.random(m) < 0.25),
        1473: cond["statin"] & (rng.random(m) < 0.4),
        1075: cond["other_serious"] & (rng.random(m) < 0.12),
        1081: cond["other_serious"] & (rng.random(m) < 0.05),
        1111: rng.random(m) < 0.11,
    }
    return _codes_to_arrays(draws, m, 34)


def cancer_codes(rng: np.random.Generator, male: np.ndarray, cond: dict[str, np.ndarray],
                 m: int) -> np.ndarray:
    site = rng.random(m)
    has = cond["cancer"]
    draws = {
        1002: has & ~male & (site < 0.45),
        1044: has & male & (site < 0.35),
        1001: has & (site >= 0.45) & (site < 0.55),
        1022: has & (site >= 0.55) & (site < 0.7),
        1060: has & (site >= 0.7),
    }
    return _codes_to_arrays(draws, m, 6)


def medication_codes(rng: np.random.Generator, cond: dict[str, np.ndarray],
                     m: int) -> np.ndarray:
    statin_kind = rng.random(m) < 0.7
    draws = {
        1140861958: cond["statin"] & statin_kind,
        1141146234: cond["statin"] & ~statin_kind,
        1140884600: cond["diabetes"] & ~cond["insulin"] & (rng.random(m) < 0.6),
        1140883066: cond["insulin"],
        1140866738: cond["bp_med"] & (rng.random(m) < 0.5),
        1140860806: cond["bp_med"] & (rng.random(m) < 0.5),
        1140868226: rng.random(m) < 0.15,
        1140852976: rng.random(m) < 0.2,
    }
    return _codes_to_arrays(draws, m, 48)


def _codes_to_arrays(draws: dict[int, np.ndarray], m: int, width: int) -> np.ndarray:
    """Left-align each participant's codes into ``width`` array slots (NaN = empty)."""
    codes = np.array(list(draws), dtype=float)
    mask = np.stack(list(draws.values()), axis=1)
    # stable sort puts the present codes first, in catalog order
    order = np.argsort(~mask, axis=1, kind="stable")
    ordered = np.where(np.take_along_axis(mask, order, axis=1), codes[order], np.nan)
    out = np.full((m, width), np.nan)
    k = min(width, ordered.shape[1])
    out[:, :k] = ordered[:, :k]
    return out
