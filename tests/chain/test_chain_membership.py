"""ChainMembership and ChainWeights against a real simnet: slots derived once from the metagraph,
readers from commitments, the subnet plan compiles from that roster, weights once per tempo."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from subnet.chain import ChainSetupError
from subnet.config import ProtocolConfig
from subnet.membership.chain import ChainMembership, JoinSettings, chain_roster
from subnet.node.plan import subnet_plan
from subnet.storage.commitment import ReadSettings, decode_commitment, encode_commitment
from subnet.storage.config import StorageConfig
from subnet.storage.readers import ReaderPool
from subnet.weights.chain import ChainWeights

NETUID, RAO = 3, 1_000_000_000

ORDER = ("validator1", "validator2", "miner1", "miner2")  # miner2 is the holder here


@pytest.fixture(scope="module")
def chain(simnet, wallets, subnet3):
    for name in ORDER:
        subnet3.register(wallets[name])
    for name in ("validator1", "validator2"):
        subnet3.add_stake(wallets[name], 10 * RAO)
    simnet.admin("admin_refresh_permits", netuid=NETUID)
    settings = ReadSettings(bucket="miner1-bucket", endpoint_url="http://127.0.0.1:9")
    subnet3.commit(wallets["miner1"], encode_commitment(settings))
    return subnet3


def hk(wallets, name: str) -> str:
    return wallets[name].hotkey.ss58_address


def test_slots_come_from_permits_and_the_holder_hotkey(chain, wallets):
    membership = ChainMembership(chain, hk(wallets, "miner2"),
                                 ReaderPool(allow_private_endpoints=True))  # fmt: skip
    roster = membership.refresh()
    assert roster.in_slot("validator") == sorted(hk(wallets, n) for n in ("validator1",
                                                                          "validator2"))  # fmt: skip
    assert roster.in_slot("miner") == [hk(wallets, "miner1")]
    assert roster.in_slot("holder") == [hk(wallets, "miner2")]
    assert roster.may(hk(wallets, "validator1"), "runs.score")
    assert not roster.may(hk(wallets, "miner1"), "runs.score")
    assert roster.get(hk(wallets, "miner1")).uid == 2
    assert membership.readers.get(hk(wallets, "miner1")) is not None  # committed a bucket
    assert membership.readers.get(hk(wallets, "validator1")) is None  # did not
    plan = subnet_plan(ProtocolConfig(holder_hotkey=hk(wallets, "miner2")), roster)
    assert set(plan.slots) == {"miner", "validator", "holder"}


def test_join_commits_once_and_keeps_an_unchanged_commitment(chain, wallets, monkeypatch):
    monkeypatch.delenv("BEAM_S3_READ_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("BEAM_S3_READ_SECRET_ACCESS_KEY", raising=False)
    storage = StorageConfig(bucket="v1-bucket", endpoint_url="http://127.0.0.1:9")
    membership = ChainMembership(chain, hk(wallets, "miner2"), ReaderPool(),
                                 JoinSettings(wallets["validator1"], storage))  # fmt: skip
    membership.join()
    committed = chain.commitments()[hk(wallets, "validator1")]
    assert decode_commitment(committed).bucket == "v1-bucket"
    calls = []
    monkeypatch.setattr(chain, "commit", lambda *a: calls.append(a))
    membership.join()
    assert calls == []  # the same settings are on chain already


def test_an_unregistered_holder_is_still_the_holder():
    neurons = [SimpleNamespace(hotkey="a", uid=0, validator_permit=True),
               SimpleNamespace(hotkey="b", uid=1, validator_permit=False)]  # fmt: skip
    roster = chain_roster(neurons, "h")
    assert roster.in_slot("holder") == ["h"] and roster.get("h").uid is None
    assert roster.in_slot("miner") == ["b"] and roster.in_slot("validator") == ["a"]


def test_chain_weights_are_set_at_most_once_per_tempo(simnet, chain, wallets):
    roster = ChainMembership(chain, hk(wallets, "miner2"), ReaderPool()).refresh()
    sink = ChainWeights(chain, wallets["validator1"])
    simnet.step(10)
    moving = {hk(wallets, "miner1"): 0.6, hk(wallets, "miner2"): 0.0}
    first = sink.offer(moving, roster, window=0, last_tick=0)
    assert first is not None and first.ok, first
    assert first.weights == {"2": 1.0}  # uid -> weight; zero scores take no room
    assert sink.offer(moving, roster, window=1, last_tick=first.tick) is None  # not a tempo yet
    assert sink.offer({}, roster, window=1, last_tick=0) is None  # nothing positive to set


def test_a_chain_that_is_down_is_a_setup_error_and_the_roster_is_kept():
    """A restarting chain costs a refresh, never the process (the loop keeps the last roster)."""
    from bittensor.result import RpcConnectionError

    from subnet.chain import ChainSetupError

    class Down:
        def metagraph(self):
            raise RpcConnectionError("simnet at ws://127.0.0.1:9 is unreachable")

    membership = ChainMembership(Down(), "5" + "H" * 47, ReaderPool())
    before = membership.roster
    with pytest.raises(ChainSetupError, match="did not answer a metagraph read"):
        membership.refresh()
    assert membership.roster is before


def test_on_a_real_network_a_commitment_that_is_not_beams_is_not_overwritten(
    chain, wallets, monkeypatch
):
    # validator2's hotkey was used by another subnet's software, which committed its own text.
    monkeypatch.delenv("BEAM_S3_READ_ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("BEAM_S3_READ_SECRET_ACCESS_KEY", raising=False)
    chain.commit(wallets["validator2"], "ipfs://QmOtherSubnetsModelCard")
    storage = StorageConfig(bucket="v2-bucket", endpoint_url="http://127.0.0.1:9")
    guarded = JoinSettings(wallets["validator2"], storage, guard=True)
    with pytest.raises(ChainSetupError) as refused:
        ChainMembership(chain, hk(wallets, "miner2"), ReaderPool(), guarded).join()
    line = str(refused.value)
    assert "'ipfs://QmOtherSubnetsModelCard'" in line and "--neuron.overwrite_commitment" in line
    assert chain.commitments()[hk(wallets, "validator2")] == "ipfs://QmOtherSubnetsModelCard"
    # a local chain (no guard), or the flag, replaces it
    asked = JoinSettings(wallets["validator2"], storage, guard=True, overwrite=True)
    ChainMembership(chain, hk(wallets, "miner2"), ReaderPool(), asked).join()
    assert decode_commitment(chain.commitments()[hk(wallets, "validator2")]).bucket == "v2-bucket"
    # Beam's own earlier commitment is replaced without asking (a new bucket, say)
    moved = StorageConfig(bucket="v2-new-bucket", endpoint_url="http://127.0.0.1:9")
    again = JoinSettings(wallets["validator2"], moved, guard=True)
    ChainMembership(chain, hk(wallets, "miner2"), ReaderPool(), again).join()
    assert decode_commitment(chain.commitments()[hk(wallets, "validator2")]).bucket == (
        "v2-new-bucket"
    )
