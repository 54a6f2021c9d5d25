"""The paper's risk-validation numbers: Table 4 (women) and Table A7 (men), as published.

Read from the text of the paper's PDF (its table cells come out column by
column; the order below is our reconstruction; docs/METHODS.md#published-numbers).
Only the top three methods are published; the paper has no numbers for
Euclidean-on-raw or Mahalanobis, and Table A7 gives no group shares. Values
are strings because some cells read "<0.1%".
"""

from __future__ import annotations

#: paper method -> our method name
PAPER_METHODS: dict[str, str] = {"P0 (Not-Transformed)": "p0_euclidean",
                                 "DeepPatient": "deep_patient", "SPHR (Ours)": "sphr"}

_N, _LR, _HR = "Normal", "Lower Risk", "Higher Risk"


def _row(n: str, lr: str, hr: str) -> dict[str, str]:
    return {_N: n, _LR: lr, _HR: hr}


PAPER_TABLES: dict[str, dict[str, dict[str, dict[str, str]]]] = {
    "female": {  # Table 4
        "p0_euclidean": {"share": _row("74.71%", "5.82%", "16.26%"),
                         "cancer": _row("3.17%", "0.92%", "2.83%"),
                         "diabetes": _row("1.26%", "1.85%", "1.41%"),
                         "other_serious": _row("5.66%", "9.29%", "8.77%")},
        "deep_patient": {"share": _row("77.19%", "7.61%", "15.2%"),
                         "cancer": _row("3.21%", "<0.1%", "<0.1%"),
                         "diabetes": _row("0.51%", "<0.1%", "<0.1%"),
                         "other_serious": _row("9.3%", "4.98%", "6.81%")},
        "sphr": {"share": _row("68.35%", "6.94%", "24.71%"),
                 "cancer": _row("1.67%", "2.85%", "3.22%"),
                 "diabetes": _row("0.50%", "<0.1%", "4.80%"),
                 "other_serious": _row("1.47%", "8.33%", "11.65%")},
    },
    "male": {  # Table A7 (no group shares published)
        "p0_euclidean": {"cancer": _row("2.76%", "0.62%", "2.75%"),
                         "diabetes": _row("1.88%", "1.94%", "1.63%"),
                         "other_serious": _row("9.57%", "6.44%", "9.47%")},
        "deep_patient": {"cancer": _row("2.86%", "0.33%", "<0.1%"),
                         "diabetes": _row("0.85%", "0.73%", "1.62%"),
                         "other_serious": _row("9.33%", "4.41%", "7.28%")},
        "sphr": {"cancer": _row("1.52%", "2.96%", "4.14%"),
                 "diabetes": _row("0.73%", "0.55%", "5.29%"),
                 "other_serious": _row("2.73%", "8.60%", "12.45%")},
    },
}

#: Appendix C: Pearson r (p) of SPHR health distance vs time to diagnosis (sex not stated)
PAPER_TIME_CORRELATION: dict[str, tuple[float, float]] = {
    "other_serious": (-0.72, 0.00042), "diabetes": (-0.64, 0.0071), "cancer": (-0.20, 0.025),
}


def paper_cell(sex: str, method: str, row: str, group: str) -> str:
    """The published cell, or "" where the paper has none."""
    return PAPER_TABLES.get(sex, {}).get(method, {}).get(row, {}).get(group, "")
