"""The full chain flow through the real bittensor SDK against a simnet process.

The tests in this module run in order on one chain: register, commit, read the metagraph,
set weights, run an epoch, and finally check that simnet answered every read the SDK made.
"""

from __future__ import annotations

import time

import bittensor as bt
import pytest

from subnet.chain import NotRegistered
from subnet.chain.simnet import SimSubstrate

NETUID, RAO = 3, 1_000_000_000


def test_register_burns_and_assigns_uids(simnet, wallets, subnet3):
    before = subnet3.subtensor.query(
        bt.storage.System.Account, [wallets["miner1"].coldkeypub.ss58_address]
    )
    for name in ("validator1", "validator2", "miner1", "miner2"):
        subnet3.register(wallets[name])
    uids = [
        subnet3.uid_of(wallets[n].hotkey.ss58_address)
        for n in ("validator1", "validator2", "miner1", "miner2")
    ]
    assert uids == [0, 1, 2, 3]
    after = subnet3.subtensor.query(
        bt.storage.System.Account, [wallets["miner1"].coldkeypub.ss58_address]
    )
    assert before["data"]["free"] - after["data"]["free"] == RAO  # the burn
    # registering again is idempotent at our layer, and the chain itself refuses a duplicate
    assert subnet3.register(wallets["miner1"]) == 2
    call = bt.calls.SubtensorModule.burned_register(
        netuid=NETUID, hotkey=wallets["miner1"].hotkey.ss58_address
    )
    result = subnet3.subtensor.submit_call(call, wallets["miner1"])
    assert not result.success and result.error.name == "HotKeyAlreadyRegisteredInSubNet"


def test_unregistered_hotkey_is_reported(subnet3, wallets):
    with pytest.raises(NotRegistered, match="not registered on netuid 3"):
        subnet3.require_registered(wallets["owner"].hotkey.ss58_address)


def test_stake_gives_validator_permits(simnet, wallets, subnet3):
    for name in ("validator1", "validator2"):
        subnet3.add_stake(wallets[name], 10 * RAO)
    simnet.admin("admin_refresh_permits", netuid=NETUID)
    graph = subnet3.metagraph()
    assert [n.validator_permit for n in graph.neurons] == [True, True, False, False]
    assert graph.neurons[0].total_stake.rao == 10 * RAO


def test_commitments_round_trip_through_the_metagraph(subnet3, wallets):
    long_text = "b1|" + "x" * 300  # three Raw fields
    subnet3.commit(wallets["miner1"], long_text)
    subnet3.commit(wallets["miner2"], "hello from miner2")
    got = subnet3.commitments()
    assert got[wallets["miner1"].hotkey.ss58_address] == long_text
    assert got[wallets["miner2"].hotkey.ss58_address] == "hello from miner2"
    graph = subnet3.metagraph()
    assert graph.neurons[2].commitment.value == long_text


def test_commitment_over_the_pallet_limit_is_refused(subnet3, wallets):
    call = bt.calls.Commitments.set_commitment(NETUID, {"fields": [{"Raw4": "0x61626364"}] * 4})
    result = subnet3.subtensor.submit_call(call, wallets["miner1"], signer="hotkey")
    assert not result.success and result.error.name == "TooManyFieldsInCommitmentInfo"


def test_unregistered_hotkey_cannot_commit(subnet3, wallets):
    call = bt.calls.Commitments.set_commitment(NETUID, {"fields": [{"Raw2": "0x6869"}]})
    result = subnet3.subtensor.submit_call(call, wallets["owner"], signer="hotkey")
    assert not result.success


def test_forged_signature_is_rejected(simnet, wallets):
    victim, attacker = wallets["validator1"].hotkey, wallets["miner2"].hotkey

    class Forger:
        ss58_address = victim.ss58_address

        def sign(self, data: bytes) -> bytes:
            return attacker.sign(data)

    substrate = SimSubstrate(simnet.url)
    call = bt.calls.SubtensorModule.set_weights(
        netuid=NETUID, dests=[2], weights=[1], version_key=0
    )
    import asyncio

    result = asyncio.run(substrate.submit(call, Forger()))
    assert not result.success and result.error.name == "BadSignature"


def test_replayed_nonce_is_rejected(simnet, wallets):
    import asyncio

    substrate = SimSubstrate(simnet.url)
    hotkey = wallets["miner2"].hotkey
    nonce = asyncio.run(substrate.account_next_index(hotkey.ss58_address))
    call = bt.calls.Commitments.set_commitment(NETUID, {"fields": [{"Raw2": "0x6869"}]})
    assert asyncio.run(substrate.submit(call, hotkey, nonce=nonce)).success
    replay = asyncio.run(substrate.submit(call, hotkey, nonce=nonce))
    assert not replay.success and replay.error.name == "Stale"


