"""``bench.py convergence``'s verdict: ratios and target checks on the means over seeds."""

from __future__ import annotations

DENSE_DILOCO = ("diloco", "diloco-fedavg")  # the dense baselines SparseLoCo is held to


def verdict(results: dict[str, dict], tuned: bool = True) -> dict:
    """Ratios and target checks, on the means over seeds, against DDP and the best dense DiLoCo."""
    out: dict = {}
    sparse, ddp = results.get("sparseloco"), results.get("ddp")
    dense_runs = [results[m] for m in DENSE_DILOCO if m in results]
    dense = min(dense_runs, key=lambda r: r["heldout_loss_mean"]) if dense_runs else None
    loss = "heldout_loss_mean"
    targets: dict[str, bool] = {}
    if sparse and ddp:
        out["ddp_bytes_over_sparseloco"] = round(ddp["bytes"] / sparse["bytes"], 1)  # both ways
        out["ddp_up_over_sparseloco_up"] = round(
            ddp["bytes_up_per_worker"] / sparse["bytes_up_per_worker"], 1
        )
        out["sparseloco_loss_over_ddp"] = round(sparse[loss] / ddp[loss], 4)
        targets["loss_vs_ddp_le_1.03"] = out["sparseloco_loss_over_ddp"] <= 1.03
    if sparse and dense:
        out["diloco_bytes_over_sparseloco"] = round(dense["bytes"] / sparse["bytes"], 1)
        out["diloco_up_over_sparseloco_up"] = round(
            dense["bytes_up_per_worker"] / sparse["bytes_up_per_worker"], 1
        )
        out["diloco_down_over_sparseloco_down"] = round(
            dense["bytes_down_per_worker"] / sparse["bytes_down_per_worker"], 1
        )
        out["sparseloco_loss_over_best_diloco"] = round(sparse[loss] / dense[loss], 4)
        targets["loss_vs_best_diloco_le_1"] = out["sparseloco_loss_over_best_diloco"] <= 1.0
        targets["bytes_vs_diloco_ge_100x_both_ways"] = (
            min(out["diloco_up_over_sparseloco_up"], out["diloco_down_over_sparseloco_down"]) >= 100
        )
    if dense:  # every variant of the sparse pipeline (another density, every coordinate sent)
        for name, r in results.items():
            if name.startswith("sparseloco-") and name != "sparseloco-kept":
                out[f"{name}_loss_over_best_diloco"] = round(r[loss] / dense[loss], 4)
                out[f"diloco_bytes_over_{name}"] = round(dense["bytes"] / r["bytes"], 1)
        if "sparseloco-all" in results:
            every = out["sparseloco-all_loss_over_best_diloco"]
            targets["every_coordinate_vs_best_diloco_le_1.01"] = every <= 1.01
    if sparse and results.get("sparseloco-kept"):
        kept = results["sparseloco-kept"][loss]
        out["fresh_optimizer_loss_over_kept"] = round(sparse[loss] / kept, 4)
        targets["fresh_vs_kept_le_1.005"] = out["fresh_optimizer_loss_over_kept"] <= 1.005
    if tuned:
        targets["every_choice_inside_its_grid"] = all(
            all(r["bracketed"].values()) for r in results.values()
        )
    if targets:
        out["targets_met"] = targets
    return out
