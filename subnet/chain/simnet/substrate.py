"""``SimSubstrate``: the SDK's ``Substrate`` contract, answered by a simnet server over HTTP.

bittensor 11 is written against a narrow chain-access protocol (``bittensor.Substrate``) and
lets callers inject any implementation with ``bt.Subtensor(..., substrate=...)``. This class
is that implementation for simnet: every read and write the SDK makes goes to the server as a
JSON request, so ``bt.Subtensor``, ``bt.SetWeights``, ``client.subnets.metagraph`` and the rest
run unchanged. Writes are signed here with the caller's keypair (over canonical JSON bound to
the chain's genesis and the account nonce) and verified by the server.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

from bittensor.balance import Balance
from bittensor.result import ChainError, ExtrinsicResult, RpcConnectionError

from .chain import block_number_of, signing_payload


class SimnetError(RuntimeError):
    """The simnet server refused a request (a bug or an admin misuse, not a chain failure)."""


def post(url: str, method: str, params: dict[str, Any] | None = None, timeout: float = 10.0):
    """One blocking JSON request to a simnet server at ``http://host:port``."""
    body = json.dumps({"method": method, "params": params or {}}).encode()
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise SimnetError(json.loads(error.read() or b"{}").get("error", str(error))) from None
    except (urllib.error.URLError, OSError, TimeoutError) as error:
        raise RpcConnectionError(f"simnet at {url} is unreachable: {error}") from None
    return reply["result"]


def _plain(value: Any) -> Any:
    """Composed calls carry plain values; keep JSON stable (tuples become lists)."""
    return json.loads(json.dumps(value))


