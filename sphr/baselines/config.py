"""Settings of the baselines step that the CLI and the Dagster config expose, with their defaults.

The defaults live here and nowhere else: :class:`~sphr.baselines.diffmap.DiffMap` and
:class:`~sphr.baselines.deep_patient.DeepPatient` take theirs from this class, and so do
``sphr baselines`` and ``sphr_dagster.assets.baselines.BaselinesConfig``.
Only light imports, so ``sphr --help`` builds its parser without scikit-learn or torch.
"""

from __future__ import annotations

from dataclasses import dataclass

#: representations this package fits, in the paper's column order (here, not in the package's
#: ``__init__``, which imports the estimators that read this module: no import circle)
BASELINES: tuple[str, ...] = ("raw", "pca", "ica", "diffmap", "deep_patient")


@dataclass(frozen=True)
class BaselinesConfig:
    #: representations to fit, in the paper's column order
    representations: tuple[str, ...] = BASELINES
    #: seed of the fits
    seed: int = 0
    #: DeepPatient's torch device: auto, cpu, cuda
    device: str = "auto"
    #: DiffMap's landmark subsample size (``DiffMap.n_landmarks``)
    diffmap_landmarks: int = 10_000
    #: DeepPatient's epochs per layer (``DeepPatient.epochs``)
    deep_patient_epochs: int = 30
    #: fit on real + augmented training rows (False: real rows only)
    use_augmented: bool = False