def test_set_weights_and_rate_limit(simnet, wallets, subnet3):
    simnet.step(10)
    first = subnet3.set_weights(wallets["validator1"], {2: 0.25, 3: 0.75})
    assert first.ok, first
    assert subnet3.set_weights(wallets["validator2"], {2: 0.25, 3: 0.75}).ok
    # Our client sees the rate limit and does not submit ...
    second = subnet3.set_weights(wallets["validator1"], {2: 0.5, 3: 0.5})
    assert not second.ok and second.reason == "rate_limited"
    # ... and the chain itself refuses a raw call that ignores it.
    raw = bt.calls.SubtensorModule.set_weights(
        netuid=NETUID, dests=[2, 3], weights=[1, 1], version_key=0
    )
    refused = subnet3.subtensor.submit_call(raw, wallets["validator1"], signer="hotkey")
    assert not refused.success and refused.error.name == "SettingWeightsTooFast"
    simnet.step(5)
    assert subnet3.blocks_until_weights_allowed(wallets["validator1"].hotkey.ss58_address) == 0


def test_miner_without_permit_cannot_weight_others(subnet3, wallets):
    raw = bt.calls.SubtensorModule.set_weights(netuid=NETUID, dests=[3], weights=[1], version_key=0)
    result = subnet3.subtensor.submit_call(raw, wallets["miner1"], signer="hotkey")
    assert not result.success and result.error.name == "NeuronNoValidatorPermit"


def test_epoch_pays_miners_by_weight_and_validators_by_dividends(simnet, subnet3):
    simnet.step(10)  # one full tempo
    graph = subnet3.metagraph()
    incentive = [round(n.incentive, 3) for n in graph.neurons]
    assert incentive == [0.0, 0.0, 0.25, 0.75]
    assert graph.neurons[0].dividends == pytest.approx(0.5, abs=1e-3)
    assert graph.neurons[3].emission.rao > graph.neurons[2].emission.rao > 0


def test_following_blocks(simnet, subnet3):
    import threading

    start = subnet3.block()
    stepper = threading.Timer(0.3, lambda: simnet.step(3))
    stepper.start()
    seen = []
    for number in subnet3.follow_blocks():
        seen.append(number)
        if number >= start + 3:
            break
    stepper.join()
    assert seen == [start + 1, start + 2, start + 3]
    assert subnet3.wait_for_block(start + 3) >= start + 3


def test_the_check_beacon_is_a_drand_pulse_out_after_the_block(simnet, subnet3, tmp_path):
    """The check beacon: the chain's drand pulse of the first round out after the block was
    made, stored once drand's time for it comes; stable once out; another chain (another secret)
    has other pulses, so nobody can work one out ahead. Block hashes stay what they were."""
    from subnet.chain.simnet.chain import SimChain, block_number_of
    from subnet.chain.simnet.drand import randomness
    from subnet.chain.simnet.state import ChainState
    from subnet.clock import BlockClock
    from subnet.clock.block import drand_round_after

    simnet.step(1)
    head = subnet3.block()
    made = subnet3.block_hash(head)
    assert block_number_of(made) == head and subnet3.block_hash(head) == made
    schedule = subnet3.drand_schedule()
    assert schedule is not None
    number = drand_round_after(subnet3.block_timestamp(head), *schedule)
    assert schedule[0] + (number - 1) * schedule[1] > subnet3.block_timestamp(head)
    clock = BlockClock(subnet3)
    assert clock.beacon(head + 5) is None
    deadline = time.monotonic() + 30 * schedule[1]  # the round is out within one period
    while (value := clock.beacon(head)) is None:
        assert time.monotonic() < deadline, f"round {number} never stored"
        time.sleep(0.05)
    assert value == f"drand-{number}-{subnet3.drand_randomness(number)}"
    assert BlockClock(subnet3).beacon(head) == value  # every neuron draws the same
    other = SimChain(ChainState(str(tmp_path / "other.db")))
    assert randomness(other.entropy, number) != value.split("-")[-1]
    for _ in range(head):
        other.step()
    assert other.block_hash(head) != made
    with pytest.raises(ValueError, match="not made yet"):
        other.block_hash(head + 1)


def test_every_sdk_read_was_answered(simnet):
    """An SDK upgrade that starts reading something simnet does not serve must fail here."""
    assert simnet.admin("admin_stats")["unanswered"] == {}
