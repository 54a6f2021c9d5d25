"""The result tables in both synthetic worlds, with each world's oracle ceilings.

For each world (docs/SYNTH.md) the whole pipeline runs on a fresh synthetic export
(``python -m sphr_dagster run --world W``, demo profile unless ``--profile paper``); then
the paper's Table A8 row is rerun on the linear world's ingest with no augmentation and
with the joint (copula) augmentation beside the default 3x independent one. Written to
``OUT/summary.md``; the last line printed is one JSON object with the headline figures.

    python benchmarks/worlds.py [--out runs/worlds] [--profile demo] [--reuse] [--fast-losses]
        [--worlds linear nonlinear]

``--reuse`` keeps finished world runs (their tables are read again, not recomputed).
Differences are given in split SDs: (a - b) / sqrt((sd_a^2 + sd_b^2) / 2) over the
protocol's 5 splits, so "2 SDs" means the gap is twice the split-to-split spread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from sphr.evaluate.paper import LOSS_NAMES, LOSSES
from sphr.io import write_text

ROOT = Path(__file__).resolve().parent.parent
WORLDS = ("linear", "nonlinear")
BASELINES = ("raw", "pca", "ica", "diffmap", "deep_patient")
# every risk score the risk stage computes (sphr.risk), so a table's best is always in it
RISK_METHODS = ("sphr", "deep_patient", "p0_euclidean", "raw_euclidean", "mahalanobis",
                "homeostatic_dysregulation", "phenoage", "supervised_xgboost", "age")


def _sh(cmd: list[str], log: Path) -> float:
    return _sh_side_by_side([cmd], log)


def _sh_side_by_side(cmds: list[list[str]], log: Path, threads: int | None = None) -> float:
    """Run commands at the same time, all to ``log``; ``threads``: each one's
    OMP_NUM_THREADS (the commands pass their own ``--threads`` for torch)."""
    env = {**os.environ, "SPHR_PROGRESS": "0",
           **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
    t0 = time.perf_counter()
    with log.open("a") as f:
        procs = [subprocess.Popen(c, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, env=env)
                 for c in cmds]
        codes = [p.wait() for p in procs]
    for cmd, rc in zip(cmds, codes, strict=True):
        if rc:
            raise subprocess.CalledProcessError(rc, cmd)
    return time.perf_counter() - t0


def _sds(a: pd.Series, b: pd.Series) -> float:
    spread = np.sqrt((a["sd"] ** 2 + b["sd"] ** 2) / 2)
    return float((a["mean"] - b["mean"]) / spread) if spread > 0 else float("nan")


def _cell(row: pd.Series) -> str:
    return f"{row['mean']:.3f} ± {row['sd']:.3f}"


def representation_summary(run: Path) -> tuple[list[str], list[dict]]:
    """Weighted F1 per representation and classifier; SPHR against the best baseline."""
    lines, verdicts = [], []
    for sex in ("female", "male"):
        t = pd.read_parquet(run / "evaluate" / sex / "representations.parquet")
        t = t[t["metric"] == "weighted_f1"]
        for task in ("binary", "multi"):
            sub = t[t["task"] == task]
            wide = sub.pivot(index="representation", columns="classifier", values="mean")
            lines.append(f"\n**{sex}, {task}** (weighted F1, mean ± SD over splits)\n")
            clfs = list(wide.columns)
            lines.append("| representation | " + " | ".join(clfs) + " |")
            lines.append("| --- |" + " --- |" * len(clfs))
            for rep in wide.index:
                cells = [_cell(sub[(sub["representation"] == rep) & (sub["classifier"] == c)]
                               .iloc[0]) for c in clfs]
                lines.append(f"| {rep} | " + " | ".join(cells) + " |")
            for clf in clfs:
                c = sub[sub["classifier"] == clf].set_index("representation")
                if "sphr" not in c.index:
                    continue
                base = c.loc[[r for r in BASELINES if r in c.index]]
                best = base["mean"].idxmax()
                verdicts.append({"sex": sex, "task": task, "classifier": clf,
                                 "sphr": round(float(c.loc["sphr", "mean"]), 4),
                                 "best_baseline": best,
                                 "best_baseline_f1": round(float(base.loc[best, "mean"]), 4),
                                 "sds": round(_sds(c.loc["sphr"], base.loc[best]), 2)})
    return lines, verdicts


def null_gap(n_losses: int = 7, n_splits: int = 5, draws: int = 200_000,
             seed: int = 0) -> tuple[float, float, float]:
    """Mean and 2.5th percentile of "NPLB minus the best of the other losses", in split SDs,
    when every loss is equally good (independent normal split scores): the best of six is
    picked after the fact, so NPLB trails it by chance alone. Third: the 2.5th percentile
    against one fixed reference (raw features)."""
    x = np.random.default_rng(seed).standard_normal((draws, n_losses, n_splits))
    m, s = x.mean(2), x.std(2, ddof=1)
    best = np.argmax(m[:, 1:], 1) + 1
    rows = np.arange(draws)
    gap = (m[:, 0] - m[rows, best]) / np.sqrt((s[:, 0] ** 2 + s[rows, best] ** 2) / 2)
    one = (m[:, 0] - m[:, 1]) / np.sqrt((s[:, 0] ** 2 + s[:, 1] ** 2) / 2)
    return float(gap.mean()), float(np.percentile(gap, 2.5)), float(np.percentile(one, 2.5))


def loss_summary(run: Path) -> tuple[list[str], list[dict]]:
    """The loss comparison (XGBoost, weighted F1) as one table: each loss's kept epoch, its
    cells, and raw features with the same classifier on the same splits as a reference;
    NPLB against the best other loss and against raw features, in split SDs."""
    cols, cells, epochs, verdicts, gaps, n_splits = [], {}, {}, [], [], 5
    for sex in ("female", "male"):
        path = run / "evaluate" / sex / "losses.parquet"
        if not path.exists():
            continue
        t = pd.read_parquet(path)
        t = t[(t["metric"] == "weighted_f1") & (t["classifier"] == "xgboost")]
        n_splits = int(t["n_splits"].iloc[0])
        rep = pd.read_parquet(run / "evaluate" / sex / "representations.parquet")
        raw = rep[(rep["metric"] == "weighted_f1") & (rep["classifier"] == "xgboost")
                  & (rep["representation"] == "raw")].set_index("task")
        report = run / "train" / sex / "comparison" / "comparison_report.json"
        chosen = (json.loads(report.read_text()).get("model_selection", {})
                  if report.exists() else {})
        for loss, ms in chosen.items():
            epochs.setdefault(loss, {})[sex] = f"{ms['best_epoch']} of {ms['epochs_run']}"
        for task in ("binary", "multi"):
            sub = t[t["task"] == task].set_index("loss")
            col = f"{'women' if sex == 'female' else 'men'}, {task}"
            cols.append(col)
            best = sub["mean"].idxmax()
            for loss in sub.index:
                text = _cell(sub.loc[loss])
                cells.setdefault(loss, {})[col] = f"**{text}**" if loss == best else text
            cells.setdefault("(raw features)", {})[col] = _cell(raw.loc[task])
            others = sub.drop(index="nplb")
            top = others["mean"].idxmax()
            nplb, other, reference = sub.loc["nplb"], others.loc[top], raw.loc[task]
            sds, sds_raw = round(_sds(nplb, other), 2), round(_sds(nplb, reference), 2)
            # the lines print the unrounded means, as the table does (the JSON keeps 4 decimals)
            gaps.append(f"- {sex}, {task}: NPLB {nplb['mean']:.3f} vs the best other loss "
                        f"({LOSS_NAMES[top]}, {other['mean']:.3f}): {sds:+.2f} split SDs; vs "
                        f"raw features ({reference['mean']:.3f}): {sds_raw:+.2f} split SDs")
            verdicts.append({"sex": sex, "task": task, "nplb": round(float(nplb["mean"]), 4),
                             "best_other": top,
                             "best_other_f1": round(float(other["mean"]), 4), "sds": sds,
                             "raw_f1": round(float(reference["mean"]), 4),
                             "sds_vs_raw": sds_raw})
    if not cols:
        return [], []
    lines = ["| loss | kept epoch (women; men) | " + " | ".join(cols) + " |",
             "| --- | --- |" + " --- |" * len(cols)]
    for loss in [*[x for x in LOSSES if x in cells], "(raw features)"]:
        ep = epochs.get(loss, {})
        kept = "; ".join(ep.get(s, "-") for s in ("female", "male")) if ep else "-"
        lines.append(f"| {LOSS_NAMES.get(loss, loss)} | {kept} | "
                     + " | ".join(cells[loss].get(c, "-") for c in cols) + " |")
    lines.append(f"\nMean ± SD over the protocol's {n_splits} splits; bold: the best loss in the "
                 "column. "
                 "Kept epoch: the best validation epoch of the epochs run (docs/METHODS.md, "
                 "model selection).\n")
    mean, low, single = null_gap(n_losses=len(cells) - 1, n_splits=n_splits)
    lines.append(f"With {len(cells) - 1} equally good losses, NPLB would trail the best other "
                 f"one by {-mean:.2f} split SDs on average and by more than {-low:.2f} in 2.5% of "
                 f"draws (`null_gap`: independent normal split scores, {n_splits} splits); against "
                 "one fixed reference such as raw features, 2.5% of draws fall below "
                 f"{single:.2f}.\n")
    return lines + gaps, verdicts


def risk_summary(run: Path, world: dict) -> list[str]:
    d = pd.read_parquet(run / "risk" / "discrimination.parquet")
    ceilings = world.get("oracle_auroc", {}).get("new_diagnoses", {})
    lines = ["\n| sex | outcome | oracle ceiling | " + " | ".join(RISK_METHODS) + " |",
             "| --- | --- | --- |" + " --- |" * len(RISK_METHODS)]
    for sex in ("female", "male"):
        for outcome in ("any", "diabetes", "cancer", "other_serious"):
            sub = d[(d["sex"] == sex) & (d["outcome"] == outcome)].set_index("method")
            if sub.empty:
                continue
            ceiling = ceilings.get(outcome, {}).get(sex)
            cells = []
            for m in RISK_METHODS:
                if m in sub.index and pd.notna(sub.loc[m, "auroc"]):
                    r = sub.loc[m]
                    cells.append(f"{r['auroc']:.3f} [{r['auroc_low']:.3f}, {r['auroc_high']:.3f}]")
                else:
                    cells.append("-")
            n = int(sub["n"].iloc[0])
            ev = int(sub["events"].iloc[0])
            lines.append(f"| {sex} | {outcome} (n {n}, {ev} events) | "
                         f"{'-' if ceiling is None else f'{ceiling:.3f}'} | "
                         + " | ".join(cells) + " |")
    return lines


def linked_summary(run: Path, world: dict) -> tuple[list[str], list[dict]]:
    """Time-dependent AUROC at 10 years for the linked records (every held-out participant)."""
    path = run / "risk" / "linked_discrimination.parquet"
    if not path.exists():
        return ["(no linked outcomes)"], []
    d = pd.read_parquet(path)
    ceilings = world.get("oracle_auroc", {}).get("linked", {})
    methods = [m for m in RISK_METHODS if m in set(d["method"])]
    lines = ["\n| sex | outcome | oracle ceiling | " + " | ".join(methods) + " |",
             "| --- | --- | --- |" + " --- |" * len(methods)]
    best = []
    for (sex, outcome), sub in d.groupby(["sex", "outcome"], sort=False):
        sub = sub.set_index("method")
        ceiling = ceilings.get(outcome, {}).get(sex)
        cells = [f"{sub.loc[m, 'auroc_10y']:.3f} [{sub.loc[m, 'auroc_10y_low']:.3f}, "
                 f"{sub.loc[m, 'auroc_10y_high']:.3f}]" if m in sub.index else "-"
                 for m in methods]
        lines.append(f"| {sex} | {outcome} (n {int(sub['n'].iloc[0])}, "
                     f"{int(sub['events'].iloc[0])} events) | "
                     f"{'-' if ceiling is None else f'{ceiling:.3f}'} | "
                     + " | ".join(cells) + " |")
        top = sub["auroc_10y"].idxmax()
        best.append({"sex": sex, "outcome": outcome, "best": top,
                     "best_auroc": round(float(sub.loc[top, "auroc_10y"]), 3),
                     "sphr": round(float(sub.loc["sphr", "auroc_10y"]), 3)
                     if "sphr" in sub.index else None,
                     "ceiling": ceiling})
    return lines, best


def beyond_age_summary(run: Path) -> tuple[list[str], list[dict]]:
    """What each score adds to age on the linked records (the risk stage's beyond-age table):
    dC = C(age + score) - C(age) [95% CI] per sex and outcome, and whether its groups are
    ordered by risk (docs/METHODS.md, "Higher risk for your age")."""
    path = run / "risk" / "linked_beyond_age.parquet"
    if not path.exists():
        return ["(no linked outcomes)"], []
    d = pd.read_parquet(path)
    order_path = run / "risk" / "linked_group_ordering.parquet"
    order = (pd.read_parquet(order_path).drop_duplicates(["sex", "method", "outcome"])
             .set_index(["sex", "method", "outcome"])["status"] if order_path.exists()
             else pd.Series(dtype=object))
    methods = [m for m in RISK_METHODS if m in set(d["method"])]
    lines = ["\n| sex | outcome | " + " | ".join(methods) + " |",
             "| --- | --- |" + " --- |" * len(methods)]
    rows = []
    for (sex, outcome), sub in d.groupby(["sex", "outcome"], sort=False):
        sub = sub.set_index("method")
        cells = []
        for m in methods:
            if m not in sub.index or not np.isfinite(sub.loc[m, "dc"]):
                cells.append("-")
                continue
            r = sub.loc[m]
            status = order.get((sex, m, outcome))
            cells.append(f"{r['dc']:+.3f} [{r['dc_low']:+.3f}, {r['dc_high']:+.3f}]"
                         + (f", {status}" if isinstance(status, str) else ""))
            rows.append({"sex": sex, "outcome": outcome, "method": m,
                         "dc": round(float(r["dc"]), 4),
                         "ordering": status if isinstance(status, str) else None})
        lines.append(f"| {sex} | {outcome} | " + " | ".join(cells) + " |")
    return lines, rows


def table_a8(linear_run: Path, out: Path, log: Path) -> list[dict]:
    """SPHR + XGBoost (multi-class weighted F1) with 0x, 3x independent and 3x copula BFH
    augmentation; same seed, so the same test participants."""
    rows = []
    variants = {"0x": ["--bfh-fold", "0"], "3x copula": ["--augment", "copula"]}
    sphr = [sys.executable, "-m", "sphr.cli"]
    for name, extra in variants.items():
        run = out / f"a8_{name.replace(' ', '_')}"
        if not (run / "evaluate" / "female" / "representations.parquet").exists():
            (run / "ingest").mkdir(parents=True, exist_ok=True)
            for f in ("baseline.parquet", "followup.parquet"):
                link = run / "ingest" / f
                if not link.exists():
                    link.symlink_to((linear_run / "ingest" / f).resolve())
            _sh([*sphr, "cohorts", str(run / "ingest" / "baseline.parquet"), "--out",
                 str(run / "cohorts"), "--profile", "demo", *extra], log)
            for sex in ("female", "male"):
                _sh([*sphr, "train", str(run / "cohorts" / sex), "--profile", "demo",
                     "--out", str(run / "train" / sex / "nplb")], log)
            _sh([*sphr, "evaluate", str(run), "--representations", "sphr", "--classifiers",
                 "xgboost", "--no-losses"], log)
        rows.append((name, run))
    rows.insert(0, ("3x (default)", linear_run))
    result = []
    for name, run in rows:
        for sex in ("female", "male"):
            t = pd.read_parquet(run / "evaluate" / sex / "representations.parquet")
            r = t[(t["representation"] == "sphr") & (t["classifier"] == "xgboost")
                  & (t["task"] == "multi") & (t["metric"] == "weighted_f1")].iloc[0]
            result.append({"augmentation": name, "sex": sex, "mean": round(float(r["mean"]), 4),
                           "sd": round(float(r["sd"]), 4)})
    return result


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/worlds")
    ap.add_argument("--profile", default="demo", choices=("demo", "paper"))
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--no-losses", dest="losses", action="store_false",
                    help="skip the loss comparison (at the paper profile: hours per sex on a CPU)")
    ap.add_argument("--no-a8", dest="a8", action="store_false", help="skip the Table A8 rows")
    ap.add_argument("--worlds", nargs="+", choices=WORLDS, default=list(WORLDS),
                    help="the worlds to run, in this order (default both); the Table A8 rows "
                    "need the linear world")
    ap.add_argument("--fast-losses", action="store_true",
                    help="train the loss comparison outside the pipeline with `sphr train "
                    "--losses all --fast` (bf16 where the CPU has it, compiled forward), then "
                    "evaluate it: the paper profile's 7-loss stack in a session, not hours")
    return ap.parse_args()


def run_world(args: argparse.Namespace, w: str, run: Path, log: Path) -> float | None:
    """The pipeline on world ``w`` (and ``--fast-losses``' comparison), unless ``--reuse``
    finds it done; its wall seconds (None when nothing ran)."""
    done = (run / "risk" / "discrimination.parquet").exists()
    seconds = None
    if not (args.reuse and done):
        in_pipeline = args.losses and not args.fast_losses
        seconds = _sh([sys.executable, "-m", "sphr_dagster", "run", "--world", w, "--run-dir",
                       str(run), "--profile", args.profile, "--no-retrieval",
                       *([] if in_pipeline else ["--no-losses"])], log)
    if args.fast_losses and not (args.reuse and all(
            (run / "evaluate" / sex / "losses.parquet").exists()
            for sex in ("female", "male"))):
        sphr = [sys.executable, "-m", "sphr.cli", "-q"]
        t0 = time.perf_counter()
        # the two sexes side by side, each on its share of the cores: these small
        # networks use one core well and two poorly (12.5 s per epoch for the paper
        # profile's stack on one AVX512-BF16 core, 2026-11-25)
        threads = max(1, len(os.sched_getaffinity(0)) // 2)
        _sh_side_by_side([[*sphr, "train", str(run / "cohorts" / sex), "--losses", "all",
                           "--profile", args.profile, "--fast", "--threads", str(threads)]
                          for sex in ("female", "male")], log, threads=threads)
        _sh([*sphr, "evaluate", str(run), "--no-fit-baselines", "--no-train-losses",
             "--loss-profile", args.profile], log)
        seconds = (seconds or 0) + time.perf_counter() - t0
    return seconds


def world_section(run: Path, w: str, seconds: float | None) -> tuple[list[str], dict]:
    """World ``w``'s part of summary.md (oracle ceilings, representations, losses, risk,
    linked records) and its entry of the JSON summary."""
    from sphr.synth.worlds import read_world

    world = read_world(str(run / "export" / "ukb_synthetic.truth.parquet"))
    rep_lines, rep_v = representation_summary(run)
    loss_lines, loss_v = loss_summary(run)
    md = [f"\n## World `{w}`\n", world.get("definition", ""), "\n### Oracle ceilings "
          "(AUROC of the true risk)\n", "| outcome | women | men |", "| --- | --- | --- |"]
    for group, items in world.get("oracle_auroc", {}).items():
        for k, v in items.items():
            md.append(f"| {group}: {k} | {v.get('female', float('nan')):.3f} | "
                      f"{v.get('male', float('nan')):.3f} |")
    md += ["\n### Representations x classifiers\n", *rep_lines,
           "\n### Loss comparison (XGBoost, weighted F1)\n", *loss_lines,
           "\n### Risk discrimination: AUROC [95% CI] for a new diagnosis by the repeat "
           "visit, held-out participants with a repeat visit (few: about 4% of a cohort "
           "returns, as in UK Biobank)\n", *risk_summary(run, world)]
    linked_lines, linked_best = linked_summary(run, world)
    md += ["\n### Linked records: time-dependent AUROC at 10 years [95% CI], every held-out "
           "participant (docs/OUTCOMES.md)\n", *linked_lines]
    beyond_lines, beyond_rows = beyond_age_summary(run)
    md += ["\n### Linked records: what each score adds to age, dC = C(age + score) - C(age) "
           "[95% CI], and whether its groups are ordered by risk\n", *beyond_lines]
    wins = [v for v in rep_v if v["sds"] > 0]
    return md, {"pipeline_s": None if seconds is None else round(seconds),
                "sphr_cells_won": f"{len(wins)}/{len(rep_v)}",
                "sphr_vs_best_baseline": rep_v, "nplb_vs_best_loss": loss_v,
                "linked_auroc_10y": linked_best, "beyond_age": beyond_rows}


def a8_section(a8: list[dict]) -> list[str]:
    """The Table A8 rows of summary.md (linear world)."""
    md = ["\n## Table A8 row: augmentation of the BFH training rows (linear world)\n",
          "SPHR + XGBoost, multi-class weighted F1, mean ± SD over 5 splits; the same test "
          "participants in every row.\n", "| augmentation | women | men |",
          "| --- | --- | --- |"]
    for name in dict.fromkeys(r["augmentation"] for r in a8):
        cells = [next(f"{r['mean']:.3f} ± {r['sd']:.3f}" for r in a8
                      if r["augmentation"] == name and r["sex"] == s)
                 for s in ("female", "male")]
        md.append(f"| {name} | " + " | ".join(cells) + " |")
    return md


def main() -> int:
    args = parse_args()
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = out / "worlds.log"
    md = [f"# Both synthetic worlds ({args.profile} profile)\n",
          "Produced by `python benchmarks/worlds.py`; the worlds and their oracle ceilings are "
          "defined in docs/SYNTH.md. Ceilings are AUROCs of the generator's true risk; the "
          "representation tables report weighted F1 (the paper's metric), so they are not on "
          "the same scale as the ceilings, while the risk table's AUROCs are.\n"]
    summary: dict = {"profile": args.profile, "worlds": {}}
    for w in args.worlds:
        run = out / w
        seconds = run_world(args, w, run, log)
        lines, summary["worlds"][w] = world_section(run, w, seconds)
        md += lines
    if args.a8 and "linear" in args.worlds:
        a8 = table_a8(out / "linear", out, log)
        md += a8_section(a8)
        summary["table_a8"] = a8
    write_text("\n".join(md) + "\n", out / "summary.md")
    print(f"wrote {out / 'summary.md'}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
