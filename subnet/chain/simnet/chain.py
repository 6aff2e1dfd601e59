"""simnet's chain logic: blocks, signed extrinsics, epochs and the local-stack admin operations.

:class:`SimChain` is what the HTTP server exposes. It owns a :class:`ChainState` and knows
nothing about HTTP, so tests can drive it directly and the server stays a thin shell.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections import Counter
from dataclasses import asdict
from typing import Any

import bittensor_core as core
from loguru import logger

from . import calls, reads
from .drand import Beacon
from .epoch import run_epoch, validator_permits
from .state import U16_MAX, ChainState, Hyperparams, Subnet

TIMES_KEPT = 4096  # blocks whose timestamp simnet answers (a node keeps recent states only)


def signing_payload(genesis: str, call: dict[str, Any], signer: str, nonce: int) -> bytes:
    """The exact bytes a sender signs for one extrinsic (canonical JSON, bound to the chain)."""
    body = {"genesis": genesis, "call": call, "signer": signer, "nonce": nonce}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def block_hash(genesis: str, number: int, entropy: str = "") -> str:
    """Hash of block ``number``: its last 16 hex digits are the number, the rest a function of
    the chain's secret ``entropy``, so nobody but the server knows a block's hash before the
    block is made (the beacon checks of training draw from: ``subnet.verify.draw``)."""
    digest = hashlib.sha256(f"{genesis}:{entropy}:{number}".encode()).hexdigest()[:48]
    return f"0x{digest}{number:016x}"


def block_number_of(hash_: str) -> int:
    """Inverse of :func:`block_hash`."""
    return int(hash_[-16:], 16)


class SimChain:
    """The chain: state transitions, reads and the unanswered-read counter."""

    def __init__(self, state: ChainState, *, block_time: float = 1.0) -> None:
        self.state = state
        self.block_time = block_time
        if state.get_kv("genesis") is None:
            state.set_kv("genesis", "0x" + hashlib.sha256(state.path.encode()).hexdigest())
        self.genesis = str(state.get_kv("genesis"))
        if state.get_kv("entropy") is None:
            state.set_kv("entropy", secrets.token_hex(32))
        self.entropy = str(state.get_kv("entropy"))
        if state.get_kv("drand_genesis") is None:
            state.set_kv("drand_genesis", str(int(time.time())))
            state.set_kv(f"time:{state.block}", str(_now_ms()))
        self.drand = Beacon(self.entropy, int(str(state.get_kv("drand_genesis"))))
        self.unanswered: Counter[str] = Counter()

    def set_block_time(self, seconds: float) -> float:
        """Make blocks every ``seconds`` from the next one on (a local run stretches its windows
        this way when its neurons need longer); ValueError on a chain whose blocks are manual."""
        if self.block_time <= 0:
            raise ValueError("this chain makes blocks only when asked (block time 0)")
        if not 0 < seconds <= 600:
            raise ValueError(f"block time must lie in (0, 600] s, not {seconds}")
        self.block_time = seconds
        return seconds

    # Reads ---------------------------------------------------------------------------------

    def block_hash(self, number: int) -> str:
        """The hash of block ``number``; ``ValueError`` for a block not made yet."""
        if not 0 <= number <= self.state.block:
            raise ValueError(f"block {number} is not made yet (head {self.state.block})")
        return block_hash(self.genesis, number, self.entropy)

    def timestamp(self, number: int | None = None) -> int | None:
        """``Timestamp.Now`` at block ``number`` (default: the head), in milliseconds; None for a
        block not made yet or older than the last :data:`TIMES_KEPT`."""
        value = self.state.get_kv(f"time:{self.state.block if number is None else int(number)}")
        return None if value is None else int(value)

    def read(
        self, kind: str, module: str, name: str, params: list | None, block: int | None = None
    ) -> Any:
        """Answer one SDK read (at the head; ``block`` matters only for ``Timestamp.Now``, the
        one item simnet keeps per block); unknown keys are counted and answered with None / []."""
        if kind == "query" and (module, name) == ("Timestamp", "Now"):
            return self.timestamp(block)
        if (
            kind == "query"
            and module == "Drand"
            and name in ("BeaconConfig", "LastStoredRound", "Pulses")
        ):
            return self.drand.read(name, list(params or []))
        table = {"query": reads.STORAGE, "query_map": reads.STORAGE_MAPS, "runtime": reads.RUNTIME}
        if kind == "constant":
            if (module, name) in reads.CONSTANTS:
                return reads.CONSTANTS[(module, name)]
        elif (module, name) in table[kind]:
            with self.state.lock:
                return table[kind][(module, name)](self.state, list(params or []))
        self.unanswered[f"{kind}:{module}.{name}"] += 1
        logger.warning("simnet: unanswered {} {}.{} {}", kind, module, name, params)
        return [] if kind == "query_map" else None

    # Writes --------------------------------------------------------------------------------

    def submit(self, call: dict[str, Any], signer: str, nonce: int, signature: str) -> dict:
        """Verify and execute one signed extrinsic; returns an outcome record."""
        payload = signing_payload(self.genesis, call, signer, nonce)
        try:
            valid = core.verify(payload, bytes.fromhex(signature.removeprefix("0x")), signer)
        except Exception as error:  # a malformed key or signature is just an invalid one
            logger.debug("simnet: signature check raised {}", error)
            valid = False
        if not valid:
            return self._outcome(False, "BadSignature", f"signature does not match {signer}")
        with self.state.lock:
            expected = self.state.next_nonce(signer)
            if nonce != expected:
                return self._outcome(False, "Stale", f"nonce {nonce}, expected {expected}")
            handler = calls.HANDLERS.get((call.get("module"), call.get("function")))
            if handler is None:
                name = f"{call.get('module')}.{call.get('function')}"
                self.unanswered[f"call:{name}"] += 1
                return self._outcome(False, "CallNotSupported", f"simnet cannot execute {name}")
            self.state.bump_nonce(signer)
            try:
                event = handler(self.state, signer, dict(call.get("params") or {}))
            except calls.CallError as error:
                return self._outcome(False, error.name, str(error))
        return self._outcome(True, None, "included", [event])

    def _outcome(self, ok: bool, error: str | None, message: str, events: list | None = None):
        block = self.state.block
        return {
            "success": ok,
            "error": error,
            "message": message,
            "block": block,
            "block_hash": self.block_hash(block),
            "events": events or [],
        }

    # Blocks and epochs ------------------------------------------------------------------------

    def step(self, n: int = 1) -> int:
        """Produce ``n`` blocks, running each subnet's epoch when its tempo comes round."""
        for _ in range(n):
            with self.state.lock:
                block = self.state.block + 1
                self.state.set_block(block)
                self.state.set_kv(f"time:{block}", str(_now_ms()))
                self.state.drop_kv(f"time:{block - TIMES_KEPT}")
                for netuid in self.state.netuids():
                    subnet = self.state.subnet(netuid)
                    if block - subnet.last_epoch >= subnet.hparams.tempo:
                        self.epoch(subnet)
        return self.state.block

    def epoch(self, subnet: Subnet) -> None:
        """Run one Yuma-style epoch for a subnet and write its outputs to the neurons."""
        neurons = self.state.neurons(subnet.netuid)
        stakes = [self.state.stake(subnet.netuid, n.hotkey) for n in neurons]
        permits = validator_permits(stakes, subnet.hparams.max_validators)
        rows = {
            uid: {dest: float(w) for dest, w in row}
            for uid, row in self.state.weights(subnet.netuid).items()
        }
        result = run_epoch(
            stakes,
            permits,
            rows,
            kappa=subnet.hparams.kappa / U16_MAX,
            emission=subnet.hparams.emission_per_block * subnet.hparams.tempo,
        )
        for n in neurons:
            u = n.uid
            n.permit = permits[u]
            n.rank, n.trust = _u16(result.rank[u]), _u16(result.trust[u])
            n.consensus, n.incentive = _u16(result.consensus[u]), _u16(result.incentive[u])
            n.dividends, n.emission = _u16(result.dividends[u]), result.emission[u]
            self.state.put_neuron(n)
        subnet.last_epoch = self.state.block
        self.state.put_subnet(subnet)
        logger.debug("simnet: epoch on netuid {} at block {}", subnet.netuid, subnet.last_epoch)

    # Admin (the local stack's sudo; only reachable on loopback) -------------------------------

    def create_subnet(
        self, netuid: int, owner_coldkey: str, owner_hotkey: str, hparams: dict | None = None
    ) -> dict:
        """Create (or keep) a subnet; existing subnets are left as they are."""
        with self.state.lock:
            existing = self.state.subnet(netuid)
            if existing is None:
                block = self.state.block
                subnet = Subnet(
                    netuid,
                    owner_coldkey,
                    owner_hotkey,
                    f"beam-{netuid}",
                    f"b{netuid}",
                    block,
                    block,
                    Hyperparams.from_dict(hparams or {}),
                )
                self.state.put_subnet(subnet)
                existing = subnet
        return {"netuid": netuid, "hparams": asdict(existing.hparams)}

    def set_hparams(self, netuid: int, hparams: dict) -> dict:
        """Change some hyperparameters of an existing subnet."""
        with self.state.lock:
            subnet = self.state.subnet(netuid)
            if subnet is None:
                raise KeyError(f"netuid {netuid} does not exist")
            subnet.hparams = Hyperparams.from_dict({**asdict(subnet.hparams), **hparams})
            self.state.put_subnet(subnet)
            return asdict(subnet.hparams)

    def fund(self, coldkey: str, rao: int) -> int:
        """Faucet: add ``rao`` to a coldkey's free balance (localnet's Alice transfer)."""
        with self.state.lock:
            self.state.set_balance(coldkey, self.state.balance(coldkey) + int(rao))
            return self.state.balance(coldkey)

    def refresh_permits(self, netuid: int) -> list[bool]:
        """Recompute validator permits from stake now, without waiting for the epoch."""
        with self.state.lock:
            subnet = self.state.subnet(netuid)
            neurons = self.state.neurons(netuid)
            stakes = [self.state.stake(netuid, n.hotkey) for n in neurons]
            permits = validator_permits(stakes, subnet.hparams.max_validators)
            for n in neurons:
                n.permit = permits[n.uid]
                self.state.put_neuron(n)
            return permits


def _now_ms() -> int:
    return int(time.time() * 1000)


def _u16(x: float) -> int:
    return max(0, min(U16_MAX, round(x * U16_MAX)))
