"""simnet's chain state: subnets, neurons, balances, stake, weights, commitments, block.

Everything lives in one SQLite file so a restarted simnet resumes at the same block with the
same registrations. The class is deliberately dumb: it stores and fetches rows. The rules
(who may do what) live in ``calls.py``; the reads the SDK makes live in ``reads.py``.

Amounts are integers in rao (1 TAO = 1e9 rao), as on the real chain.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RAO_PER_TAO = 1_000_000_000
U16_MAX = 65535

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS subnets (
    netuid INTEGER PRIMARY KEY, owner_coldkey TEXT NOT NULL, owner_hotkey TEXT NOT NULL,
    name TEXT NOT NULL, symbol TEXT NOT NULL, registered_at INTEGER NOT NULL,
    last_epoch INTEGER NOT NULL, hparams TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS neurons (
    netuid INTEGER NOT NULL, uid INTEGER NOT NULL, hotkey TEXT NOT NULL, coldkey TEXT NOT NULL,
    registered_at INTEGER NOT NULL, last_update INTEGER NOT NULL DEFAULT 0,
    permit INTEGER NOT NULL DEFAULT 0, rank INTEGER NOT NULL DEFAULT 0,
    trust INTEGER NOT NULL DEFAULT 0, consensus INTEGER NOT NULL DEFAULT 0,
    incentive INTEGER NOT NULL DEFAULT 0, dividends INTEGER NOT NULL DEFAULT 0,
    emission INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (netuid, uid));
CREATE TABLE IF NOT EXISTS owners (hotkey TEXT PRIMARY KEY, coldkey TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS balances (coldkey TEXT PRIMARY KEY, free INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stake (
    netuid INTEGER NOT NULL, hotkey TEXT NOT NULL, amount INTEGER NOT NULL,
    PRIMARY KEY (netuid, hotkey));
CREATE TABLE IF NOT EXISTS weights (
    netuid INTEGER NOT NULL, uid INTEGER NOT NULL, dests TEXT NOT NULL, vals TEXT NOT NULL,
    PRIMARY KEY (netuid, uid));
CREATE TABLE IF NOT EXISTS commitments (
    netuid INTEGER NOT NULL, hotkey TEXT NOT NULL, block INTEGER NOT NULL, fields TEXT NOT NULL,
    PRIMARY KEY (netuid, hotkey));
CREATE TABLE IF NOT EXISTS nonces (account TEXT PRIMARY KEY, nonce INTEGER NOT NULL);
"""


@dataclass
class Hyperparams:
    """Per-subnet settings, named as the chain names them (subset simnet enforces)."""

    tempo: int = 360
    max_uids: int = 256
    max_validators: int = 64
    immunity_period: int = 100
    weights_rate_limit: int = 100
    min_allowed_weights: int = 1
    max_weights_limit: int = U16_MAX
    burn: int = RAO_PER_TAO // 1000
    registration_allowed: bool = True
    commit_reveal_weights_enabled: bool = False
    weights_version: int = 0
    activity_cutoff: int = 5000
    kappa: int = 32767
    emission_per_block: int = RAO_PER_TAO
    commitment_rate_limit: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hyperparams:
        """Build from a dict, rejecting names simnet does not know (a typo is an error)."""
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown hyperparameters: {sorted(unknown)}")
        return cls(**data)


@dataclass
class Neuron:
    """One row of a subnet's neuron table. Scores are u16 fractions as the chain stores them."""

    netuid: int
    uid: int
    hotkey: str
    coldkey: str
    registered_at: int
    last_update: int = 0
    permit: bool = False
    rank: int = 0
    trust: int = 0
    consensus: int = 0
    incentive: int = 0
    dividends: int = 0
    emission: int = 0


@dataclass
class Subnet:
    """A subnet's identity and hyperparameters."""

    netuid: int
    owner_coldkey: str
    owner_hotkey: str
    name: str
    symbol: str
    registered_at: int
    last_epoch: int
    hparams: Hyperparams = field(default_factory=Hyperparams)


