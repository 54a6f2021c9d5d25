"""Settings of the evaluation: the protocol's (:class:`EvalConfig`) and the NN for EHR's.

Only light imports, so ``sphr --help`` builds ``sphr evaluate``'s options from these
dataclasses (:mod:`sphr.options`) without torch or scikit-learn; the defaults live here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sphr.errors import ConfigError
from sphr.evaluate.names import CLASSIFIERS, TASKS, XGB_METHODS


@dataclass(frozen=True)
class NNForEHRConfig:
    #: Adam's learning rate
    lr: float = 1e-3
    #: Adam's L2 penalty
    weight_decay: float = 1e-3
    #: training epochs (paper: 100)
    epochs: int = 100
    #: rows per batch
    batch_size: int = 512
    #: width of the attention layer
    attention_hidden: int = 32
    #: widths of the hidden layers
    hidden: tuple[int, ...] = (64, 32)


#: K.5.1: lr 1e-3, L2 1e-3, 100 epochs
NN_EHR_CONFIG = NNForEHRConfig()


def check_xgboost_method(method: str) -> None:
    if method not in XGB_METHODS:
        raise ConfigError(f"unknown XGBoost method {method!r}: "
                          f"choose from {', '.join(XGB_METHODS)}")


@dataclass(frozen=True)
class EvalConfig:
    #: number of seeded 80/20 splits of the test participants (paper: 5)
    n_splits: int = 5
    #: share of the participants each split scores on
    test_size: float = 0.2
    #: seed of the splits and the classifiers
    seed: int = 0
    #: splits stratified by the three-class label
    stratify: bool = True
    #: the classifiers to fit
    classifiers: tuple[str, ...] = CLASSIFIERS
    #: the tasks: binary (unhealthy vs healthy) and multi (the three classes)
    tasks: tuple[str, ...] = TASKS
    #: parallel fits (None: every core this process may use)
    n_jobs: int | None = None
    #: torch / XGBoost device: auto, cpu, cuda
    device: str = "auto"
    #: the NN for EHR's settings (paper: K.5.1)
    nn: NNForEHRConfig = field(default_factory=lambda: NN_EHR_CONFIG)
    #: XGBoost's tree method on the CPU: auto (the paper's exact; hist on CUDA) or hist
    #: (several times faster at UK Biobank size)
    xgboost_method: str = "auto"

    def __post_init__(self) -> None:
        bad = [c for c in self.classifiers if c not in CLASSIFIERS]
        if bad:
            raise ConfigError(f"unknown classifier(s) {bad}: "
                              f"choose from {', '.join(CLASSIFIERS)}")
        bad = [t for t in self.tasks if t not in TASKS]
        if bad:
            raise ConfigError(f"unknown task(s) {bad}: use binary, multi")
        if not 0 < self.test_size < 1 or self.n_splits < 1:
            raise ConfigError("need n_splits >= 1 and 0 < test_size < 1")
        check_xgboost_method(self.xgboost_method)
