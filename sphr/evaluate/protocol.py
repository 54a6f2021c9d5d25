"""The paper's protocol: five seeded 80/20 splits of the embedded *test* participants.

For each representation, classifier, task (binary: unhealthy vs healthy;
multi: unhealthy / apparently healthy / BFH) and split, the classifier is
fitted on the split's 80% and scored on its 20% with weighted F1 and micro F1.

**Decision**: splits are stratified by the three-class label (the paper says
"randomly split"; stratifying keeps the small BFH class in every held-out
part and lowers the split-to-split SD without favouring any representation).
Split i uses seed ``seed + i``; the same five splits serve every
representation, classifier and task, so the columns of a table are paired.

Independent fits run in parallel across cores (joblib, one thread each, so
workers do not oversubscribe the cores); the longest jobs start first. KNN
does one neighbour search per split and votes for both tasks; NN for EHR trains
its 5 splits x 2 tasks as one stacked model (:mod:`sphr.evaluate.nn_ehr`). On
CUDA, NN for EHR and XGBoost run in this process on the GPU while KNN and LDA
use the CPU workers.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from sklearn.metrics import f1_score
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

from sphr.errors import ConfigError, InputError
from sphr.evaluate.classifiers import knn_vote, make_classifier
from sphr.evaluate.config import EvalConfig
from sphr.evaluate.names import CLASSIFIERS, N_CLASSES, TASKS
from sphr.labels import to_binary
from sphr.progress import progress

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

Split = tuple[np.ndarray, np.ndarray]


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def task_labels(labels: np.ndarray, task: str) -> np.ndarray:
    labels = np.asarray(labels)
    return to_binary(labels).astype(np.int64) if task == "binary" else labels.astype(np.int64)


def make_splits(labels: np.ndarray, *, n_splits: int = 5, test_size: float = 0.2, seed: int = 0,
                stratify: bool = True) -> list[Split]:
    """``n_splits`` (train, held-out) index pairs; split i is seeded with ``seed + i``."""
    labels = np.asarray(labels)
    out = []
    for i in range(n_splits):
        cls = StratifiedShuffleSplit if stratify else ShuffleSplit
        splitter = cls(n_splits=1, test_size=test_size, random_state=seed + i)
        try:
            tr, te = next(splitter.split(np.zeros((len(labels), 1)), labels))
        except ValueError as exc:  # e.g. a class with a single member
            raise InputError("cannot make a stratified split of the test participants: "
                             f"{exc}") from exc
        out.append((np.sort(tr), np.sort(te)))
    return out


@dataclass(frozen=True)
class _Job:
    representation: str
    classifier: str
    splits: tuple[int, ...]
    tasks: tuple[str, ...]
    cost: float
    on_device: bool = False


def _plan(shapes: Mapping[str, tuple[int, int]], splits: Sequence[Split], cfg: EvalConfig,
          gpu: bool) -> list[_Job]:
    n_tr, n_te = len(splits[0][0]), len(splits[0][1])
    S = tuple(range(len(splits)))
    jobs = []
    for rep, (_, d) in shapes.items():
        for clf in cfg.classifiers:
            if clf == "nn_ehr":  # all splits and tasks, stacked (cost: rough seconds on 1 core)
                nn = cfg.nn
                per = 2 * d * nn.attention_hidden + d * nn.hidden[0] + sum(
                    a * b for a, b in itertools.pairwise(nn.hidden))
                cost = 2e-10 * n_tr * len(S) * len(cfg.tasks) * nn.epochs * per
                jobs.append(_Job(rep, clf, S, cfg.tasks, cost, on_device=gpu))
            elif clf == "lda":
                jobs.append(_Job(rep, clf, S, cfg.tasks, 1e-8 * n_tr * d * d * len(S)))
            elif clf == "knn":
                for s in S:
                    jobs.append(_Job(rep, clf, (s,), cfg.tasks, 1.2e-10 * n_tr * n_te * d))
            else:  # xgboost: one job per split and task (the multi-class fit grows 3 trees a round)
                for s in S:
                    for t in cfg.tasks:
                        jobs.append(_Job(rep, clf, (s,), (t,),
                                         1e-7 * n_tr * d * N_CLASSES[t] if t == "multi"
                                         else 1e-7 * n_tr * d, on_device=gpu))
    return sorted(jobs, key=lambda j: -j.cost)


def _scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    return {
        "weighted_f1": float(f1_score(y_true, y_pred, average="weighted", zero_division=0)),
        "micro_f1": float(f1_score(y_true, y_pred, average="micro", zero_division=0)),
    }


def _run_job(job: _Job, X: np.ndarray, labels: np.ndarray, splits: Sequence[Split],
             cfg: EvalConfig, threads: int, device: str) -> list[dict[str, Any]]:
    """Fit and score one job; returns one record per (task, split) with its predictions."""
    import torch
    from threadpoolctl import threadpool_limits

    prev = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            return _run_job_inner(job, X, labels, splits, cfg, threads, device)
    finally:
        torch.set_num_threads(prev)


def _record(job: _Job, task: str, s: int, y_true: np.ndarray, y_pred: np.ndarray,
            fit_s: float, n_train: int) -> dict[str, Any]:
    return {"representation": job.representation, "classifier": job.classifier, "task": task,
            "split": s, **_scores(y_true, y_pred), "n_train": n_train, "n_test": len(y_true),
            "fit_s": fit_s, "predictions": np.asarray(y_pred, dtype=np.int8)}


def _run_job_inner(job: _Job, X: np.ndarray, labels: np.ndarray, splits: Sequence[Split],
                   cfg: EvalConfig, threads: int, device: str) -> list[dict[str, Any]]:
    y = {t: task_labels(labels, t) for t in job.tasks}
    out = []
    if job.classifier == "nn_ehr":
        from sphr.evaluate.nn_ehr import fit_predict_many

        pairs = [(t, s) for t in job.tasks for s in job.splits]
        t0 = time.perf_counter()
        preds = fit_predict_many(
            X, [y[t] for t, _ in pairs], [splits[s][0] for _, s in pairs],
            [splits[s][1] for _, s in pairs], n_classes=[N_CLASSES[t] for t, _ in pairs],
            config=cfg.nn, seed=cfg.seed, device=device)
        fit_s = (time.perf_counter() - t0) / len(pairs)
        for (t, s), p in zip(pairs, preds, strict=True):
            tr, te = splits[s]
            out.append(_record(job, t, s, y[t][te], p, fit_s, len(tr)))
        return out
    for s in job.splits:
        tr, te = splits[s]
        if job.classifier == "knn":
            # one neighbour search, a vote per task (same rule as KNeighborsClassifier.predict)
            t0 = time.perf_counter()
            knn = make_classifier("knn", "multi", n_jobs=threads).fit(X[tr], labels[tr])
            neigh = knn.kneighbors(X[te], return_distance=False)
            fit_s = (time.perf_counter() - t0) / len(job.tasks)
            for t in job.tasks:
                out.append(_record(job, t, s, y[t][te], knn_vote(neigh, y[t][tr], N_CLASSES[t]),
                                   fit_s, len(tr)))
            continue
        for t in job.tasks:
            t0 = time.perf_counter()
            model = make_classifier(job.classifier, t, seed=cfg.seed, device=device,
                                    n_jobs=threads, nn_config=cfg.nn,
                                    xgboost_method=cfg.xgboost_method)
            model.fit(X[tr], y[t][tr])
            pred = np.asarray(model.predict(X[te])).astype(np.int64).ravel()
            out.append(_record(job, t, s, y[t][te], pred, time.perf_counter() - t0, len(tr)))
    return out


@dataclass
class EvalResult:
    scores: pd.DataFrame  # one row per representation, classifier, task, split
    splits: list[Split]
    predictions: dict[tuple[str, str, str, int], np.ndarray]
    wall_s: float
    settings: dict[str, Any]
    labels: np.ndarray  # the participants' classes (0/1/2), rows aligned with the embeddings


def _same_splits(a: Sequence[Split], b: Sequence[Split]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1])
                                    for x, y in zip(a, b, strict=True))


def _reusable(prior: EvalResult, same_as: Mapping[str, str], labels: np.ndarray,
              splits: Sequence[Split], settings: Mapping[str, Any], seed: int
              ) -> dict[tuple[str, str, str, int], dict[str, Any]]:
    """The records of ``prior`` this call would recompute, keyed as this call's records:
    ``same_as[name]`` is the representation of ``prior`` whose embedding equals ``name``'s
    here; only on the same participants, labels, splits and seed, and only for classifiers
    whose settings are unchanged (every fit is seeded, so a refit gives the same record)."""
    if (not same_as or prior.settings["seed"] != seed or not _same_splits(prior.splits, splits)
            or not np.array_equal(prior.labels, labels)):
        return {}
    same_clf = {c for c, v in settings.items() if prior.settings["classifiers"].get(c) == v}
    out = {}
    for r in prior.scores.to_dict("records"):
        for name, source in same_as.items():
            if r["representation"] == source and r["classifier"] in same_clf:
                key = (name, r["classifier"], r["task"], int(r["split"]))
                pred = prior.predictions[(source, r["classifier"], r["task"], r["split"])]
                out[key] = {**r, "representation": name, "predictions": pred}
    return out


def _check_embeddings(embeddings: Mapping[str, np.ndarray], labels: np.ndarray) -> None:
    if not embeddings:
        raise ConfigError("no representations to evaluate")
    for name, Z in embeddings.items():
        if Z.ndim != 2 or Z.shape[0] != len(labels):
            raise InputError(f"representation {name}: {Z.shape} rows vs {len(labels)} labels")
        if not np.isfinite(Z).all():
            raise InputError(f"representation {name} has non-finite values")


def _run_jobs(jobs: Sequence[_Job], X: Mapping[str, np.ndarray], labels: np.ndarray,
              splits: Sequence[Split], cfg: EvalConfig, n_jobs: int, dev: torch.device
              ) -> list[dict[str, Any]]:
    """Every job's records: CPU jobs in ``n_jobs`` worker processes, in the order they finish;
    device jobs here, one after another."""
    from joblib import Parallel, delayed

    records: list[dict[str, Any]] = []
    bar = progress(desc="evaluate", total=len(jobs), unit="job")
    # one thread per fit, always: OpenMP fits (XGBoost, BLAS) that share busy cores spin
    # and slow down many-fold (an XGBoost fit took 20x longer with 2 threads on 2 loaded cores)
    threads = 1
    cpu_jobs = [j for j in jobs if not j.on_device]
    if cpu_jobs:
        parallel = Parallel(n_jobs=n_jobs, batch_size=1, return_as="generator_unordered",
                            max_nbytes="1M")
        for res in parallel(delayed(_run_job)(j, X[j.representation], labels, splits, cfg,
                                              threads, "cpu") for j in cpu_jobs):
            records.extend(res)
            bar.update(1)
    for j in (j for j in jobs if j.on_device):  # GPU work stays in this process, one at a time
        records.extend(_run_job(j, X[j.representation], labels, splits, cfg, 1, str(dev)))
        bar.update(1)
    bar.close()
    return records


def _score_table(records: list[dict[str, Any]], representations: Sequence[str]
                 ) -> tuple[pd.DataFrame, dict[tuple[str, str, str, int], np.ndarray]]:
    """(scores, predictions): the records in a fixed order (representations as given, then
    classifier, task, split), whatever order the workers finished in."""
    predictions = {
        (r["representation"], r["classifier"], r["task"], r["split"]): r.pop("predictions")
        for r in records
    }
    scores = pd.DataFrame.from_records(records)
    order = {n: i for i, n in enumerate(representations)}
    scores = (
        scores.assign(
            _r=scores["representation"].map(order),
            _c=scores["classifier"].map({c: i for i, c in enumerate(CLASSIFIERS)}),
            _t=scores["task"].map({t: i for i, t in enumerate(TASKS)}),
        )
        .sort_values(["_r", "_c", "_t", "split"])
        .drop(columns=["_r", "_c", "_t"])
        .reset_index(drop=True)
    )
    return scores, predictions


def classify_embeddings(embeddings: Mapping[str, np.ndarray], labels: np.ndarray,
                        config: EvalConfig | None = None, *,
                        splits: Sequence[Split] | None = None, prior: EvalResult | None = None,
                        same_as: Mapping[str, str] | None = None) -> EvalResult:
    """Run the protocol on each representation's embedding of the same participants.

    ``embeddings[name]`` is (n, d_name), rows aligned with ``labels`` (0/1/2).
    ``prior`` / ``same_as``: an earlier result and, by name here, the representation there
    with the identical embedding (e.g. the loss comparison's NPLB model is the SPHR model):
    its records for the same splits and classifier settings are copied, not refitted
    (``settings['reused']`` says which).
    """
    from sphr.device import resolve_device
    from sphr.evaluate.classifiers import classifier_settings

    cfg = config or EvalConfig()
    labels = np.asarray(labels).astype(np.int64)
    _check_embeddings(embeddings, labels)
    if splits is None:
        splits = make_splits(labels, n_splits=cfg.n_splits, test_size=cfg.test_size,
                             seed=cfg.seed, stratify=cfg.stratify)
    splits = list(splits)
    dev = resolve_device(cfg.device)
    n_jobs = cfg.n_jobs or available_cores()
    jobs = _plan({k: v.shape for k, v in embeddings.items()}, splits, cfg, dev.type == "cuda")
    clf_settings = classifier_settings(cfg.device, cfg.nn, cfg.xgboost_method)
    known = _reusable(prior, same_as or {}, labels, splits, clf_settings,
                      cfg.seed) if prior is not None else {}
    reused = [j for j in jobs if all((j.representation, j.classifier, t, s) in known
                                     for t in j.tasks for s in j.splits)]
    jobs = [j for j in jobs if j not in reused]
    X = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in embeddings.items()}

    t0 = time.perf_counter()
    records: list[dict[str, Any]] = [known[(j.representation, j.classifier, t, s)]
                                     for j in reused for t in j.tasks for s in j.splits]
    records.extend(_run_jobs(jobs, X, labels, splits, cfg, n_jobs, dev))
    wall = time.perf_counter() - t0

    scores, predictions = _score_table(records, list(embeddings))
    settings = {
        "n_splits": len(splits), "test_size": cfg.test_size, "seed": cfg.seed,
        "split_seeds": [cfg.seed + i for i in range(len(splits))], "stratified": cfg.stratify,
        "n_participants": len(labels), "n_train_per_split": len(splits[0][0]),
        "n_test_per_split": len(splits[0][1]), "n_jobs": n_jobs, "device": str(dev),
        "class_counts": {int(c): int((labels == c).sum()) for c in np.unique(labels)},
        "classifiers": clf_settings,
        "sd": "sample SD over splits (ddof=1)",
    }
    if reused:
        settings["reused"] = {name: {"from": same_as[name], "classifiers": sorted(
            {j.classifier for j in reused if j.representation == name})}
            for name in dict.fromkeys(j.representation for j in reused)}
    return EvalResult(scores=scores, splits=splits, predictions=predictions, wall_s=wall,
                      settings=settings, labels=labels)


def summarize(scores: pd.DataFrame, by: Sequence[str] = ("representation", "classifier", "task")
              ) -> pd.DataFrame:
    """Mean and SD (ddof=1) over splits of each metric, long format (one row per metric)."""
    by = list(by)
    long = scores.melt(id_vars=[*by, "split"], value_vars=["weighted_f1", "micro_f1"],
                       var_name="metric", value_name="value")
    g = long.groupby([*by, "metric"], sort=False)["value"]
    out = g.agg(mean="mean", sd=lambda v: float(np.std(v, ddof=1)) if len(v) > 1 else float("nan"),
                n_splits="count").reset_index()
    return out


def reference_scores(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray,
                     y_test: np.ndarray, splits: Sequence[Split], config: EvalConfig | None = None
                     ) -> pd.DataFrame:
    """The fair reference row: each classifier trained on the *training partition's* raw
    (normalized) features and scored on the same held-out 20% parts of the test participants
    as the protocol's rows.

    The paper's protocol fits the classifiers on 80% of the *test* participants; SPHR's
    embedding has meanwhile learnt from every training label (through the triplets), so a
    baseline fitted on the test 80% has far fewer labels than SPHR used. This row gives raw
    features the same labels (docs/METHODS.md, "A fair reference row"). NN for EHR is left
    out: one fit outside the protocol's stacked trainer costs ~80 s on 2 cores.
    """
    cfg = config or EvalConfig()
    records = []
    for clf in (c for c in cfg.classifiers if c != "nn_ehr"):
        for task in cfg.tasks:
            model = make_classifier(clf, task, seed=cfg.seed, device=cfg.device,
                                    nn_config=cfg.nn, xgboost_method=cfg.xgboost_method)
            model.fit(np.asarray(X_train, np.float32), task_labels(y_train, task))
            pred = np.asarray(model.predict(np.asarray(X_test, np.float32)))
            truth = task_labels(y_test, task)
            for s, (_, held) in enumerate(splits):
                records.append({"representation": "raw_training_partition", "classifier": clf,
                                "task": task, "split": s, "n_train": len(y_train),
                                **_scores(truth[held], pred[held])})
    return pd.DataFrame.from_records(records)
