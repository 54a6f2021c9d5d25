"""``sphr cohorts``: from ``baseline.parquet`` to per-sex training data.

As docs/METHODS.md describes (Cohort preparation, Partitions, Augmentation,
Triplets): completeness filter and complete cases (all participants),
drop unknown labels, then per sex: classes (unhealthy / apparently healthy /
bona fide healthy on raw P0 values), a stratified 70/30 split, a calibration
partition (20% of the training healthy classes) that no fit sees, a quantile
normalizer fitted on the real training rows, rejection-sampled augmentation
of the training partition only (raw units, then normalized), and offline
triplets as row indices into the training matrix.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from sphr.cohorts.age import assign_age_groups, group_names
from sphr.cohorts.augment import augmentation_check, copula_sample, rejection_sample
from sphr.cohorts.config import AUGMENTATIONS, TRIPLET_CLASSES, CohortConfig
from sphr.cohorts.filtering import CompletenessFilter, constant_features
from sphr.cohorts.folds import FOLD_PURPOSE, assign_folds
from sphr.cohorts.normalize import QuantileNormalizer, training_medians
from sphr.cohorts.ranges import (
    ClinicalRange,
    assign_classes,
    ranges_for,
    severity_classes,
)
from sphr.cohorts.triplets import mine_triplets
from sphr.data.fields import BY_NAME, PREDICTOR_NAMES
from sphr.errors import ConfigError, InputError
from sphr.io import staged_outputs, write_json, write_npz, write_parquets
from sphr.labels import APPARENTLY_HEALTHY, BONA_FIDE_HEALTHY, CLASS_NAMES, SEX_CODE
from sphr.layout import fold_dir

log = logging.getLogger(__name__)


@dataclass
class SexCohort:
    sex: str
    features: list[str]
    train: pd.DataFrame  # eid, age_years, age_group, label, augmented, features (normalized)
    test: pd.DataFrame
    train_raw: pd.DataFrame
    test_raw: pd.DataFrame
    calibration: pd.DataFrame
    calibration_raw: pd.DataFrame
    triplets: np.ndarray
    normalizer: QuantileNormalizer
    report: dict
    #: eid, imputed_features (count), imputed (names): the participants with a filled value
    imputed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        columns=["eid", "imputed_features", "imputed"]))
    #: the cross-fit (``config.folds`` >= 2): each participant's fold, in the frame's order,
    #: and the fold cohorts (fold k tests on fold k, fits on the others)
    fold_of: np.ndarray | None = None
    folds: list[SexCohort] = field(default_factory=list)


def _split(labels: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Stratified split; a class too small to stratify stays in training (documented)."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(labels.size)
    classes, counts = np.unique(labels, return_counts=True)
    small = np.isin(labels, classes[counts < 2])
    train, test = train_test_split(idx[~small], test_size=test_size, random_state=seed,
                                   stratify=labels[~small])
    return np.sort(np.concatenate([train, idx[small]])), np.sort(test)


def _calibration_split(labels: np.ndarray, train_idx: np.ndarray, size: float, seed: int
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(training rows kept for fitting, calibration rows): ``size`` of the training BFH and of
    the training apparently healthy, stratified by class; unhealthy rows all stay in training."""
    if not 0 <= size < 1:
        raise ConfigError(f"calibration_size must be in [0, 1), got {size}")
    healthy = train_idx[np.isin(labels[train_idx], (APPARENTLY_HEALTHY, BONA_FIDE_HEALTHY))]
    if size == 0 or healthy.size == 0:
        return train_idx, np.empty(0, dtype=train_idx.dtype)
    rng = np.random.default_rng(seed)
    calib = []
    for c in (APPARENTLY_HEALTHY, BONA_FIDE_HEALTHY):
        members = healthy[labels[healthy] == c]
        k = round(size * members.size)
        if members.size - k < 2:  # keep enough of the class to fit on
            k = max(0, members.size - 2)
        calib.append(rng.choice(members, size=k, replace=False))
    calib_idx = np.sort(np.concatenate(calib))
    return np.setdiff1d(train_idx, calib_idx), calib_idx


