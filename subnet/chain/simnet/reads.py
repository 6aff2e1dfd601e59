"""The chain reads simnet answers, keyed exactly as the SDK asks for them.

The SDK reads storage as ``(pallet, item, params)``, runtime APIs as ``(api, method, params)``
and constants as ``(pallet, name)``, and decodes plain values (ss58 strings, ints, lists,
dicts). Each table below maps one such key to a function of the state. A read that is not in
these tables is *unanswered*: the server counts it, and a test asserts that a full neuron flow
leaves that count at zero, so an SDK upgrade that starts reading something new fails CI.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .state import ChainState, Neuron

Read = Callable[[ChainState, list], Any]


def _neurons(state: ChainState, netuid: Any) -> list[Neuron]:
    return state.neurons(int(netuid))


def _hp(state: ChainState, netuid: Any, name: str) -> Any:
    subnet = state.subnet(int(netuid))
    return None if subnet is None else getattr(subnet.hparams, name)


def _uid(state: ChainState, p: list) -> int | None:
    neuron = state.neuron_by_hotkey(int(p[0]), str(p[1]))
    return None if neuron is None else neuron.uid


def _account(state: ChainState, p: list) -> dict[str, Any]:
    free = state.balance(str(p[0]))
    return {
        "nonce": state.next_nonce(str(p[0])),
        "consumers": 0,
        "providers": 1,
        "sufficients": 0,
        "data": {"free": free, "reserved": 0, "frozen": 0, "flags": 0},
    }


def _stake_column(state: ChainState, netuid: int) -> list[int]:
    return [state.stake(netuid, n.hotkey) for n in state.neurons(netuid)]


STORAGE: dict[tuple[str, str], Read] = {
    ("System", "Account"): _account,
    ("SubtensorModule", "Uids"): _uid,
    ("SubtensorModule", "Burn"): lambda s, p: _hp(s, p[0], "burn"),
    ("SubtensorModule", "CollateralLockShare"): lambda s, p: 0,
    ("SubtensorModule", "CommitRevealWeightsEnabled"): lambda s, p: _hp(
        s, p[0], "commit_reveal_weights_enabled"
    ),
    ("SubtensorModule", "WeightsSetRateLimit"): lambda s, p: _hp(s, p[0], "weights_rate_limit"),
    ("SubtensorModule", "LastUpdate"): lambda s, p: [n.last_update for n in _neurons(s, p[0])],
    ("SubtensorModule", "MinAllowedWeights"): lambda s, p: _hp(s, p[0], "min_allowed_weights"),
    ("SubtensorModule", "MaxWeightsLimit"): lambda s, p: _hp(s, p[0], "max_weights_limit"),
    ("SubtensorModule", "SubnetEpochConsensus"): lambda s, p: "Yuma",
    ("SubtensorModule", "ValidatorPermit"): lambda s, p: [n.permit for n in _neurons(s, p[0])],
    ("SubtensorModule", "Tempo"): lambda s, p: _hp(s, p[0], "tempo"),
    ("SubtensorModule", "WeightsVersionKey"): lambda s, p: _hp(s, p[0], "weights_version"),
    ("SubtensorModule", "NetworksAdded"): lambda s, p: s.subnet(int(p[0])) is not None,
    ("SubtensorModule", "SubnetworkN"): lambda s, p: len(_neurons(s, p[0])),
    ("SubtensorModule", "MaxAllowedUids"): lambda s, p: _hp(s, p[0], "max_uids"),
    ("SubtensorModule", "NetworkRegistrationAllowed"): lambda s, p: _hp(
        s, p[0], "registration_allowed"
    ),
    ("SubtensorModule", "Owner"): lambda s, p: s.owner(str(p[0])),
    ("SubtensorModule", "Keys"): lambda s, p: next(
        (n.hotkey for n in _neurons(s, p[0]) if n.uid == int(p[1])), None
    ),
    ("SubtensorModule", "SubnetOwner"): lambda s, p: getattr(
        s.subnet(int(p[0])), "owner_coldkey", None
    ),
    ("SubtensorModule", "SubnetOwnerHotkey"): lambda s, p: getattr(
        s.subnet(int(p[0])), "owner_hotkey", None
    ),
    ("SubtensorModule", "MechanismCountCurrent"): lambda s, p: 1,
}


def _token_symbols(state: ChainState, p: list) -> list[tuple[Any, Any]]:
    out = []
    for netuid in state.netuids():
        subnet = state.subnet(netuid)
        out.append((netuid, "0x" + subnet.symbol.encode().hex()))
    return out


def _commitment_of(state: ChainState, p: list) -> list[tuple[Any, Any]]:
    return [
        (hotkey, {"block": block, "deposit": 0, "info": {"fields": fields}})
        for hotkey, block, fields in state.commitments(int(p[0]))
    ]


STORAGE_MAPS: dict[tuple[str, str], Read] = {
    ("SubtensorModule", "TokenSymbol"): _token_symbols,
    ("Commitments", "CommitmentOf"): _commitment_of,
    ("Commitments", "RevealedCommitments"): lambda s, p: [],
    ("SubtensorModule", "Uids"): lambda s, p: [(n.hotkey, n.uid) for n in _neurons(s, p[0])],
    ("SubtensorModule", "Keys"): lambda s, p: [(n.uid, n.hotkey) for n in _neurons(s, p[0])],
    ("SubtensorModule", "NetworksAdded"): lambda s, p: [(u, True) for u in s.netuids()],
}


def metagraph(state: ChainState, p: list) -> dict[str, Any] | None:
    """The ``SubnetInfoRuntimeApi.get_metagraph`` record for one subnet (None if absent)."""
    netuid = int(p[0])
    subnet = state.subnet(netuid)
    if subnet is None:
        return None
    neurons, block, hp = state.neurons(netuid), state.block, subnet.hparams
    stakes = _stake_column(state, netuid)
    active = [block - max(n.last_update, n.registered_at) <= hp.activity_cutoff for n in neurons]
    return {
        "netuid": netuid,
        "name": subnet.name,
        "symbol": subnet.symbol,
        "block": block,
        "tempo": hp.tempo,
        "last_step": subnet.last_epoch,
        "blocks_since_last_step": block - subnet.last_epoch,
        "owner_hotkey": subnet.owner_hotkey,
        "owner_coldkey": subnet.owner_coldkey,
        "network_registered_at": subnet.registered_at,
        "num_uids": len(neurons),
        "max_uids": hp.max_uids,
        "hotkeys": [n.hotkey for n in neurons],
        "coldkeys": [n.coldkey for n in neurons],
        "identities": [None] * len(neurons),
        "axons": [None] * len(neurons),
        "active": active,
        "validator_permit": [n.permit for n in neurons],
        "last_update": [n.last_update for n in neurons],
        "block_at_registration": [n.registered_at for n in neurons],
        "rank": [n.rank for n in neurons],
        "trust": [n.trust for n in neurons],
        "consensus": [n.consensus for n in neurons],
        "incentives": [n.incentive for n in neurons],
        "dividends": [n.dividends for n in neurons],
        "pruning_score": [n.emission for n in neurons],
        "emission": [n.emission for n in neurons],
        "alpha_stake": stakes,
        "tao_stake": [0] * len(neurons),
        "total_stake": stakes,
        "tao_in": 0,
        "alpha_in": 0,
        "moving_price": None,
        "identity": None,
    }


RUNTIME: dict[tuple[str, str], Read] = {
    ("SubnetInfoRuntimeApi", "get_metagraph"): metagraph,
}

CONSTANTS: dict[tuple[str, str], Any] = {
    ("SubtensorModule", "InitialMaxAllowedUids"): 256,
}
