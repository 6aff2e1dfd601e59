"""The extrinsics simnet executes, with the chain's rules and its error names.

Each handler runs after the server has verified the signature, so ``origin`` is the ss58
address that provably signed the call. Handlers raise :class:`CallError` with the pallet's own
error name (``NotRegistered``, ``SettingWeightsTooFast`` ...), which the SDK maps to its
``ErrorCode`` exactly as it would for finney.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .state import U16_MAX, ChainState, Neuron


class CallError(Exception):
    """A dispatch failure carrying the pallet's error name."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


Handler = Callable[[ChainState, str, dict[str, Any]], dict[str, Any]]


def _subnet(state: ChainState, netuid: int):
    subnet = state.subnet(int(netuid))
    if subnet is None:
        raise CallError("SubnetNotExists", f"netuid {netuid} does not exist")
    return subnet


def burned_register(state: ChainState, origin: str, p: dict[str, Any]) -> dict[str, Any]:
    """Pay the burn from the signing coldkey and give ``hotkey`` a uid on ``netuid``."""
    subnet = _subnet(state, p["netuid"])
    hotkey, block = str(p["hotkey"]), state.block
    if not subnet.hparams.registration_allowed:
        raise CallError("SubNetRegistrationDisabled", "registration is off on this subnet")
    if state.neuron_by_hotkey(subnet.netuid, hotkey) is not None:
        raise CallError("HotKeyAlreadyRegisteredInSubNet", f"{hotkey} already has a uid")
    owner = state.owner(hotkey)
    if owner is not None and owner != origin:
        raise CallError("NonAssociatedColdKey", f"{hotkey} belongs to another coldkey")
    burn = subnet.hparams.burn
    if state.balance(origin) < burn:
        raise CallError("NotEnoughBalanceToStake", f"registration costs {burn} rao")
    neurons = state.neurons(subnet.netuid)
    if len(neurons) < subnet.hparams.max_uids:
        uid = len(neurons)
    else:
        prunable = [n for n in neurons if block - n.registered_at >= subnet.hparams.immunity_period]
        if not prunable:
            raise CallError("NoNeuronIdAvailable", "subnet is full and every neuron is immune")
        uid = min(prunable, key=lambda n: (n.emission, n.registered_at)).uid
        state.clear_weights(subnet.netuid, uid)
    state.set_balance(origin, state.balance(origin) - burn)
    state.set_owner(hotkey, origin)
    state.put_neuron(Neuron(subnet.netuid, uid, hotkey, origin, registered_at=block))
    return {"NeuronRegistered": {"netuid": subnet.netuid, "uid": uid, "hotkey": hotkey}}


def add_stake(state: ChainState, origin: str, p: dict[str, Any]) -> dict[str, Any]:
    """Move ``amount_staked`` rao from the signing coldkey onto its own hotkey's stake."""
    subnet = _subnet(state, p["netuid"])
    hotkey, amount = str(p["hotkey"]), int(p["amount_staked"])
    if state.owner(hotkey) != origin:
        raise CallError("NonAssociatedColdKey", f"{hotkey} is not owned by the signer")
    if amount <= 0 or state.balance(origin) < amount:
        raise CallError("NotEnoughBalanceToStake", f"balance below {amount} rao")
    state.set_balance(origin, state.balance(origin) - amount)
    state.set_stake(subnet.netuid, hotkey, state.stake(subnet.netuid, hotkey) + amount)
    return {"StakeAdded": {"hotkey": hotkey, "netuid": subnet.netuid, "amount": amount}}


