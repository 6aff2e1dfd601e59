"""simnet keeps its state in SQLite: a restarted server resumes the same chain."""

from __future__ import annotations

from subnet.chain import ChainClient, build_subtensor
from subnet.chain.simnet.process import SimnetProcess

NETUID, RAO = 3, 1_000_000_000


def test_restart_keeps_block_registrations_weights_and_commitments(tmp_path, wallets):
    db = tmp_path / "chain.db"
    sim = SimnetProcess(db, tmp_path / "a.log", block_time=0).start()
    owner, miner = wallets["owner"], wallets["miner1"]
    sim.admin("admin_create_subnet", netuid=NETUID, owner_coldkey=owner.coldkeypub.ss58_address,
              owner_hotkey=owner.hotkey.ss58_address)  # fmt: skip
    sim.admin("admin_fund", coldkey=miner.coldkeypub.ss58_address, rao=10 * RAO)
    chain = ChainClient(build_subtensor(sim.network), NETUID)
    uid = chain.register(miner)
    chain.commit(miner, "persisted")
    sim.step(7)
    before = (chain.block(), chain.metagraph().hotkeys)
    sim.stop()

    again = SimnetProcess(db, tmp_path / "b.log", block_time=0).start()
    try:
        chain = ChainClient(build_subtensor(again.network), NETUID)
        assert (chain.block(), chain.metagraph().hotkeys) == before
        assert chain.uid_of(miner.hotkey.ss58_address) == uid
        assert chain.commitments() == {miner.hotkey.ss58_address: "persisted"}
        # the nonce survived too, so the next write is accepted (not a replay)
        chain.commit(miner, "after restart")
        assert chain.commitments()[miner.hotkey.ss58_address] == "after restart"
    finally:
        again.stop()
