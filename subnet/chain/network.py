"""The one place that builds a ``bt.Subtensor``, for any ``--subtensor.network`` value.

``finney``, ``test``, ``local`` and ``ws(s)://`` endpoints go to the SDK's own RPC backend;
``sim://host:port`` injects :class:`~subnet.chain.simnet.SimSubstrate` through the SDK's
documented ``substrate=`` seam, so the code above this line is the same on every network.
"""

from __future__ import annotations

import concurrent.futures

import bittensor as bt

from .errors import ChainSetupError, ChainUnavailable
from .simnet import SimSubstrate

_HINTS = {
    "sim": "start the local stack with `python scripts/localnet.py` (or `beam-simnet`)",
    "local": "start the subtensor localnet (docs/localnet-docker.md) or use sim://",
}


def simnet_url(network: str) -> str | None:
    """``http://host:port`` for a ``sim://host:port`` network string, else None."""
    if network.startswith("sim://"):
        return "http://" + network.removeprefix("sim://")
    return None


def build_subtensor(network: str) -> bt.Subtensor:
    """A blocking ``bt.Subtensor`` for ``network`` (not yet connected)."""
    url = simnet_url(network)
    if url is not None:
        # The SDK's ``network`` only labels explorer links and caches here; use the endpoint.
        return bt.Subtensor("ws://" + network.removeprefix("sim://"), substrate=SimSubstrate(url))
    try:
        return bt.Subtensor(network)
    except ValueError as error:
        raise ChainSetupError(f"--subtensor.network {network!r}: {error}") from None


def connect(network: str, *, timeout: float = 15.0) -> bt.Subtensor:
    """Build a Subtensor and prove it answers within ``timeout`` seconds (no hang)."""
    subtensor = build_subtensor(network)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    future = pool.submit(lambda: subtensor.block)
    try:
        future.result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        _close(subtensor)
        raise ChainUnavailable(_unreachable(network, f"no answer in {timeout:.0f}s")) from None
    except (bt.BittensorError, OSError) as error:
        _close(subtensor)
        raise ChainUnavailable(_unreachable(network, str(error).splitlines()[0])) from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    return subtensor


def _close(subtensor: bt.Subtensor) -> None:
    """Best effort: nothing half-open may outlive the error line (see ChainClient.close)."""
    try:
        subtensor.close()
    except Exception:  # noqa: BLE001, S110 - it never connected, or is gone already
        return


def _unreachable(network: str, why: str) -> str:
    kind = "sim" if network.startswith("sim://") else network
    hint = _HINTS.get(kind, "check --subtensor.network and your internet connection")
    return f"cannot reach chain {network!r} ({why}); {hint}"