def set_weights(state: ChainState, origin: str, p: dict[str, Any]) -> dict[str, Any]:
    """Store the signing hotkey's weight row, enforcing the pallet's checks."""
    subnet = _subnet(state, p["netuid"])
    hp = subnet.hparams
    if int(p.get("mecid", 0) or 0) != 0:
        raise CallError("MechanismDoesNotExist", "simnet subnets have one mechanism")
    if hp.commit_reveal_weights_enabled:
        raise CallError("CommitRevealEnabled", "use commit-reveal on this subnet")
    me = state.neuron_by_hotkey(subnet.netuid, origin)
    if me is None:
        raise CallError("HotKeyNotRegisteredInSubNet", f"{origin} is not registered")
    dests, vals = [int(d) for d in p["dests"]], [int(w) for w in p["weights"]]
    n = len(state.neurons(subnet.netuid))
    if len(dests) != len(vals):
        raise CallError("WeightVecNotEqualSize", "dests and weights differ in length")
    if len(set(dests)) != len(dests):
        raise CallError("DuplicateUids", "a uid appears twice")
    if any(d < 0 or d >= n for d in dests) or any(w < 0 or w > U16_MAX for w in vals):
        raise CallError("UidVecContainInvalidOne", "a uid or weight is out of range")
    if int(p.get("version_key", 0)) < hp.weights_version:
        raise CallError("IncorrectWeightVersionKey", "weights version key is too old")
    self_only = dests == [me.uid]
    if not me.permit and not self_only:
        raise CallError("NeuronNoValidatorPermit", "only permitted validators weight others")
    if len(dests) < min(hp.min_allowed_weights, n) and not self_only:
        raise CallError("WeightVecLengthIsLow", f"set at least {hp.min_allowed_weights} weights")
    if me.last_update and state.block - me.last_update < hp.weights_rate_limit:
        raise CallError(
            "SettingWeightsTooFast",
            f"weights set at block {me.last_update}; rate limit is {hp.weights_rate_limit} blocks",
        )
    top = max(vals, default=0)
    if top == 0:
        raise CallError("WeightVecLengthIsLow", "all weights are zero")
    scaled = [round(w * U16_MAX / top) for w in vals]  # the pallet max-upscales before storing
    state.set_weights(subnet.netuid, me.uid, dests, scaled)
    me.last_update = state.block
    state.put_neuron(me)
    return {"WeightsSet": {"netuid": subnet.netuid, "uid": me.uid}}


MAX_FIELDS = 3
MAX_FIELD_BYTES = 128


def _flatten(fields: Any) -> list[dict[str, str]]:
    """Accept ``[{...}]`` or the nested ``[[{...}]]`` form older SDKs sent."""
    out: list[dict[str, str]] = []
    for entry in fields or []:
        out.extend(_flatten(entry) if isinstance(entry, list) else [entry])
    return out


def set_commitment(state: ChainState, origin: str, p: dict[str, Any]) -> dict[str, Any]:
    """Store the signing hotkey's commitment: at most 3 ``Raw`` fields of 128 bytes each."""
    subnet = _subnet(state, p["netuid"])
    if state.neuron_by_hotkey(subnet.netuid, origin) is None:
        raise CallError("AccountNotAllowedCommit", f"{origin} is not registered")
    fields = _flatten((p.get("info") or {}).get("fields"))
    if len(fields) > MAX_FIELDS:
        raise CallError("TooManyFieldsInCommitmentInfo", f"at most {MAX_FIELDS} fields")
    for entry in fields:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise CallError("InvalidCommitment", "each field is one {'RawN': '0x..'} variant")
        ((variant, value),) = entry.items()
        raw = bytes.fromhex(str(value).removeprefix("0x"))
        if not variant.startswith("Raw") or variant != f"Raw{len(raw)}":
            raise CallError("InvalidCommitment", f"field {variant} does not match its length")
        if len(raw) > MAX_FIELD_BYTES:
            raise CallError("InvalidCommitment", f"a field holds at most {MAX_FIELD_BYTES} bytes")
    previous = {hk: b for hk, b, _ in state.commitments(subnet.netuid)}.get(origin)
    limit = subnet.hparams.commitment_rate_limit
    if previous is not None and limit and state.block - previous < limit:
        raise CallError("CommitmentSetRateLimitExceeded", f"one commitment per {limit} blocks")
    state.set_commitment(subnet.netuid, origin, state.block, fields)
    return {"Commitment": {"netuid": subnet.netuid, "who": origin}}


HANDLERS: dict[tuple[str, str], Handler] = {
    ("SubtensorModule", "burned_register"): burned_register,
    ("SubtensorModule", "add_stake"): add_stake,
    ("SubtensorModule", "set_weights"): set_weights,
    ("SubtensorModule", "set_mechanism_weights"): set_weights,
    ("Commitments", "set_commitment"): set_commitment,
}
