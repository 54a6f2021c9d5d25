"""SPHR's per-epoch tracking of every fold fit beside the held-out fold's C (docs/METHODS.md,
"SPHR's stability from fit to fit")."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .common import SEXES, refit_dir


def training_tracks(out: Path, folds: int, refits: int) -> pd.DataFrame:
    """Every fold fit's SPHR per-epoch tracking (``loss_curve.parquet``; docs/METHODS.md,
    "SPHR's stability from fit to fit"): refit, fold, sex, epoch, the kept epoch and the
    tracked columns. Empty when no fit tracked (an older run)."""
    import json as _json

    from sphr.layout import train_dir

    parts = []
    for r in range(refits):
        for k in range(folds):
            for sex in SEXES:
                where = train_dir(refit_dir(out, r) / f"fold{k}" / "run", sex)
                if not (where / "loss_curve.parquet").exists():
                    continue
                curve = pd.read_parquet(where / "loss_curve.parquet")
                report = _json.loads((where / "train_report.json").read_text())
                kept = (report.get("model_selection") or {}).get("best_epoch")
                parts.append(curve.assign(refit=r, fold=k, sex=sex, kept_epoch=kept))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def heldout_fold_c(refits: dict, space: str, score: str) -> dict[tuple[int, int, str], float]:
    """(refit, fold, sex) -> the held-out fold's C of ``score`` (from :func:`refit_spread`)."""
    out = {}
    for sex in SEXES:
        per = refits["per_fold"][space].get(sex, {}).get(score)
        for k, row in enumerate(per["c"] if per else []):
            for r, c in enumerate(row):
                out[(r, k, sex)] = c
    return out


def tracking_summary(tracks: pd.DataFrame, heldout: dict) -> dict:
    """Per sex: the tracked figures at epoch 1, at the kept epoch and at the last epoch,
    averaged over fold fits, split by whether the held-out fold's SPHR C fell below 0.5
    (``inverted``) or not; and over all fits the Spearman correlation, across fits, of each
    figure at the kept epoch with the held-out C."""
    from sphr.train.tracking import TRACK_COLUMNS, spearman

    cols = [c for c in ("val_loss", "val_knn_f1", *TRACK_COLUMNS) if c in tracks.columns]
    rows = []
    for (r, k, sex), fit in tracks.groupby(["refit", "fold", "sex"]):
        fit = fit.sort_values("epoch")
        kept = fit.loc[fit["epoch"] == fit["kept_epoch"]]
        at = {"first": fit.iloc[0], "kept": kept.iloc[0] if len(kept) else fit.iloc[-1],
              "last": fit.iloc[-1]}
        row = {"refit": r, "fold": k, "sex": sex, "kept_epoch": int(at["kept"]["epoch"]),
               "epochs": int(fit["epoch"].max()), "heldout_c": heldout.get((r, k, sex))}
        row.update({f"{c}@{w}": float(at[w][c]) for w in at for c in cols})
        rows.append(row)
    fits = pd.DataFrame(rows)
    out: dict = {"fits": fits.to_dict(orient="records"), "by_sex": {}}
    for sex, sub in fits.groupby("sex"):
        inv = sub["heldout_c"].astype(float) < 0.5
        summary = {"n_fits": len(sub), "n_inverted": int(inv.sum()),
                   "kept_epoch_mean": round(float(sub["kept_epoch"].mean()), 1)}
        for group, mask in (("inverted", inv), ("not_inverted", ~inv)):
            summary[group] = {k: round(float(sub.loc[mask, k].mean()), 4)
                              for k in sub.columns if "@" in k and mask.any()}
        summary["rho_with_heldout_c"] = {
            k: round(spearman(sub[k].to_numpy(float), sub["heldout_c"].to_numpy(float)), 3)
            for k in sub.columns if k.endswith("@kept")}
        out["by_sex"][sex] = summary
    return out


def tracking_markdown(summary: dict) -> str:
    """The tracking table: per sex and tracked figure, the mean at epoch 1, the kept epoch and
    the last epoch, for fits whose held-out SPHR C fell below 0.5 and the others."""
    lines = ["SPHR during training (training rows only; mean over fold fits): epoch 1 / kept "
             "epoch / last epoch; `rho` = Spearman across fits of the figure at the kept epoch "
             "with the held-out fold's SPHR C", "",
             "| sex | fits (inverted) | figure | inverted fits | other fits | rho |",
             "| --- | --- | --- | --- | --- | --- |"]
    for sex, sm in summary["by_sex"].items():
        names = sorted({k.split("@")[0] for k in sm["rho_with_heldout_c"]})
        for name in names:
            cells = []
            for group in ("inverted", "not_inverted"):
                g = sm.get(group) or {}
                cells.append(" / ".join(f"{g[f'{name}@{w}']:.3f}" if f"{name}@{w}" in g
                                        else "-" for w in ("first", "kept", "last")))
            lines.append(f"| {sex} | {sm['n_fits']} ({sm['n_inverted']}) | {name} | "
                         f"{cells[0]} | {cells[1]} | {sm['rho_with_heldout_c'][f'{name}@kept']} |")
    return "\n".join(lines) + "\n"
