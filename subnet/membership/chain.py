"""``ChainMembership``: the roster and readers of a subnet, from its metagraph and commitments.

Slots are derived here and nowhere else: the protocol's model-holder hotkey fills ``holder``,
hotkeys with a validator permit fill ``validator`` (they observe and score), every other
registered hotkey fills ``miner``. Readers come from the hotkeys' storage commitments, and
``join`` commits this node's own read settings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import bittensor as bt
from loguru import logger

from ..chain import ChainClient, ChainSetupError
from ..chain.commitments import check_overwrite
from ..storage.commitment import (
    READ_KEY_ENV,
    CommitmentError,
    ReadSettings,
    decode_commitment,
    encode_commitment,
    own_read_settings,
)
from ..storage.config import StorageConfig
from ..storage.readers import ReaderPool
from .roster import Member, Roster

# What each chain-derived slot may do (the permissions @beam/scored-subnet's roles require).
SLOT_PERMISSIONS: Mapping[str, frozenset[str]] = {
    "holder": frozenset({"run.lead", "data.grant"}),
    "validator": frozenset({"runs.observe", "runs.score"}),
    "miner": frozenset({"runs.train"}),
}


def chain_roster(neurons: Iterable[Any], holder_hotkey: str) -> Roster:
    """The roster of a metagraph's neurons (``.hotkey``, ``.uid``, ``.validator_permit``, ``.stake``).

    The holder is a member even before it registers (uid None): peers then wait for its
    bucket rather than refusing to start.
    """
    members, seen = [], set()
    for n in neurons:
        if n.hotkey in seen:  # a metagraph lists a hotkey once; never trust that blindly
            continue
        seen.add(n.hotkey)
        ranked = "validator" if n.validator_permit else "miner"
        slot = "holder" if n.hotkey == holder_hotkey else ranked
        stake = float(getattr(n, "stake", 0.0) or 0.0)
        members.append(
            Member(n.hotkey, frozenset({slot}), SLOT_PERMISSIONS[slot], int(n.uid), stake)
        )
    if holder_hotkey and holder_hotkey not in seen:
        members.append(Member(holder_hotkey, frozenset({"holder"}), SLOT_PERMISSIONS["holder"]))
    return Roster(tuple(members))


@dataclass
class JoinSettings:
    """What ``join`` commits: this node's wallet and bucket."""

    wallet: Any  # bt.Wallet: signs the commitment
    storage: StorageConfig
    guard: bool = False  # a real network: never overwrite another program's commitment unasked
    overwrite: bool = False  # --neuron.overwrite_commitment


class ChainMembership:
    """Membership of one subnet, refreshed from the chain on request."""

    def __init__(
        self,
        chain: ChainClient,
        holder_hotkey: str,
        readers: ReaderPool,
        join: JoinSettings | None = None,
    ) -> None:
        self.chain, self.holder_hotkey = chain, holder_hotkey
        self._readers, self._join = readers, join
        self._roster = Roster()

    @property
    def roster(self) -> Roster:
        """The snapshot of the last refresh."""
        return self._roster

    @property
    def readers(self) -> ReaderPool:
        """Readers built from the members' commitments."""
        return self._readers

    def refresh(self) -> Roster:
        """Re-read the metagraph: new roster, readers for changed commitments.

        A chain that is down or restarting is a ``ChainSetupError`` (the loop keeps the last
        roster and goes on), never an exception that takes the neuron down.
        """
        try:
            graph = self.chain.metagraph()
        except (bt.BittensorError, OSError) as error:
            raise ChainSetupError(f"the chain did not answer a metagraph read: {error}") from None
        self._readers.update(
            {n.hotkey: n.commitment.value for n in graph.neurons if n.commitment is not None}
        )
        self._roster = chain_roster(graph.neurons, self.holder_hotkey)
        return self._roster

    def join(self) -> None:
        """Commit how peers read our bucket, unless the chain already holds the same settings."""
        if self._join is None:
            return
        storage, wallet = self._join.storage, self._join.wallet
        try:
            wanted = own_read_settings(storage)
        except ValueError as error:
            raise ChainSetupError(str(error)) from None
        current = self.chain.commitments().get(wallet.hotkey.ss58_address)
        try:
            if current is not None and _same_location(
                decode_commitment(current), wanted, wanted.access_key_id
            ):
                return
        except CommitmentError:
            pass  # an unparseable old commitment is replaced below (asked first, on a real net)
        if self._join.guard:
            check_overwrite(
                current, wallet.hotkey.ss58_address, self.chain.netuid, self._join.overwrite
            )
        if wanted.access_key_id is None:
            logger.warning("no {} set: committing anonymous (public-read) access", READ_KEY_ENV)
        self.chain.commit(wallet, encode_commitment(wanted))
        logger.info("committed read settings for bucket {}", storage.bucket)


def _same_location(old: ReadSettings, new: ReadSettings, key: str | None) -> bool:
    def where(s: ReadSettings) -> tuple[str | None, ...]:
        return s.bucket, s.endpoint_url, s.region, s.prefix

    same = where(old) == where(new)
    # Without a read key configured here, keep whatever key was committed before.
    return same and (key is None or old.access_key_id == key)
