"""SPHR as a representation: a scikit-learn-style estimator around the trainer.

:class:`SPHREmbedding` implements the interface every representation shares
(:class:`sphr.representation.Representation`: ``fit`` / ``transform`` / ``save`` /
``load`` / ``n_features_in_``), so the evaluation and the risk stage take SPHR as they take
PCA or DeepPatient. ``fit`` is :func:`sphr.train.trainer.train_sphr` (the same weights for
the same data and seed), ``transform`` is :func:`sphr.train.model_io.embed`, and ``save`` /
``load`` read and write ``model.pt`` as ``sphr train`` always has, so a model trained
before this class existed loads as one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from sphr.errors import InputError, SphrError
from sphr.representation import Representation, as_matrix
from sphr.train.config import TrainConfig
from sphr.train.model_io import embed, load_checkpoint, save_model

if TYPE_CHECKING:
    from sphr.train.tracking import RowFacts
    from sphr.train.trainer import EpochCallback, TrainResult


class SPHREmbedding(Representation):
    """The NPLB-trained SPHR network as a representation.

    Parameter: ``config``, the training settings (:class:`~sphr.train.config.TrainConfig`;
    ``None``: its defaults), whose ``device`` is where it trains and embeds (the one source of
    the device). Fitted attributes: ``model_`` (the network, CPU, eval mode), ``config_`` (the
    settings it was trained with), ``n_features_in_``, ``feature_names_in_`` (when known),
    ``n_components_`` (the embedding width) and ``training_`` (the trainer's record: loss
    curve, model selection, timings, device; ``None`` for a model read from a file, which
    keeps no such record).
    """

    def __init__(self, config: TrainConfig | None = None) -> None:
        self.config = config

    def fit(self, X: np.ndarray, y: np.ndarray | None = None, *, triplets: np.ndarray,
            labels: np.ndarray | None = None, augmented: np.ndarray | None = None,
            feature_names: Sequence[str] | None = None,
            checkpoint_dir: str | Path | None = None, resume: bool = False,
            on_epoch: EpochCallback | None = None, facts: RowFacts | None = None
            ) -> SPHREmbedding:
        """Train on ``triplets`` (anchor, positive, negative row indices into ``X``).

        ``labels`` (or ``y``: one class per row) feed the label-aware losses and model
        selection; ``augmented`` marks the rows model selection must not hold out;
        ``feature_names`` (or a DataFrame's columns) are saved with the model. Checkpoints
        and ``resume`` as in :func:`~sphr.train.trainer.train_sphr`; ``facts`` (ages and
        death follow-up per row) feed the per-epoch tracking (:mod:`sphr.train.tracking`).
        """
        if feature_names is None and hasattr(X, "columns"):
            feature_names = [str(c) for c in X.columns]
        X = as_matrix(X, what="SPHREmbedding.fit input")
        # the trainer (and the losses it builds) only where a model is trained: loading and
        # embedding, what the risk stage and `sphr score` do, need the network alone
        from sphr.train.trainer import train_sphr

        if labels is None:
            labels = y
        config = self.config if self.config is not None else TrainConfig()
        result: TrainResult = train_sphr(X, triplets, config, labels=labels,
                                         checkpoint_dir=checkpoint_dir, resume=resume,
                                         on_epoch=on_epoch, augmented=augmented,
                                         facts=facts)
        self._set_fitted(result.model, config, feature_names)
        self.training_: TrainResult | None = result
        return self

    @classmethod
    def from_training(cls, result: TrainResult, config: TrainConfig,
                      feature_names: Sequence[str] | None = None) -> SPHREmbedding:
        """The fitted estimator of a model the trainer trained elsewhere (one of a stack,
        :func:`~sphr.train.trainer.train_jobs`), as :meth:`fit` would have left it."""
        out = cls(config)
        out._set_fitted(result.model, config, feature_names)
        out.training_ = result
        return out

    def _set_fitted(self, model: Any, config: TrainConfig, feature_names: Sequence[str] | None
                    ) -> None:
        self.model_ = model
        self.config_ = config
        self.n_features_in_ = int(model.n_features)
        self.n_components_ = int(model.out)
        if feature_names is not None:
            names = np.asarray([str(f) for f in feature_names], dtype=object)
            if len(names) != self.n_features_in_:
                raise InputError(f"{len(names)} feature names for {self.n_features_in_} "
                                 "features", field="feature_names")
            self.feature_names_in_ = names

    def _transform(self, X: np.ndarray) -> np.ndarray:
        # a loaded model embeds where ``load`` was asked to (its ``config``), else where the
        # settings it was trained with say
        config = self.config if self.config is not None else self.config_
        return embed(self.model_, X, device=config.device)

    def save(self, path: str | Path) -> Path:
        """``model.pt`` (``{"state_dict", "config", "feature_names", ...}``), atomically;
        ``path`` is the file or its folder."""
        check_is_fitted(self, "model_")
        names = getattr(self, "feature_names_in_", None)
        if names is None:  # unnamed columns: the names a DataFrame without header would get
            names = [f"x{i}" for i in range(self.n_features_in_)]
        return save_model(self.model_, self.config_, list(names), path)

    @classmethod
    def load(cls, path: str | Path, device: str | None = None) -> SPHREmbedding:
        """The model in ``model.pt`` (or its folder), written by :meth:`save` or by
        ``sphr train`` at any version; ``device``: where it embeds (None: the saved
        settings' device). ``config_`` stays the settings it was trained with."""
        model, meta = load_checkpoint(path)
        try:
            config = TrainConfig.from_dict(meta.get("config") or {})
        except SphrError as exc:
            raise InputError(f"not an SPHR model file (its config: {exc})", file=path) from exc
        out = cls(config=dataclasses.replace(config, device=device) if device else config)
        out._set_fitted(model, config, meta.get("feature_names") or None)
        out.training_ = None
        return out
