"""Transport: a model fitted on one NHANES period scores another, unchanged and re-anchored
(docs/notes/TRANSPORT.md; the rule that picks what ``--reanchor`` refits: docs/METHODS.md,
"Transport: drift and re-anchoring").

The development set (``sphr/data/real/nhanes_ukb_dev.csv``) is split by examination date
(field 53, the survey cycle): 1999-2006 (cycles 1999-2000 to 2005-2006) and 2007-2014
(2007-2008 to 2013-2014). For each period P the pipeline's stages (demo profile, seed 0:
ingest, cohorts, SPHR, DeepPatient, risk) are fitted on all of P; each period is also split
in two halves (seeded, within sex x died) and fitted on each half, so that every person of
a period is scored by a *local* model fitted on the other half of their own period: the
ceiling. Transports:

* ``early->late``: the 1999-2006 model scores the 2007-2014 people;
* ``late->early``: the reverse;
* ``early->late+shift``: the 2007-2014 export with an injected assay shift (creatinine x
  1.15, ALP + 0.7 SD of the period's ALP), which the drift table must flag.

Each transport is scored unchanged (``sphr score``) and re-anchored with every candidate of
the rule (``--reanchor``, parts ``bounds`` / ``references`` / ``all``). Per sex, Harrell's
C for all-cause death over the follow-up with a participant-bootstrap 95% interval (the
same resamples for every score and variant: paired differences), for each method's
age-standardized score (mode calibrated), and the rule's criterion: the mean C of the four
headline scores over sexes and transports.

    python benchmarks/transport.py [--out runs/transport] [--seed 0] [--bootstrap 1000]
        [--jobs 2] [--reuse-fits] [--docs docs/notes/TRANSPORT.md]

Last line: one JSON object (``criterion``, ``chosen``, ``c_index``, ``beyond_age`` (what each
score adds to age: dC, HR per SD, Spearman with age), ``paired``, ``drift``, ``seconds``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _docs import write_generated
from nhanes_crossfit.beyond import beyond_age_figures  # the real-people benchmark's parts
from nhanes_crossfit.cindex import c_indices, paired
from nhanes_crossfit.common import EXPORT, OUTCOMES, SEXES, death_outcome
from nhanes_crossfit.fits import fit_and_score, split_export

from sphr.io import atomic_path, write_text
from sphr.risk.config import DISPLAY, SHORT

#: the candidates of the pre-registered rule (docs/METHODS.md), smallest first
CANDIDATES: dict[str, tuple[str, ...]] = {
    "bounds": ("standardizers", "bounds"),
    "references": ("references", "standardizers", "bounds"),
    "all": ("normalizer", "marker_scaler", "references", "standardizers", "bounds"),
}
HEADLINE = ("raw_euclidean", "mahalanobis", "homeostatic_dysregulation", "sphr")
METHODS = (*HEADLINE, "sphr_joint", "deep_patient", "p0_euclidean", "phenoage")
PARSIMONY = 0.005
#: the injected assay shift: UKB field -> (kind, amount)
SHIFT = {"30700-0.0": ("times", 1.15), "30610-0.0": ("plus_sd", 0.7)}
SHIFT_NAMES = {"30700-0.0": "creatinine", "30610-0.0": "alp"}
TRANSPORTS = {"early->late": ("early", "late"), "late->early": ("late", "early"),
              "early->late+shift": ("early", "late_shift")}


def periods(work: Path, seed: int) -> dict[str, Path]:
    """The period exports (and the halves of each), plus the shifted late export."""
    raw = pd.read_csv(EXPORT, usecols=["eid", "31-0.0", "53-0.0"])
    year = pd.to_datetime(raw["53-0.0"]).dt.year
    death = death_outcome()
    died = death["event"].reindex(raw["eid"]).fillna(0).to_numpy(int)
    rng = np.random.default_rng(seed)
    files = {}
    for name, mask in (("early", year <= 2006), ("late", year >= 2007)):
        ids = raw.loc[mask, "eid"].to_numpy()
        files[name] = split_export(EXPORT, set(ids.tolist()), work / f"{name}.csv")
        half = np.zeros(len(raw), int)
        for key in np.unique(raw["31-0.0"].to_numpy() * 2 + died):
            idx = rng.permutation(np.flatnonzero(mask.to_numpy() & (raw["31-0.0"].to_numpy() * 2
                                                                     + died == key)))
            half[idx[idx.size // 2:]] = 1
        for h in (0, 1):
            keep = set(raw.loc[mask.to_numpy() & (half == h), "eid"].tolist())
            files[f"{name}{h}"] = split_export(EXPORT, keep, work / f"{name}{h}.csv")
    files["late_shift"] = shifted(files["late"], work / "late_shift.csv")
    return files


def shifted(path: Path, out: Path) -> Path:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col, (kind, amount) in SHIFT.items():
        v = pd.to_numeric(frame[col], errors="coerce")
        v = v * amount if kind == "times" else v + amount * v.std()
        frame[col] = [("" if np.isnan(x) else f"{x:.4g}") for x in v]
    with atomic_path(out) as tmp:
        frame.to_csv(tmp, index=False)
    return out


def _fit(args: tuple) -> dict[str, str]:
    import torch

    torch.set_num_threads(1)
    return fit_and_score(*args)


def fit_all(work: Path, files: dict[str, Path], seed: int, jobs: int, reuse: bool) -> None:
    """Every fit: each period whole (scoring the other period) and each half (scoring the
    other half of its own period: the local ceiling)."""
    tasks = []
    for train, held in (("early", "late"), ("late", "early"), ("early0", "early1"),
                        ("early1", "early0"), ("late0", "late1"), ("late1", "late0")):
        w = work / f"fit_{train}"
        w.mkdir(parents=True, exist_ok=True)
        tasks.append((w, files[train], files[held], OUTCOMES, "demo", seed, ("marker",), False,
                      None, reuse))
    os.environ["OMP_NUM_THREADS"] = "1"
    with ProcessPoolExecutor(max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_fit, tasks))


def _wide(path: Path) -> pd.DataFrame:
    """eid, sex, label, age and each method's calibrated score."""
    rows = pd.read_parquet(path)
    rows = rows.loc[rows["mode"] == "calibrated"]
    wide = rows.pivot_table(index=["eid", "sex"], columns="method", values="score").reset_index()
    first = rows.drop_duplicates("eid").set_index("eid")
    return wide.assign(label=first["label"].reindex(wide["eid"]).to_numpy(),
                       age=first["age_years"].reindex(wide["eid"]).to_numpy(float))


