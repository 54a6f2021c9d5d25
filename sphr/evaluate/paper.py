"""The paper's published numbers (NPLB, ICLR 2023 submission), transcribed for our tables.

Representation x classifier: Table 2 (women; weighted F1; binary and
multi-class), Tables A3 / A4 (men, binary; weighted / micro F1), A5 / A6 (men,
multi-class; weighted / micro F1). The paper has no micro-F1 tables for women,
no ICA for women and no DiffMap for men: those cells are "-".
Loss x task: Table 3 (XGBoost weighted F1; binary and multi) and Table A2
(multi-class only, adds LiftedStruct and InfoNCE). Values are (mean, SD).
"""

from __future__ import annotations

from sphr.train.config import COMPARISON_LOSSES

Key = tuple[str, str, str, str, str]  # sex, task, metric, representation, classifier

_CLASSIFIERS = ("knn", "lda", "nn_ehr", "xgboost")

# {(sex, task, metric, table): {representation: [(mean, sd) for KNN, LDA, NN for EHR, XGBoost]}}
_REPRESENTATION_TABLES: dict[tuple[str, str, str, str], dict[str, list[tuple[float, float]]]] = {
    ("female", "binary", "weighted_f1", "Table 2"): {
        "raw": [(0.6093, 0.002), (0.6189, 0.001), (0.6214, 0.006), (0.6113, 0.003)],
        "pca": [(0.6067, 0.002), (0.6144, 0.002), (0.6127, 0.006), (0.6088, 0.002)],
        "diffmap": [(0.6281, 0.003), (0.6309, 0.002), (0.6228, 0.003), (0.6196, 0.005)],
        "deep_patient": [(0.6397, 0.003), (0.6404, 0.005), (0.6315, 0.001), (0.6311, 0.003)],
        "sphr": [(0.7180, 0.002), (0.7189, 0.002), (0.7142, 0.003), (0.7223, 0.002)],
    },
    ("female", "multi", "weighted_f1", "Table 2"): {
        "raw": [(0.5346, 0.002), (0.5501, 0.002), (0.5374, 0.004), (0.5190, 0.003)],
        "pca": [(0.5341, 0.002), (0.5432, 0.001), (0.5473, 0.003), (0.5082, 0.003)],
        "diffmap": [(0.5646, 0.006), (0.5510, 0.007), (0.5541, 0.004), (0.5390, 0.002)],
        "deep_patient": [(0.5740, 0.004), (0.5637, 0.003), (0.5774, 0.004), (0.5688, 0.002)],
        "sphr": [(0.6534, 0.002), (0.6640, 0.001), (0.6667, 0.002), (0.6642, 0.002)],
    },
    ("male", "binary", "weighted_f1", "Table A3"): {
        "raw": [(0.6200, 0.004), (0.6275, 0.005), (0.5926, 0.014), (0.5975, 0.004)],
        "ica": [(0.6167, 0.003), (0.6227, 0.004), (0.6301, 0.018), (0.5804, 0.004)],
        "pca": [(0.6077, 0.003), (0.6227, 0.003), (0.6105, 0.021), (0.6157, 0.004)],
        "deep_patient": [(0.6224, 0.001), (0.6385, 0.002), (0.6148, 0.032), (0.6101, 0.004)],
        "sphr": [(0.8163, 0.002), (0.8141, 0.002), (0.8092, 0.011), (0.8160, 0.003)],
    },
    ("male", "binary", "micro_f1", "Table A4"): {
        "raw": [(0.6490, 0.004), (0.6529, 0.004), (0.6345, 0.003), (0.6573, 0.002)],
        "ica": [(0.6480, 0.004), (0.6509, 0.002), (0.6419, 0.003), (0.6488, 0.003)],
        "pca": [(0.6469, 0.003), (0.6509, 0.002), (0.6380, 0.003), (0.6469, 0.003)],
        "deep_patient": [(0.6639, 0.001), (0.6664, 0.003), (0.6527, 0.005), (0.6701, 0.003)],
        "sphr": [(0.8185, 0.002), (0.8138, 0.002), (0.8176, 0.004), (0.8180, 0.003)],
    },
    ("male", "multi", "weighted_f1", "Table A5"): {
        "raw": [(0.5852, 0.005), (0.6011, 0.004), (0.5926, 0.004), (0.5439, 0.005)],
        "pca": [(0.5820, 0.005), (0.5953, 0.003), (0.5925, 0.004), (0.5583, 0.004)],
        "ica": [(0.5734, 0.003), (0.5952, 0.002), (0.5838, 0.003), (0.5587, 0.005)],
        "deep_patient": [(0.5834, 0.002), (0.6080, 0.003), (0.5918, 0.001), (0.5896, 0.003)],
        "sphr": [(0.7819, 0.001), (0.7865, 0.002), (0.7884, 0.005), (0.7845, 0.003)],
    },
    ("male", "multi", "micro_f1", "Table A6"): {
        "raw": [(0.6364, 0.004), (0.6405, 0.003), (0.6345, 0.003), (0.6409, 0.003)],
        "pca": [(0.6355, 0.004), (0.6393, 0.002), (0.6342, 0.003), (0.6380, 0.003)],
        "ica": [(0.6358, 0.004), (0.6392, 0.003), (0.6342, 0.004), (0.6384, 0.003)],
        "deep_patient": [(0.6358, 0.001), (0.6383, 0.003), (0.6438, 0.001), (0.6403, 0.002)],
        "sphr": [(0.7921, 0.001), (0.7811, 0.002), (0.7930, 0.003), (0.7940, 0.003)],
    },
}

