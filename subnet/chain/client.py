"""``ChainClient``: what a Beam neuron needs from the chain, on top of the real SDK.

Metagraph, registration, commitments, weights and the block clock for one subnet. Weights go
through ``bt.SetWeights`` (which picks commit-reveal when the subnet enables it); the result is
checked, and a refusal is logged with the chain's reason and returned, never raised, so a
validator goes on to its next window. The rate limit is read from the chain and respected
locally so a validator never hammers the chain with calls it knows will fail.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import bittensor as bt
from loguru import logger

from .commitments import to_fields
from .errors import ChainSetupError, NotRegistered
from .network import connect

_ST = bt.storage.SubtensorModule


@dataclass(frozen=True)
class WeightsOutcome:
    """What happened to one weights submission."""

    ok: bool
    reason: str  # "included", "rate_limited", or the chain's error name / message
    block: int


class ChainClient:
    """One subnet on one chain, as seen by one neuron."""

    def __init__(self, subtensor: bt.Subtensor, netuid: int) -> None:
        self.subtensor = subtensor
        self.netuid = netuid
        self.network = ""  # as given to open(); says how to register in error messages

    @classmethod
    def open(cls, network: str, netuid: int) -> ChainClient:
        """Connect to ``network`` and check that ``netuid`` exists (ChainSetupError if not)."""
        client = cls(connect(network), netuid)
        client.network = network
        try:
            client.metagraph()
        except BaseException:
            client.close()
            raise
        return client

    def close(self) -> None:
        """Close the connection (best effort). A neuron that stops on a setup error closes it
        before the interpreter exits: an open websocket's event loop, collected at shutdown,
        printed ``BaseEventLoop.__del__ ... Invalid file descriptor`` after the error line."""
        try:
            self.subtensor.close()
        except Exception as error:  # noqa: BLE001 - closing is best effort; the error stands
            logger.debug("closing the chain connection: {}", error)

    # Reads ---------------------------------------------------------------------------------

    def block(self) -> int:
        """The current block number."""
        return int(self.subtensor.block)

    def block_hash(self, block: int) -> str | None:
        """The hash of ``block`` (a beacon nobody knows before the block is made); None when the
        node does not have it."""
        # The SDK's sync facade has no public block-hash read; its client has (bittensor.client).
        value = self.subtensor._call(self.subtensor._client._block_hash(int(block)))
        return None if value is None else str(value)

    def block_timestamp(self, block: int) -> float | None:
        """When ``block`` was made (its ``Timestamp.Now``), in seconds; None when unknown."""
        value = self.subtensor.query(bt.storage.Timestamp.Now, block=int(block))
        return None if value is None else int(value) / 1000

    def drand_schedule(self) -> tuple[int, int] | None:
        """The drand beacon whose pulses the chain stores, as ``(genesis_time, period)`` in
        seconds; None when the chain stores none (no ``Drand`` pallet, or no pulse yet)."""
        config = self.subtensor.query(bt.storage.Drand.BeaconConfig)
        if not config or not self.subtensor.query(bt.storage.Drand.LastStoredRound):
            return None
        return int(config["genesis_time"]), int(config["period"])

    def drand_randomness(self, number: int) -> str | None:
        """Drand round ``number``'s randomness as hex, once the chain stores its pulse."""
        pulse = self.subtensor.query(bt.storage.Drand.Pulses, [int(number)])
        return None if not pulse else _hex(pulse["randomness"])

    def metagraph(self) -> bt.Metagraph:
        """The subnet's metagraph with commitments; ChainSetupError if the subnet is absent."""
        graph = self.subtensor.subnets.metagraph(self.netuid)
        if graph is None:
            raise ChainSetupError(
                f"netuid {self.netuid} does not exist on this chain; check --netuid "
                "(the local stack creates netuid 3)"
            )
        return graph

    def uid_of(self, hotkey: str) -> int | None:
        """The uid a hotkey holds on the subnet, or None."""
        uid = self.subtensor.query(_ST.Uids, [self.netuid, hotkey])
        return None if uid is None else int(uid)

    def require_registered(self, hotkey: str) -> int:
        """The hotkey's uid, or NotRegistered with how to register."""
        uid = self.uid_of(hotkey)
        if uid is None:
            how = f"`btcli subnets register --netuid {self.netuid}`"
            if self.network.startswith("sim://"):  # btcli cannot reach simnet
                how = (
                    f"`python scripts/register.py --subtensor.network {self.network} --netuid "
                    f"{self.netuid} --fund 100` and this neuron's --wallet.* flags"
                )
            raise NotRegistered(
                f"hotkey {hotkey} is not registered on netuid {self.netuid}; register it with "
                f"{how} (the local stack registers its own wallets for you)"
            )
        return uid

    def commitments(self) -> dict[str, str]:
        """Every registered hotkey's committed string (hotkeys without one are absent)."""
        graph = self.metagraph()
        return {
            n.hotkey: n.commitment.value
            for n in graph.neurons
            if n.commitment is not None and n.commitment.value
        }

    # Writes --------------------------------------------------------------------------------

    def register(self, wallet: bt.Wallet) -> int:
        """Burn-register the wallet's hotkey (signed by its coldkey); returns the uid."""
        hotkey = wallet.hotkey.ss58_address
        uid = self.uid_of(hotkey)
        if uid is not None:
            return uid
        call = bt.calls.SubtensorModule.burned_register(netuid=self.netuid, hotkey=hotkey)
        self.subtensor.submit_call(call, wallet).raise_for_failure()
        return self.require_registered(hotkey)

    def add_stake(self, wallet: bt.Wallet, rao: int) -> None:
        """Stake ``rao`` from the wallet's coldkey onto its own hotkey on this subnet."""
        call = bt.calls.SubtensorModule.add_stake(
            hotkey=wallet.hotkey.ss58_address, netuid=self.netuid, amount_staked=int(rao)
        )
        self.subtensor.submit_call(call, wallet).raise_for_failure()

    def commit(self, wallet: bt.Wallet, text: str) -> None:
        """Publish ``text`` as this hotkey's commitment (at most 3 x 128 bytes)."""
        call = bt.calls.Commitments.set_commitment(self.netuid, {"fields": to_fields(text)})
        self.subtensor.submit_call(call, wallet, signer="hotkey").raise_for_failure()

    def blocks_until_weights_allowed(self, hotkey: str) -> int:
        """Blocks to wait before the chain will accept this hotkey's weights (0 = now)."""
        uid = self.require_registered(hotkey)
        limit = self.subtensor.query(_ST.WeightsSetRateLimit, [self.netuid])
        last = self.subtensor.query(_ST.LastUpdate, [self.netuid])
        if not limit or not last or uid >= len(last) or not int(last[uid]):
            return 0
        return max(0, int(limit) - (self.block() - int(last[uid])))

    def set_weights(self, wallet: bt.Wallet, weights: Mapping[int, float]) -> WeightsOutcome:
        """Submit ``{uid: weight}`` through ``bt.SetWeights``; never raises on a refusal."""
        hotkey = wallet.hotkey.ss58_address
        wait = self.blocks_until_weights_allowed(hotkey)
        if wait:
            logger.info("weights: rate limited for {} more blocks; not submitting", wait)
            return WeightsOutcome(False, "rate_limited", self.block())
        intent = bt.SetWeights(netuid=self.netuid, weights=dict(weights))
        try:
            result = self.subtensor.execute(intent, wallet)
        except bt.BittensorError as error:
            reason = getattr(error, "name", None) or str(error)
            logger.warning("weights refused before submission: {}", error)
            return WeightsOutcome(False, str(reason), self.block())
        if not result.success:
            reason = (result.error.name if result.error else None) or result.message
            logger.warning("weights refused by the chain: {}", result.message)
            return WeightsOutcome(False, str(reason), self.block())
        logger.info("weights set on netuid {} for {} uids", self.netuid, len(weights))
        return WeightsOutcome(True, "included", self.block())

    # Clock ---------------------------------------------------------------------------------

    def poll_interval(self) -> float:
        """A quarter of the chain's block time, between 0.1 and 1 second."""
        return min(1.0, max(0.1, float(self.subtensor.block_time()) / 4))

    def follow_blocks(self, *, latest_only: bool = False) -> Iterator[int]:
        """Yield each new block number as the chain produces it, in order.

        With ``latest_only`` a consumer that fell behind (a long step) gets only the head, not
        the blocks it missed. Polls the head rather than holding the SDK's subscription open:
        a signal that stops the neuron can then interrupt a plain sleep instead of an async
        generator mid-flight.
        """
        poll, last, failures = 0.25, None, 0
        while True:
            try:
                if last is None:  # also retried: the chain may be down when the loop starts
                    poll, last = self.poll_interval(), self.block()
                time.sleep(poll)
                head = self.block()
            except (bt.BittensorError, OSError) as error:  # a dropped connection: back off, retry
                failures += 1
                wait = min(30.0, poll * 2**failures)
                logger.warning("chain unreachable ({}); retrying in {:.0f}s", error, wait)
                time.sleep(wait)
                continue
            failures = 0
            yield from range(head if latest_only else last + 1, head + 1) if head > last else ()
            last = max(last, head)

    def wait_for_block(self, target: int, timeout: float | None = None) -> int:
        """Block until the chain reaches ``target``; returns the head then."""
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = self.poll_interval()
        while (head := self.block()) < target:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"chain did not reach block {target} in {timeout}s")
            time.sleep(poll)
        return head


def _hex(value: object) -> str:
    """Bytes as the SDK may decode them (hex text, bytes, or a list of ints) as bare hex."""
    if isinstance(value, str):
        return value.removeprefix("0x").lower()
    return bytes(value).hex()  # type: ignore[arg-type]