def score_all(work: Path, files: dict[str, Path], seed: int) -> tuple[dict, dict]:
    """(transport -> variant -> wide scores, transport -> drift summary)."""
    from sphr.risk.serve.apply import run_score

    scores, drift = {}, {}
    for name, (src, dst) in TRANSPORTS.items():
        model = work / f"fit_{src}" / "risk_marker"
        scores[name] = {}
        for variant, parts in (("unchanged", None), *CANDIDATES.items()):
            out = work / "score" / name.replace("->", "_to_").replace("+", "_") / variant
            refit = {"reanchor": True, "reanchor_parts": parts} if parts is not None else {}
            report = run_score(model, files[dst], out, device="cpu", reanchor_seed=seed, **refit)
            scores[name][variant] = _wide(out / "risk_groups.parquet")
            if parts is None:
                table = pd.read_csv(out / "drift.csv")
                drift[name] = {"line": report["drift"]["line"],
                               "table": table[table["status"].isin(("drift", "units", "moderate"))]
                               .round(3).to_dict("records")}
        base = dst.replace("_shift", "")
        local = pd.concat([_wide(work / f"fit_{base}{h}" / "score_marker" / "risk_groups.parquet")
                           for h in (0, 1)], ignore_index=True)
        scores[name]["local"] = local
    return scores, drift


def evaluate(scores: dict, bootstrap: int, seed: int) -> dict:
    """C-index per transport, variant, sex and method; paired differences; the criterion."""
    death = death_outcome()
    out: dict = {"c_index": {}, "n": {}, "paired": {}, "criterion": {}, "beyond_age": {}}
    for name, variants in scores.items():
        draws, eids = {}, None
        out["c_index"][name], out["n"][name], out["paired"][name] = {}, {}, {}
        out["beyond_age"][name] = {}
        for variant, wide in variants.items():
            wide = wide.sort_values("eid").reset_index(drop=True)
            eids = wide["eid"] if eids is None else eids
            if not np.array_equal(wide["eid"], eids):  # same people, same resamples
                wide = wide.set_index("eid").reindex(eids).reset_index()
            wide["time_years"] = death["time_years"].reindex(wide["eid"]).to_numpy(float)
            wide["died"] = death["event"].reindex(wide["eid"]).fillna(0).to_numpy(int)
            names = [m for m in METHODS if m in wide.columns]
            c, n, draws[variant] = c_indices(wide, names, bootstrap, seed)
            out["c_index"][name][variant], out["n"][name][variant] = c, n
            # what each score adds to age: the yardstick of a score relative to age
            out["beyond_age"][name][variant] = beyond_age_figures(wide, names, bootstrap,
                                                                  seed)[0]
        for variant in (*CANDIDATES, "local"):
            out["paired"][name][f"{variant} - unchanged"] = {
                m: paired(draws[variant], draws["unchanged"], m, m) for m in HEADLINE}
        for variant in CANDIDATES:
            out["paired"][name][f"{variant} - local"] = {
                m: paired(draws[variant], draws["local"], m, m) for m in HEADLINE}
    for variant in ("unchanged", *CANDIDATES, "local"):
        vals = [out["c_index"][t][variant][s][m][0] for t in scores for s in SEXES
                for m in HEADLINE if m in out["c_index"][t][variant][s]]
        out["criterion"][variant] = round(float(np.mean(vals)), 4)
    return out