#: (sex, task, metric, representation, classifier) -> (mean, sd, table)
PAPER_REPRESENTATION: dict[Key, tuple[float, float, str]] = {
    (sex, task, metric, rep, clf): (*vals[i], table)
    for (sex, task, metric, table), reps in _REPRESENTATION_TABLES.items()
    for rep, vals in reps.items()
    for i, clf in enumerate(_CLASSIFIERS)
}

#: (sex, task, loss) -> (mean, sd, table); XGBoost, weighted F1
PAPER_LOSSES: dict[tuple[str, str, str], tuple[float, float, str]] = {}
_TABLE3 = {  # Table 3: triplet, N-Pair, MDR, distance swap, NPLB
    ("female", "binary"): [(0.6592, 0.002), (0.6727, 0.004), (0.6612, 0.003), (0.6041, 0.002),
                           (0.7223, 0.002)],
    ("female", "multi"): [(0.5874, 0.001), (0.6064, 0.002), (0.6047, 0.005), (0.5416, 0.004),
                          (0.6642, 0.002)],
    ("male", "binary"): [(0.7174, 0.001), (0.7423, 0.005), (0.7208, 0.002), (0.6563, 0.003),
                         (0.8160, 0.003)],
    ("male", "multi"): [(0.6861, 0.003), (0.6961, 0.002), (0.6964, 0.002), (0.6628, 0.002),
                        (0.7845, 0.003)],
}
for (_sex, _task), _vals in _TABLE3.items():
    for _loss, _v in zip(("triplet", "npair", "mdr", "distance_swap", "nplb"), _vals, strict=True):
        PAPER_LOSSES[(_sex, _task, _loss)] = (*_v, "Table 3")
# Table A2 (multi-class) adds LiftedStruct and InfoNCE; the other five repeat Table 3
PAPER_LOSSES[("female", "multi", "lifted_struct")] = (0.5994, 0.003, "Table A2")
PAPER_LOSSES[("female", "multi", "infonce")] = (0.6103, 0.002, "Table A2")
PAPER_LOSSES[("male", "multi", "lifted_struct")] = (0.6989, 0.004, "Table A2")
PAPER_LOSSES[("male", "multi", "infonce")] = (0.6816, 0.003, "Table A2")

#: the paper's column order in Table 3 / A2 (the training stage compares them in this order),
#: and display names
LOSSES: tuple[str, ...] = COMPARISON_LOSSES
LOSS_NAMES: dict[str, str] = {
    "triplet": "Trad. Triplet", "npair": "N-Pair", "lifted_struct": "LiftedStruct", "mdr": "MDR",
    "infonce": "InfoNCE", "distance_swap": "Distance Swap", "nplb": "NPLB",
}


def paper_representation(sex: str, task: str, metric: str, representation: str,
                         classifier: str) -> tuple[float, float, str] | None:
    return PAPER_REPRESENTATION.get((sex, task, metric, representation, classifier))


def paper_loss(sex: str, task: str, loss: str) -> tuple[float, float, str] | None:
    return PAPER_LOSSES.get((sex, task, loss))
