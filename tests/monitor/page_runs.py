"""Real run folders for the run page's tests: a topology run in threads, written as a node writes.

The members are the real role classes (``BaseNeuron.run``), one thread each, on a lockstep clock
over in-memory stores (as ``tests/topologies/test_in_memory.py`` runs every builtin topology).
What differs from that run is only where its records go and what they count, so that the
folder is the one a room or local run leaves: each member's store and readers are counted on
its own byte meter (``CountingStore``, as a node's bucket and readers are), and its metrics are
written to ``<root>/state/<role>-<hotkey[:8]>/metrics.jsonl`` with the fields a node's
``make_runtime`` adds to every record (role, hotkey, config hash, plan digest). ``run.json``
holds what the room's harness (``LocalRoom``) or the local subnet's writes: the participants,
their slots, the network (``room ...`` for a room, none on a chain) and the protocol.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

from subnet.config import WindowConfig
from subnet.membership import StaticMembership, StaticReaders
from subnet.monitor import MetricsSink
from subnet.neuron.registry import ROLE_CLASSES
from subnet.scoring.weights import weights_for_chain
from subnet.storage.counting import ByteMeter, CountingStore
from subnet.topology import Template, load_spec
from subnet.topology.params import resolve, substitute
from subnet.weights import NoWeights, WeightsSet

TESTS = Path(__file__).resolve().parents[1]
# The in-memory runs' window: ticks [0, 4) upload, [4, 6) score, [6, 10) merge (a commit-reveal
# lane: score [4, 8), merge [8, 10)), as in tests/topologies/test_in_memory.py.
BLOCKS = 10
SMALL = {
    "workers": 2,
    "cohort": 2,
    "min_workers": 2,
    "inner_steps": 2,
    "local_steps": 2,
    "units_per_worker": 2,
    "target_loss": 0.0,
    "points": [0.001, 0.002],
}


def _load(name: str, path: Path) -> ModuleType:
    """A test-support module by path (the neuron tests' world, the topology tests' clock)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


neuron_world = _load("neuron_conftest", TESTS / "neuron" / "conftest.py")
lockstep = _load("lockstep", TESTS / "topologies" / "lockstep.py")


class ChainShares:
    """The subnet's weight sink in threads: every window, the shares a chain would be sent
    (``weights_for_chain``: positive moving scores normalized to sum 1), by hotkey, accepted."""

    def offer(self, moving, roster, *, window: int, last_tick: int) -> WeightsSet | None:
        """The moving scores' shares, set at ``window``; None while nobody has a positive score."""
        uids = {hotkey: i for i, hotkey in enumerate(sorted(moving))}
        shares = weights_for_chain(moving, uids)
        by_hotkey = {hotkey: shares[uid] for hotkey, uid in uids.items() if uid in shares}
        return WeightsSet(True, "included", window, by_hotkey) if by_hotkey else None


def roster_names(ref: str | None) -> dict[str, str]:
    """name -> slot: each slot at its minimum (at least one); the first holder is ``holder``
    (the subnet: one holder, one validator, two miners)."""
    if ref is None:
        return dict(neuron_world.NAMES)
    spec = load_spec(ref)
    values = resolve(spec.params, template(ref, 1).params)
    names: dict[str, str] = {}
    for slot, role in spec.roles.items():
        for i in range(max(1, substitute(role.min, values))):
            first_holder = role.role_class == "holder" and "holder" not in names
            names["holder" if first_holder else f"{slot}{i}"] = slot
    return names


def template(ref: str, rounds: int) -> Template:
    """``ref`` at the small settings the topology tests use, for ``rounds`` rounds."""
    spec = load_spec(ref)
    params = {k: v for k, v in SMALL.items() if k in spec.params}
    params.update({k: rounds for k in ("rounds", "max_rounds") if k in spec.params})
    return Template(topology=ref, params=params)


def run_folder(root: Path, data_dir: Path, ref: str | None, rounds: int) -> Path:
    """Run ``ref`` (None: the subnet, as on a chain) for ``rounds`` windows in threads and
    return ``root``, a run folder the run page reads. Raises if a member failed or hung."""
    names = roster_names(ref)
    plan_template = template(ref, rounds) if ref else None
    spec = load_spec(ref) if ref else None
    sealed = spec is not None and any(lane.commit_reveal for lane in spec.lanes.values())
    report = 8 if spec is None or sealed else 6
    window = WindowConfig(blocks=BLOCKS, upload_deadline=4, report_deadline=report)
    world = neuron_world.make_world(root / "world", data_dir, names, plan_template, window=window)
    step = lockstep.Lockstep(len(names), rounds * BLOCKS - 1)
    hotkeys = {n: world.hotkey(n) for n in names}
    classes = {n: spec.roles[s].role_class if spec else s for n, s in names.items()}
    neurons = {}
    for name in names:
        rt, meter = world.runtimes[name], ByteMeter()
        readers = {hotkeys[n]: CountingStore(world.stores[n], meter) for n in names}
        rt.meter, rt.store = meter, CountingStore(world.stores[name], meter)
        rt.membership = StaticMembership(world.roster, StaticReaders(readers))
        folder = root / "state" / f"{classes[name]}-{hotkeys[name][:8]}"
        rt.metrics = MetricsSink(
            folder / "metrics.jsonl",
            role=classes[name],
            hotkey=hotkeys[name],
            config_hash=rt.cfg.protocol.config_hash(),
            plan=rt.plan.digest,
        )
        rt.clock = step.clock()
        # a room's scores only feed merges (``subnet.room.node``); the subnet's set weights
        rt.weights = NoWeights() if ref else ChainShares()
        neurons[name] = ROLE_CLASSES[classes[name]](rt)
    started = time.time()
    for _ in range(2):  # holders first (the dataset and version 0), then whoever waited on them
        for neuron in sorted(neurons.values(), key=lambda n: n.role != "holder"):
            neuron.next_setup = 0.0
            neuron.try_setup()
    errors: list[BaseException] = []

    def go(neuron) -> None:
        try:
            neuron.run()
        except BaseException as error:  # noqa: BLE001 (raised below)
            errors.append(error)
        finally:
            step.leave()

    threads = [threading.Thread(target=go, args=(n,), daemon=True) for n in neurons.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    if errors or any(t.is_alive() for t in threads):
        raise RuntimeError(f"the {ref or 'subnet'} run failed: {errors or 'a member hung'}")
    protocol = world.runtimes["holder"].cfg.protocol
    header = {
        "name": (ref or "@beam/subnet").split("/")[1].split("@")[0],
        "started": started,
        "config_hash": protocol.config_hash(),
        "protocol": protocol.model_dump(mode="json"),
        "participants": {
            hotkeys[n]: {"name": n, "role": classes[n], "slot": s} for n, s in names.items()
        },
    }
    if ref:  # a room: what LocalRoom writes (the subnet's run.json names its chain instead)
        header |= {
            "network": "room in-memory (threads)",
            "topology": ref,
            "params": dict(plan_template.params),
            "members": {n: [hotkeys[n], s] for n, s in names.items()},
        }
    else:
        header |= {"network": "local", "netuid": 2}  # as localnet's run.json
    (root / "run.json").write_text(json.dumps(header, indent=2))
    return root