class ChainState:
    """Thread-safe SQLite store. Every public method is one transaction."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    @property
    def lock(self) -> threading.RLock:
        """Held by callers that need several reads and writes to be atomic."""
        return self._lock

    def close(self) -> None:
        """Close the database file."""
        with self._lock:
            self._db.close()

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _exec(self, sql: str, args: tuple = ()) -> None:
        with self._lock:
            self._db.execute(sql, args)

    # Key-value -----------------------------------------------------------------------------

    def get_kv(self, key: str, default: str | None = None) -> str | None:
        """A raw value of the kv table."""
        rows = self._rows("SELECT value FROM kv WHERE key=?", (key,))
        return rows[0][0] if rows else default

    def set_kv(self, key: str, value: str) -> None:
        """Store a raw value in the kv table."""
        self._exec("INSERT OR REPLACE INTO kv VALUES (?, ?)", (key, value))

    def drop_kv(self, key: str) -> None:
        """Remove a value from the kv table (absent: nothing happens)."""
        self._exec("DELETE FROM kv WHERE key=?", (key,))

    @property
    def block(self) -> int:
        """The current block number."""
        return int(self.get_kv("block", "0"))

    def set_block(self, block: int) -> None:
        """Move the head to ``block``."""
        self.set_kv("block", str(block))

    # Subnets -------------------------------------------------------------------------------

    def subnet(self, netuid: int) -> Subnet | None:
        """A subnet, or None when it does not exist."""
        rows = self._rows("SELECT * FROM subnets WHERE netuid=?", (netuid,))
        if not rows:
            return None
        netuid, cold, hot, name, symbol, reg, last, hp = rows[0]
        return Subnet(netuid, cold, hot, name, symbol, reg, last, Hyperparams(**json.loads(hp)))

    def netuids(self) -> list[int]:
        """Every existing netuid, ascending."""
        return [r[0] for r in self._rows("SELECT netuid FROM subnets ORDER BY netuid")]

    def put_subnet(self, subnet: Subnet) -> None:
        """Create or replace a subnet row."""
        self._exec(
            "INSERT OR REPLACE INTO subnets VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                subnet.netuid,
                subnet.owner_coldkey,
                subnet.owner_hotkey,
                subnet.name,
                subnet.symbol,
                subnet.registered_at,
                subnet.last_epoch,
                json.dumps(asdict(subnet.hparams)),
            ),
        )

    # Neurons -------------------------------------------------------------------------------

    def neurons(self, netuid: int) -> list[Neuron]:
        """A subnet's neurons ordered by uid."""
        rows = self._rows("SELECT * FROM neurons WHERE netuid=? ORDER BY uid", (netuid,))
        return [Neuron(*r[:6], bool(r[6]), *r[7:]) for r in rows]

    def neuron_by_hotkey(self, netuid: int, hotkey: str) -> Neuron | None:
        """The neuron a hotkey holds on a subnet, or None."""
        return next((n for n in self.neurons(netuid) if n.hotkey == hotkey), None)

    def put_neuron(self, n: Neuron) -> None:
        """Create or replace a neuron row (a uid slot)."""
        self._exec(
            "INSERT OR REPLACE INTO neurons VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                n.netuid,
                n.uid,
                n.hotkey,
                n.coldkey,
                n.registered_at,
                n.last_update,
                int(n.permit),
                n.rank,
                n.trust,
                n.consensus,
                n.incentive,
                n.dividends,
                n.emission,
            ),
        )

    # Accounts ------------------------------------------------------------------------------

    def owner(self, hotkey: str) -> str | None:
        """The coldkey that owns a hotkey, or None for an unknown hotkey."""
        rows = self._rows("SELECT coldkey FROM owners WHERE hotkey=?", (hotkey,))
        return rows[0][0] if rows else None

    def set_owner(self, hotkey: str, coldkey: str) -> None:
        """Associate a hotkey with its coldkey (first registration wins)."""
        self._exec("INSERT OR IGNORE INTO owners VALUES (?, ?)", (hotkey, coldkey))

    def balance(self, coldkey: str) -> int:
        """Free balance of a coldkey, in rao."""
        rows = self._rows("SELECT free FROM balances WHERE coldkey=?", (coldkey,))
        return rows[0][0] if rows else 0

    def set_balance(self, coldkey: str, free: int) -> None:
        """Set the free balance of a coldkey, in rao."""
        self._exec("INSERT OR REPLACE INTO balances VALUES (?, ?)", (coldkey, free))

    def stake(self, netuid: int, hotkey: str) -> int:
        """Stake on a hotkey in one subnet, in rao."""
        rows = self._rows("SELECT amount FROM stake WHERE netuid=? AND hotkey=?", (netuid, hotkey))
        return rows[0][0] if rows else 0

    def set_stake(self, netuid: int, hotkey: str, amount: int) -> None:
        """Set the stake on a hotkey in one subnet, in rao."""
        self._exec("INSERT OR REPLACE INTO stake VALUES (?, ?, ?)", (netuid, hotkey, amount))

    def next_nonce(self, account: str) -> int:
        """The nonce the account's next extrinsic must carry."""
        rows = self._rows("SELECT nonce FROM nonces WHERE account=?", (account,))
        return rows[0][0] if rows else 0

    def bump_nonce(self, account: str) -> None:
        """Consume one nonce of ``account``."""
        self._exec(
            "INSERT OR REPLACE INTO nonces VALUES (?, ?)", (account, self.next_nonce(account) + 1)
        )

    # Weights and commitments ------------------------------------------------------------------

    def weights(self, netuid: int) -> dict[int, list[tuple[int, int]]]:
        """Each setter uid's ``[(dest uid, u16 weight)]`` row."""
        rows = self._rows("SELECT uid, dests, vals FROM weights WHERE netuid=?", (netuid,))
        return {uid: list(zip(json.loads(d), json.loads(v), strict=True)) for uid, d, v in rows}

    def set_weights(self, netuid: int, uid: int, dests: list[int], vals: list[int]) -> None:
        """Replace a uid's weight row."""
        self._exec(
            "INSERT OR REPLACE INTO weights VALUES (?, ?, ?, ?)",
            (netuid, uid, json.dumps(dests), json.dumps(vals)),
        )

    def clear_weights(self, netuid: int, uid: int) -> None:
        """Drop a uid's weight row (its slot was taken by a new registration)."""
        self._exec("DELETE FROM weights WHERE netuid=? AND uid=?", (netuid, uid))

    def commitments(self, netuid: int) -> list[tuple[str, int, list]]:
        """Every ``(hotkey, block, fields)`` commitment on a subnet."""
        rows = self._rows("SELECT hotkey, block, fields FROM commitments WHERE netuid=?", (netuid,))
        return [(hk, block, json.loads(f)) for hk, block, f in rows]

    def set_commitment(self, netuid: int, hotkey: str, block: int, fields: list) -> None:
        """Replace a hotkey's commitment on a subnet."""
        self._exec(
            "INSERT OR REPLACE INTO commitments VALUES (?, ?, ?, ?)",
            (netuid, hotkey, block, json.dumps(fields)),
        )