class SimSubstrate:
    """A :class:`bittensor.Substrate` backed by a simnet server."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.token_symbols: dict[int, str] = {}
        self._genesis: str | None = None
        self._block_time = 1.0
        self._hashes: dict[int, str] = {}  # block -> its hash, once made (it never changes)

    async def _call(self, method: str, **params: Any) -> Any:
        return await asyncio.to_thread(post, self.url, method, params, self.timeout)

    def balance(self, rao: int, netuid: int = 0) -> Balance:
        """A :class:`Balance` tagged with the subnet's token symbol."""
        return Balance(int(rao), netuid, self.token_symbols.get(netuid) if netuid else None)

    # Lifecycle -----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Read the chain identity; fails fast with a clear error when nothing listens."""
        info = await self._call("info")
        self._genesis, self._block_time = info["genesis"], float(info["block_time"]) or 1.0

    async def close(self) -> None:
        """Nothing to release: every request is its own HTTP connection."""

    # Reads ---------------------------------------------------------------------------------

    async def block_number(self) -> int:
        """The head block number."""
        return int((await self._call("info"))["block"])

    async def finalized_block_number(self) -> int:
        """simnet finalises instantly: the head."""
        return await self.block_number()

    async def block_hash(self, block: int | None = None) -> str:
        """Hash of ``block`` (default: head), as the server made it (it mixes in a secret). A
        made block's hash never changes, so each is asked for once (the SDK asks on every read
        at a block)."""
        if block is None:
            block = await self.block_number()
        block = int(block)
        if block not in self._hashes:
            if len(self._hashes) > 4096:
                self._hashes.clear()
            self._hashes[block] = str(await self._call("block_hash", block=block))
        return self._hashes[block]

    async def _genesis_hash(self) -> str:
        if self._genesis is None:
            await self.connect()
        return str(self._genesis)

    async def block_time(self) -> float:
        """Seconds per block as the server produces them."""
        return self._block_time

    async def spec_version(self) -> int:
        """simnet mimics no particular runtime; a fixed version."""
        return 1

    async def get_block(self, block_number: int | None = None, block_hash: str | None = None):
        """A header-only block record."""
        if block_number is None:
            block_number = block_number_of(block_hash) if block_hash else await self.block_number()
        return {"header": {"number": block_number}, "extrinsics": []}

    async def query(self, module: str, storage_function: str, params=None, block_hash=None):
        """One storage item. simnet keeps only the head state, and block timestamps: the block
        of ``block_hash`` is passed on, and only ``Timestamp.Now`` answers by it."""
        block = None if block_hash is None else block_number_of(block_hash)
        call = self._call("query", module=module, name=storage_function, params=params, block=block)
        return await call

    async def map_has_entries(self, module, storage_function, params, block_hash=None) -> bool:
        """Whether a storage map has any entry under ``params``."""
        rows = await self.query_map(module, storage_function, params, block_hash)
        return bool(rows)

    async def query_map(self, module, storage_function, params=None, block_hash=None):
        """A whole storage map as ``(key, value)`` pairs."""
        rows = await self._call("query_map", module=module, name=storage_function, params=params)
        return [tuple(row) for row in rows]

    async def query_batch(self, module, storage_function, param_sets, block_hash=None):
        """One storage item for many keys, in order."""
        return [await self.query(module, storage_function, p, block_hash) for p in param_sets]

    async def runtime_call(self, api: str, method: str, params: list, block_hash=None):
        """A runtime API call."""
        return await self._call("runtime", module=api, name=method, params=params)

    async def constant(self, module: str, name: str) -> Any:
        """A pallet constant."""
        return await self._call("constant", module=module, name=name)

    async def decode_scale(self, type_string: str, data: Any) -> Any:
        """simnet speaks plain JSON: values arrive decoded already."""
        return data

    async def blocks(self, *, finalized: bool = False) -> AsyncIterator[dict]:
        """New block headers, polled four times per block."""
        last = await self.block_number()
        while True:
            await asyncio.sleep(self._block_time / 4)
            head = await self.block_number()
            for number in range(last + 1, head + 1):
                yield {
                    "header": {"number": number, "parentHash": await self.block_hash(number - 1)}
                }
            last = max(last, head)

    async def events(self, block_hash: str | None = None) -> list[dict]:
        """Events are returned with each submission; blocks keep none."""
        return []

    # Calls ---------------------------------------------------------------------------------

    async def compose(self, call) -> Any:
        """Generated calls are already ``(module, function, params)``; nothing to compose."""
        return call

    async def estimate_fee(self, call, keypair) -> Balance:
        """simnet charges no transaction fees."""
        return Balance(0)

    async def estimate_weight(self, call, keypair) -> dict:
        """simnet does not meter weight."""
        return {"ref_time": 0, "proof_size": 0}

    async def account_next_index(self, address: str) -> int:
        """The next nonce of ``address``."""
        return int(await self._call("next_nonce", account=address))

    async def mev_next_key(self) -> bytes | None:
        """No MEV shield on simnet."""
        return None

    async def submit(self, call, keypair, *, nonce=None, period=None, **_: Any) -> ExtrinsicResult:
        """Sign ``call`` with ``keypair`` and execute it; the outcome is a typed result."""
        body = {"module": call[0], "function": call[1], "params": _plain(dict(call[2]))}
        signer = keypair.ss58_address
        if nonce is None:
            nonce = await self.account_next_index(signer)
        payload = signing_payload(await self._genesis_hash(), body, signer, nonce)
        signature = bytes(keypair.sign(payload)).hex()
        out = await self._call("submit", call=body, signer=signer, nonce=nonce, signature=signature)
        return to_result(out)


def to_result(out: dict[str, Any]) -> ExtrinsicResult:
    """The SDK's :class:`ExtrinsicResult` for a simnet outcome record."""
    events = [
        {"event": {"module_id": "SubtensorModule", "event_id": name, "attributes": attrs}}
        for event in out["events"]
        for name, attrs in event.items()
    ]
    error = None if out["success"] else ChainError(out["message"], name=out["error"])
    return ExtrinsicResult(
        success=bool(out["success"]),
        message=out["message"] if out["success"] else f"{out['error']}: {out['message']}",
        block_hash=out["block_hash"],
        extrinsic_id=f"{out['block']}-0",
        events=events,
        error=error,
    )