def _bounds(raw: np.ndarray, features: list[str], class_name: str, sex: str,
            ranges: tuple[ClinicalRange, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The class's observed min/max; for BFH the P0 ranges replace them where defined."""
    low, high = raw.min(axis=0), raw.max(axis=0)
    if class_name == "bona_fide_healthy":
        for r in ranges_for(sex, ranges):
            if r.marker not in features:
                continue
            j = features.index(r.marker)
            if r.low is not None:
                low[j] = r.low if r.low_inclusive else np.nextafter(r.low, np.inf)
            if r.high is not None:
                high[j] = r.high if r.high_inclusive else np.nextafter(r.high, -np.inf)
    return low, high


def _classes(frame: pd.DataFrame, sex: str, ranges: tuple[ClinicalRange, ...]
             ) -> tuple[np.ndarray, np.ndarray]:
    """(labels, counts per class); stops on what would make the cohort meaningless: unknown
    labels, no BFH (usually markers in the wrong units), a single class."""
    labels = assign_classes(frame, sex, ranges)
    if (labels < 0).any():
        raise InputError(f"{sex}: participants with an unknown label reached the cohort step")
    counts = np.bincount(labels, minlength=3)
    if counts[BONA_FIDE_HEALTHY] == 0:
        raise InputError(
            f"no bona fide healthy {sex} participants among {counts[APPARENTLY_HEALTHY]} "
            "apparently healthy: check that the P0 markers are in UKB units (glucose mmol/L, "
            "HbA1c mmol/mol, CRP mg/L) or relax the ranges (--ranges)")
    if (counts > 0).sum() < 2:
        raise InputError(f"{sex} participants fall in a single class {dict(enumerate(counts))}")
    return labels, counts


def _drop_constant(frame: pd.DataFrame, raw: np.ndarray, features: list[str],
                   train_idx: np.ndarray, sex: str) -> tuple[np.ndarray, list[str], list[str]]:
    """(raw, features, dropped): a feature constant in the training partition carries no
    information and breaks the quantile normalizer, so it goes before anything is fitted."""
    constant = constant_features(frame.iloc[train_idx], features)
    if constant:
        log.warning("%s: dropping features constant in the training partition: %s", sex, constant)
        keep = [j for j, f in enumerate(features) if f not in constant]
        features = [features[j] for j in keep]
        raw = raw[:, keep]
    return raw, features, constant


def _augment(raw: np.ndarray, labels: np.ndarray, train_idx: np.ndarray, features: list[str],
             sex: str, ranges: tuple[ClinicalRange, ...], config: CohortConfig,
             rng: np.random.Generator, complete: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray, dict]:
    """(new rows in raw units, their labels, the report per class): only training rows are
    sampled from, so no test or calibration participant leaks into training; classes in
    sorted order, so one seed gives the same rows. ``complete`` (per row): the rows with
    every marker measured, the only ones sampled from where a class has at least two (a
    filled value is a point mass the sampler would copy); the count stays fold x members."""
    if config.augment not in AUGMENTATIONS:
        raise ConfigError(f"unknown augmentation {config.augment!r}: choose from "
                          f"{', '.join(AUGMENTATIONS)}")
    aug_raw, aug_labels, aug_report = [], [], {}
    integer = np.array([BY_NAME[f].value_type == "integer" if f in BY_NAME else False
                        for f in features])
    for class_name, fold in sorted(config.augment_fold.items()):
        if class_name not in CLASS_NAMES:
            raise ConfigError(f"augment_fold names unknown class {class_name!r}")
        if fold < 0:
            raise ConfigError(f"augmentation fold must be >= 0, got {fold} for {class_name}")
        c = CLASS_NAMES.index(class_name)
        members = train_idx[labels[train_idx] == c]
        if fold == 0 or members.size == 0:
            continue
        n_source, n_new = members.size, fold * members.size
        if complete is not None and complete[members].sum() >= 2:
            members = members[complete[members]]
        low, high = _bounds(raw[members], features, class_name, sex, ranges)
        if config.augment == "copula":
            result = copula_sample(raw[members], n_new, low, high, rng, features,
                                   label=f"{sex} {class_name}")
        else:
            result = rejection_sample(raw[members], n_new, low, high, rng,
                                      features, integer, label=f"{sex} {class_name}")
        aug_raw.append(result.samples)
        aug_labels.append(np.full(result.samples.shape[0], c, dtype=np.int8))
        aug_report[class_name] = {
            "fold": fold, "method": config.augment, "source_rows": int(n_source),
            "sampled_from_complete_rows": int(members.size),
            "new_rows": int(result.samples.shape[0]), "rounds": result.rounds,
            "check": augmentation_check(raw[members], result.samples, features),
            "mean_source": dict(zip(features, np.round(result.mean, 4).tolist(), strict=True)),
            "mean_augmented": dict(zip(features, np.round(result.samples.mean(0), 4).tolist(),
                                       strict=True)),
            "sd_source": dict(zip(features, np.round(result.sd, 4).tolist(), strict=True)),
            "sd_augmented": dict(zip(features,
                                     np.round(result.samples.std(0, ddof=1), 4).tolist(),
                                     strict=True)),
        }
    aug_raw_all = np.concatenate(aug_raw) if aug_raw else np.empty((0, len(features)))
    aug_lab_all = np.concatenate(aug_labels) if aug_labels else np.empty(0, dtype=np.int8)
    return aug_raw_all, aug_lab_all, aug_report


def _table(normalizer: QuantileNormalizer, features: list[str], rows_raw: np.ndarray,
           rows_eid: np.ndarray, rows_age: np.ndarray, rows_group: np.ndarray,
           rows_label: np.ndarray, augmented: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(normalized, raw) frames of one partition, with the same metadata columns."""
    meta = pd.DataFrame({"eid": rows_eid, "age_years": rows_age, "age_group": rows_group,
                         "label": rows_label.astype(np.int8), "augmented": augmented})
    norm = pd.DataFrame(normalizer.transform(rows_raw), columns=features)
    rawf = pd.DataFrame(rows_raw, columns=features)
    return (pd.concat([meta, norm], axis=1),
            pd.concat([meta[["eid", "augmented"]], rawf], axis=1))


def _augmented_train_table(normalizer: QuantileNormalizer, features: list[str], raw: np.ndarray,
                           eids: np.ndarray, ages: np.ndarray, age_group: np.ndarray,
                           labels: np.ndarray, train_idx: np.ndarray, aug_raw: np.ndarray,
                           aug_labels: np.ndarray, config: CohortConfig
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The training partition with the augmented rows after the real ones: negative eids (no
    participant has one), and their age from their own sampled age, when age is a feature."""
    n_aug = aug_raw.shape[0]
    age_j = features.index("age") if "age" in features else None
    aug_ages = aug_raw[:, age_j] if age_j is not None else np.full(n_aug, np.nan)
    aug_groups = (assign_age_groups(aug_ages, config.age_groups)[0] if age_j is not None
                  else np.full(n_aug, None, dtype=object))
    aug_eid = -np.arange(1, n_aug + 1, dtype=np.int64)
    return _table(
        normalizer, features,
        np.concatenate([raw[train_idx], aug_raw]), np.concatenate([eids[train_idx], aug_eid]),
        np.concatenate([ages[train_idx], aug_ages]),
        np.concatenate([age_group[train_idx], aug_groups]),
        np.concatenate([labels[train_idx], aug_labels]),
        np.concatenate([np.zeros(train_idx.size, bool), np.ones(n_aug, bool)]))


def _mine(train: pd.DataFrame, train_raw: pd.DataFrame, sex: str,
          ranges: tuple[ClinicalRange, ...], config: CohortConfig, seed: int
          ) -> tuple[np.ndarray, float]:
    """(triplets as row indices into the training matrix, seconds taken): the classes are the
    labels, or with ``triplet_classes="severity"`` the count of P0 markers out of range."""
    t0 = time.perf_counter()
    if config.triplet_classes not in TRIPLET_CLASSES:
        raise ConfigError(f"unknown triplet classes {config.triplet_classes!r}: choose from "
                          f"{', '.join(TRIPLET_CLASSES)}")
    classes = (severity_classes(train_raw, sex, ranges) if config.triplet_classes == "severity"
               else train["label"].to_numpy())
    triplets = mine_triplets(classes, config.n_triplets, seed=seed,
                             balanced=config.balanced_triplets,
                             strata=train["age_group"].to_numpy() if config.age_matched_triplets
                             else None)
    return triplets, time.perf_counter() - t0


def _by_class(lab: np.ndarray) -> dict[str, int]:
    return {name: int((lab == i).sum()) for i, name in enumerate(CLASS_NAMES)}


@dataclass(frozen=True)
class _People:
    """One sex's participants as the cohort step reads them: raw values (NaN: missing), ids,
    ages, age groups and classes."""

    raw: np.ndarray
    eids: np.ndarray
    ages: np.ndarray
    age_group: np.ndarray
    labels: np.ndarray


def impute_training_medians(raw: np.ndarray, normalizer: QuantileNormalizer) -> np.ndarray:
    """``raw`` with every missing value filled by the feature's training median as
    ``normalizer`` holds it (fitted on the fit's training rows' measured values): exactly the
    value ``sphr score`` fills in (:func:`sphr.cohorts.normalize.training_medians`), the centre of
    the normalized scale, so a person gets the same score from the main run and from
    ``sphr score``; nothing of a held-out person enters another's value (docs/METHODS.md,
    "Missing markers")."""
    missing = np.isnan(raw)
    if not missing.any():
        return raw
    return np.where(missing, training_medians(normalizer)[None, :], raw)


def _assemble(people: _People, sex: str, features: list[str], config: CohortConfig,
              split: tuple[np.ndarray, np.ndarray, np.ndarray], seeds: np.ndarray,
              counts: np.ndarray, outside: int) -> SexCohort:
    """The cohort of one split (training, calibration and test rows of ``people``): the
    imputation, normalizer, augmentation and triplets fitted on its training rows only."""
    ranges = config.clinical_ranges()
    train_idx, calib_idx, test_idx = split
    labels, ages, age_group, eids = people.labels, people.ages, people.age_group, people.eids
    frame = pd.DataFrame(people.raw, columns=features)
    raw, features, constant = _drop_constant(frame, people.raw, features, train_idx, sex)
    missing = np.isnan(raw)
    # fitted on the real training rows' measured values only: augmented rows must not shape
    # the quantiles, nor filled values (a point mass at the median)
    normalizer = QuantileNormalizer(config.n_quantiles).fit(raw[train_idx], features=features,
                                                            observed_only=True)
    raw = impute_training_medians(raw, normalizer)
    aug_raw, aug_labels, aug_report = _augment(raw, labels, train_idx, features, sex, ranges,
                                               config, np.random.default_rng(seeds[1]),
                                               complete=~missing.any(axis=1))
    train, train_raw = _augmented_train_table(normalizer, features, raw, eids, ages, age_group,
                                              labels, train_idx, aug_raw, aug_labels, config)
    test, test_raw, calibration, calibration_raw = (
        *_table(normalizer, features, raw[test_idx], eids[test_idx], ages[test_idx],
                age_group[test_idx], labels[test_idx], np.zeros(test_idx.size, bool)),
        *_table(normalizer, features, raw[calib_idx], eids[calib_idx], ages[calib_idx],
                age_group[calib_idx], labels[calib_idx], np.zeros(calib_idx.size, bool)))
    triplets, triplet_s = _mine(train, train_raw, sex, ranges, config, int(seeds[2]))
    n = labels.size
    groups = group_names(config.age_groups)
    imputed = missing.any(axis=1)
    report = {
        "sex": sex, "participants": n, "features": features, "dropped_constant": constant,
        "classes": _by_class(labels), "train": _by_class(labels[train_idx]),
        "test": _by_class(labels[test_idx]), "calibration": _by_class(labels[calib_idx]),
        "augmented": _by_class(aug_labels),
        "imputed": {"participants": int(imputed.sum()), "values": int(missing.sum()),
                    "by_feature": {f: int(v) for f, v in zip(features, missing.sum(0),
                                                            strict=True) if v}},
        "bfh_share": round(float(counts[BONA_FIDE_HEALTHY] / n), 4),
        "bfh_share_of_apparently_healthy": round(
            float(counts[BONA_FIDE_HEALTHY] / max(1, counts[1] + counts[2])), 4),
        "age_groups": {g: _by_class(labels[age_group == g]) for g in groups},
        "ages_outside_groups": outside,
        "augmentation": aug_report,
        "triplets": {"n": int(triplets.shape[0]), "balanced": config.balanced_triplets,
                     "age_matched": config.age_matched_triplets,
                     "classes": config.triplet_classes,
                     "anchor_classes": _by_class(train["label"].to_numpy()[triplets[:, 0]]),
                     "seconds": round(triplet_s, 4)},
        "clinical_ranges": [asdict(r) for r in ranges_for(sex, ranges)],
    }
    imputed_table = pd.DataFrame({"eid": eids, "imputed_features": missing.sum(1).astype(int),
                                  "imputed": [";".join(np.asarray(features)[row])
                                              for row in missing]})
    return SexCohort(sex, features, train, test, train_raw, test_raw, calibration,
                     calibration_raw, triplets, normalizer, report,
                     imputed=imputed_table.loc[imputed].reset_index(drop=True))


def _fold_cohorts(people: _People, sex: str, features: list[str], config: CohortConfig,
                  counts: np.ndarray, outside: int) -> tuple[np.ndarray, list[SexCohort]]:
    """(each participant's fold, the fold cohorts): fold k's cohort tests on fold k and fits
    on the others (its calibration rows drawn from them as the single split draws its own),
    with streams of its own, so the folds and the single split move none of each other's."""
    base = [config.seed, SEX_CODE[sex], FOLD_PURPOSE]
    fold = assign_folds(people.labels, people.age_group, config.folds,
                        np.random.default_rng(np.random.SeedSequence(base)))
    cohorts = []
    for k in range(config.folds):
        seeds = np.random.SeedSequence([*base, k]).generate_state(4)
        test_idx = np.flatnonzero(fold == k)
        rest, calib_idx = _calibration_split(people.labels, np.flatnonzero(fold != k),
                                             config.calibration_size, int(seeds[3]))
        cohort = _assemble(people, sex, features, config, (rest, calib_idx, test_idx), seeds,
                           counts, outside)
        cohort.report["fold"] = {"fold": k, "folds": config.folds}
        cohorts.append(cohort)
    return fold, cohorts


def build_sex_cohort(frame: pd.DataFrame, sex: str, features: list[str],
                     config: CohortConfig) -> SexCohort:
    """Everything for one sex; ``frame`` holds that sex's labeled participants (missing
    markers allowed: imputed inside each split from its training rows). With
    ``config.folds`` >= 2 the cohort also holds its cross-fit folds (``folds``)."""
    ranges = config.clinical_ranges()
    n = len(frame)
    if n == 0:
        raise InputError(f"no {sex} participants left after the completeness filter and "
                         "dropping unknown labels")
    # independent streams for the split, the augmentation, the triplets and the calibration
    # rows: how many numbers one step draws does not move another's
    seeds = np.random.SeedSequence([config.seed, SEX_CODE[sex]]).generate_state(4)
    labels, counts = _classes(frame, sex, ranges)
    train_idx, test_idx = _split(labels, config.test_size, int(seeds[0]))
    train_idx, calib_idx = _calibration_split(labels, train_idx, config.calibration_size,
                                              int(seeds[3]))
    ages = frame["age"].to_numpy(dtype=float)
    age_group, outside = assign_age_groups(ages, config.age_groups)
    people = _People(frame[features].to_numpy(dtype=np.float64),
                     frame["eid"].to_numpy(dtype=np.int64), ages, age_group, labels)
    cohort = _assemble(people, sex, features, config, (train_idx, calib_idx, test_idx), seeds,
                       counts, outside)
    if config.folds >= 2:
        cohort.fold_of, cohort.folds = _fold_cohorts(people, sex, features, config, counts,
                                                     outside)
        cohort.report["folds"] = {"folds": config.folds, "sizes": np.bincount(
            cohort.fold_of, minlength=config.folds).tolist()}
    return cohort


def prepare(baseline: pd.DataFrame, config: CohortConfig) -> tuple[pd.DataFrame, list[str], dict]:
    """The completeness filter over everyone, then who stays: everyone with a sex, an age and
    a known label, missing no more than ``config.max_missing`` of the kept markers (their
    missing markers are imputed inside each fit); ``config.impute`` off: complete cases
    only. Each person left out is counted under its reason."""
    missing = [c for c in ("eid", "sex", "label", "age") if c not in baseline.columns]
    if missing:
        raise InputError(f"baseline has no column(s) {missing}: was it written by sphr ingest?")
    if not 0 <= config.max_missing < 1:
        raise ConfigError(f"max_missing must be in [0, 1), got {config.max_missing}")
    features = [f for f in PREDICTOR_NAMES if f in baseline.columns]
    filt = CompletenessFilter(config.completeness).fit(baseline, features)
    if "age" not in filt.kept_:
        raise InputError("age is less complete than the threshold; it is needed for age groups")
    n_missing = baseline[filt.kept_].isna().sum(axis=1).to_numpy()
    allowed = config.max_missing * len(filt.kept_) if config.impute else 0
    reasons = {
        "unknown_label": (baseline["label"] == "unknown").to_numpy(),
        "no_sex": baseline["sex"].isna().to_numpy(),
        "no_age": baseline["age"].isna().to_numpy(),
        "too_many_missing": n_missing > allowed,
    }
    left_out = np.zeros(len(baseline), bool)
    counts = {}
    for reason, mask in reasons.items():  # each person counted under the first reason
        counts[reason] = int((mask & ~left_out).sum())
        left_out |= mask
    frame = baseline.loc[~left_out].reset_index(drop=True)
    report = {
        "participants": len(baseline), "complete_cases": int((n_missing == 0).sum()),
        "unknown_label": counts["unknown_label"], "kept": len(frame),
        "imputed": int(((n_missing > 0) & ~left_out).sum()),
        "left_out": counts, "impute": config.impute, "max_missing": config.max_missing,
        "completeness_threshold": config.completeness, "completeness": filt.completeness_,
        "dropped_features": filt.dropped_,
    }
    return frame, filt.kept_, report


def build_cohorts(baseline: pd.DataFrame, config: CohortConfig | None = None
                  ) -> tuple[dict[str, SexCohort], dict]:
    config = config or CohortConfig()
    start = time.perf_counter()
    frame, features, report = prepare(baseline, config)
    cohorts = {}
    for sex in config.sexes:
        if sex not in SEX_CODE:
            raise ConfigError(f"unknown sex {sex!r}: use female and/or male")
        sub = frame.loc[frame["sex"] == SEX_CODE[sex]].reset_index(drop=True)
        cohorts[sex] = build_sex_cohort(sub, sex, features, config)
    # each sex's report says who of the export is not in any cohort, and the age groups,
    # since a partitioned run writes only the sexes' reports
    export = {k: report[k] for k in ("participants", "kept", "imputed", "left_out")}
    for c in cohorts.values():
        c.report.update(export=export, age_group_bounds=[list(g) for g in config.age_groups])
    report["sexes"] = {s: c.report for s, c in cohorts.items()}
    report["config"] = {k: v for k, v in asdict(config).items()}
    report["seconds"] = round(time.perf_counter() - start, 2)
    return cohorts, report


def write_sex_cohort(cohort: SexCohort, out: Path) -> None:
    """The files of the run-directory contract for one sex (into a staging folder)."""
    write_parquets(out, train=cohort.train, test=cohort.test, train_raw=cohort.train_raw,
                   test_raw=cohort.test_raw, calibration=cohort.calibration,
                   calibration_raw=cohort.calibration_raw)
    write_npz(out / "triplets.npz", triplets=cohort.triplets)
    cohort.normalizer.save(out / "normalizer.json")
    write_json(cohort.features, out / "features.json")
    write_json(cohort.report, out / "cohort_report.json")
    write_parquets(out, imputed=cohort.imputed)
    if cohort.fold_of is not None:
        write_parquets(out, folds=fold_table(cohort))
        for k, fold in enumerate(cohort.folds):
            write_sex_cohort(fold, fold_dir(out, k))


def fold_table(cohort: SexCohort) -> pd.DataFrame:
    """eid, fold: which fold each participant of the cohort is scored in."""
    eids = np.concatenate([f.test["eid"].to_numpy(np.int64) for f in cohort.folds])
    folds = np.concatenate([np.full(len(f.test), k) for k, f in enumerate(cohort.folds)])
    order = np.argsort(eids, kind="stable")
    return pd.DataFrame({"eid": eids[order], "fold": folds[order].astype(np.int64)})


def run_cohorts(baseline_path: str | Path, out_dir: str | Path,
                config: CohortConfig | None = None) -> tuple[dict[str, SexCohort], dict]:
    """``sphr cohorts``: read baseline.parquet, write ``out_dir/<sex>/...`` atomically."""
    baseline_path = Path(baseline_path)
    try:
        baseline = pd.read_parquet(baseline_path)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read baseline: {exc}", file=baseline_path) from None
    cohorts, report = build_cohorts(baseline, config)
    report["baseline"] = str(baseline_path)
    with staged_outputs(out_dir) as stage:
        for sex, cohort in cohorts.items():
            write_sex_cohort(cohort, stage / sex)
        write_json(report, stage / "cohort_report.json")
    return cohorts, report