def choose(criterion: dict) -> str:
    """The pre-registered rule (docs/METHODS.md): smallest first, a larger candidate replaces
    the choice only if it beats every smaller one by more than :data:`PARSIMONY`; if the
    choice does not beat unchanged scoring by as much, the smallest."""
    order = list(CANDIDATES)
    chosen = order[0]
    for i, cand in enumerate(order[1:], start=1):
        if criterion[cand] > max(criterion[s] for s in order[:i]) + PARSIMONY:
            chosen = cand
    return chosen if criterion[chosen] > criterion["unchanged"] + PARSIMONY else order[0]


#: the scores the study reads, in its tables' order, by the library's names
#: (sphr.risk.config.DISPLAY), shortened where a table column needs it, and the paper's SPHR
#: marked as such beside the shipped one
LABELS = {**{m: DISPLAY[m] for m in ("raw_euclidean", "mahalanobis",
                                     "homeostatic_dysregulation", "sphr", "sphr_joint",
                                     "deep_patient", "p0_euclidean", "phenoage")},
          "mahalanobis": SHORT["mahalanobis"], "sphr": "SPHR (paper's)",
          "sphr_joint": SHORT["sphr_joint"]}
VARIANTS = ("unchanged", *CANDIDATES, "local")
GENERATED = ("<!-- generated by benchmarks/transport.py: begin -->",
             "<!-- generated by benchmarks/transport.py: end -->")


def _dc(fig: dict | None) -> str:
    dc = (fig or {}).get("dc") or [None]
    return f"{dc[0]:+.3f} [{dc[1]:+.3f}, {dc[2]:+.3f}]" if dc[0] is not None else "-"


def _cell(v: list | None) -> str:
    return f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]" if v else "-"


def markdown(result: dict) -> str:
    lines = ["Criterion (mean C of the four headline scores over sexes and transports): "
             + ", ".join(f"{k} {v:.4f}" for k, v in result["criterion"].items())
             + f". Chosen by the rule: **{result['chosen']}**.", ""]
    for name in TRANSPORTS:
        c, n = result["c_index"][name], result["n"][name]
        for sex in SEXES:
            people = n["unchanged"][sex].get("sphr", max(n["unchanged"][sex].values()))
            lines += [f"`{name}`, {sex} (n = {people:,}, deaths in the table below: "
                      f"{result['deaths'][name][sex]}): Harrell's C for death [95% CI]", "",
                      "| score | " + " | ".join(VARIANTS) + " |",
                      "| --- |" + " --- |" * len(VARIANTS)]
            for m, label in LABELS.items():
                cells = [_cell(c[v][sex].get(m)) for v in VARIANTS]
                if any(x != "-" for x in cells):
                    lines.append(f"| {label} | " + " | ".join(cells) + " |")
            lines.append("")
        lines += [f"`{name}`, paired differences averaged over the sexes [95% CI]:", "",
                  "| difference | " + " | ".join(LABELS[m] for m in HEADLINE) + " |",
                  "| --- |" + " --- |" * len(HEADLINE)]
        for key, per in result["paired"][name].items():
            lines.append(f"| {key} | " + " | ".join(
                f"{v[0]:+.3f} [{v[1]:+.3f}, {v[2]:+.3f}]" if v else "-"
                for v in (per[m] for m in HEADLINE)) + " |")
        lines += ["", f"`{name}`, what each score adds to age for death: dC = C(age + score) "
                  "- C(age) [95% CI], per sex (women / men)", "",
                  "| score | " + " | ".join(VARIANTS) + " |", "| --- |" + " --- |" * len(VARIANTS)]
        for m, label in LABELS.items():
            cells = [" / ".join(_dc(result["beyond_age"][name][v][s].get(m)) for s in SEXES)
                     for v in VARIANTS]
            if any(x != "- / -" for x in cells):
                lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += ["", f"Drift of `{name}` (unchanged model): {result['drift'][name]['line']}", ""]
    return "\n".join(lines)


def write_docs(path: Path, text: str) -> None:
    write_generated(path, GENERATED, "\n" + text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/transport"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=2, help="fits at the same time")
    parser.add_argument("--reuse-fits", action="store_true",
                        help="keep the fitted SPHR and DeepPatient of an earlier run in --out")
    parser.add_argument("--docs", type=Path, default=None,
                        help="write the tables into this file's generated part")
    args = parser.parse_args()
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    files = periods(args.out, args.seed)
    fit_all(args.out, files, args.seed, args.jobs, args.reuse_fits)
    fit_s = time.perf_counter() - t0
    scores, drift = score_all(args.out, files, args.seed)
    result = evaluate(scores, args.bootstrap, args.seed)
    death = death_outcome()
    result["deaths"] = {
        name: {sex: int(death["event"].reindex(w.loc[w["sex"] == sex, "eid"]).fillna(0).sum())
               for sex in SEXES} for name, w in ((t, v["unchanged"]) for t, v in scores.items())}
    result["chosen"] = choose(result["criterion"])
    result["drift"] = drift
    result.update({"seed": args.seed, "bootstrap": args.bootstrap, "profile": "demo",
                   "fit_s": round(fit_s, 1), "seconds": round(time.perf_counter() - t0, 1)})
    write_text(json.dumps(result, indent=1), args.out / "transport.json")
    write_text(markdown(result), args.out / "transport.md")
    if args.docs is not None:
        write_docs(args.docs, markdown(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
