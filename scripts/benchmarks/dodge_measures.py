"""What ``bench.py adversarial`` measures of the checks' dodgers (``dodgers.py``): how far the
narrow liar moved its coordinates, when the turncoat was first checked after it turned, and the
largest share of a window's merge any one sender took, over an honest share."""

from __future__ import annotations

import statistics
from pathlib import Path

import torch
from safetensors.torch import load_file

from benchmarks.dodgers import narrow_targets
from subnet.localnet.run import read_records
from subnet.model import build_model


def holder_model(root: Path) -> dict[str, torch.Tensor]:
    """The holder's model as its state file left it at the end of the run."""
    (path,) = sorted((root / "state").glob("holder-*/state.safetensors"))
    head = "model/"
    return {k[len(head) :]: v for k, v in load_file(str(path)).items() if k.startswith(head)}


def narrow_drift_sd(
    attacked: Path, clean: Path, hotkey: str, preset: str, vocab: int, seed: int, side: int
) -> dict:
    """How far the narrow liar moved its targeted coordinates beyond the clean run, along its
    direction, in standard deviations of the honest movement (end minus start) of the same
    tensor's other coordinates in the attacked run."""
    start = {
        k: v.detach().float()
        for k, v in build_model(preset, vocab_size=vocab, seed=seed).state_dict().items()
    }
    end, base = holder_model(attacked), holder_model(clean)
    shapes = {k: tuple(v.shape) for k, v in start.items()}
    name, where, signs = narrow_targets(hotkey, shapes, side)
    moved = (end[name].float() - start[name]).reshape(-1)
    excess = ((end[name].float() - base[name].float()).reshape(-1)[where] * signs).mean()
    others = torch.ones_like(moved, dtype=torch.bool)
    others[where] = False
    sd = float(moved[others].std())
    return {
        "narrow_drift_sd": round(float(excess) / sd, 3) if sd > 0 else None,
        "excess_per_coordinate": round(float(excess), 6),
        "honest_movement_sd": round(sd, 6),
        "targeted": int(where.numel()),
        "tensor": name,
    }


def first_check_after_turn(root: Path, hotkey: str, validators: list[Path]) -> dict:
    """The windows from the turncoat's turn to the first check of one of its uploads from then
    on (its own metrics say when it turned)."""
    turned = None
    for path in sorted((root / "state").glob(f"miner-{hotkey[:8]}*/metrics.jsonl")):
        for r in read_records(path, "turned"):
            turned = r["window"]
    if turned is None:
        return {"turned_at": None, "windows_to_first_check": None}
    checked = sorted(
        r["window"]
        for path in validators
        for r in read_records(path, "check")
        if r["hotkey"] == hotkey and r["window"] >= turned and r.get("claimant") is None
    )
    first = checked[0] if checked else None
    return {
        "turned_at": turned,
        "first_checked_window": first,
        "windows_to_first_check": None if first is None else first - turned + 1,
    }


def largest_share(holder_metrics: Path) -> dict:
    """The largest merge weight one sender took of any window's step, over an honest share
    (1 / the uploads the holder accepted that window)."""
    accepted = {
        r["window"]: sum(v == "accepted" for v in r["verdicts"].values())
        for r in read_records(holder_metrics, "uploads")
    }
    ratios = []
    for v in read_records(holder_metrics, "version"):
        weights, n = v.get("contributors") or {}, accepted.get(v.get("window"), 0)
        if weights and n:
            ratios.append((max(weights.values()) * n, v["window"]))
    if not ratios:
        return {"max_over_honest_share": None}
    worst, window = max(ratios)
    return {
        "max_over_honest_share": round(worst, 3),
        "window": window,
        "median_over_honest_share": round(statistics.median(r for r, _ in ratios), 3),
    }
