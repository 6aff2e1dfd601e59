"""Every builtin spec loads, is well formed, and compiles with a fitting roster."""

from __future__ import annotations

import pytest

from subnet.topology import PlanError, Template, builtin_specs, compile_plan, load_spec, specs_dir

NAMES = sorted(
    f"@beam/{n}"
    for n in (
        "diloco elastic-diloco fedavg fedavg-data fedavg-live gossip-ring scored-subnet "
        "split-authorities static-diloco subnet subnet-observed sweep two-models"
    ).split()
)
SPECS = builtin_specs()


def test_the_thirteen_builtin_topologies_and_only_data_files():
    assert [spec.name for spec in SPECS] == NAMES
    # 2.0.0, incompatible changes: scored-subnet's gradient lane became commit-reveal;
    # fedavg-data's shares are cut by file, not by sample
    major = {"@beam/scored-subnet": "2.0.0", "@beam/fedavg-data": "2.0.0"}
    assert all(spec.version == major.get(spec.name, "1.0.0") for spec in SPECS)
    # one file per topology, named after it; subfolders (e.g. templates/) hold other data
    files = sorted(p.name for p in specs_dir().glob("*.toml"))
    assert files == sorted(f"{name.removeprefix('@beam/')}.toml" for name in NAMES)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_compiles_with_a_fitting_roster(spec, vocab, fit):
    plan = compile_plan(spec, Template(topology=spec.ref), fit(spec), vocab)
    assert (plan.topology, plan.version) == (spec.name, spec.version)
    assert set(plan.slots) == set(spec.roles)
    assert len(plan.digest) == 16 and int(plan.digest, 16) >= 0
    for slot in plan.slots.values():
        low, high = slot.count
        assert isinstance(low, int) and (high is None or low <= high)
        assert slot.steps, slot.name
    for lane in plan.lanes.values():
        assert lane.writers and lane.readers and lane.mode in ("broadcast", "directed")
        assert any(step.lane == lane.name for w in lane.writers for step in plan.slot(w).steps)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_spec_has_the_registry_fields(spec):
    assert spec.summary and len({"static", "elastic"} & set(spec.tags)) == 1
    assert spec.stop["rule"] in ("never", "rounds", "loss_below")
    for name, param in spec.params.items():
        assert param.doc, name
    holders = [role for role in spec.roles.values() if "run.lead" in role.holds]
    assert len(holders) == 1, "exactly one slot holds run.lead"


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_load_spec_by_exact_reference(spec):
    assert load_spec(spec.ref) == spec


def test_load_spec_refuses_unknown_versions_and_names():
    with pytest.raises(PlanError) as error:
        load_spec("@beam/fedavg@1.0.1")
    assert error.value.reason == "unknown_version"
    assert "versions: 1.0.0" in str(error.value)
    with pytest.raises(PlanError) as error:
        load_spec("@beam/fedavgx@1.0.0")
    assert error.value.reason == "unknown_topology"
    assert "did you mean @beam/fedavg@1.0.0?" in str(error.value)
    with pytest.raises(PlanError) as error:
        load_spec("@beam/zzzzzz@1.0.0")  # nothing close: every builtin name
    assert error.value.reason == "unknown_topology"
    assert "@beam/fedavg," in str(error.value)


@pytest.mark.parametrize(
    "ref",
    [
        "@beam/fedavg",
        "@beam/fedavg@1.0",
        "@beam/fedavg@^1.0.0",
        "@beam/fedavg@latest",
        "beam/fedavg@1.0.0",
        "@beam/fedavg@01.0.0",
    ],
)
def test_load_spec_binds_only_exact_versions(ref):
    with pytest.raises(PlanError) as error:
        load_spec(ref)
    assert error.value.reason == "bad_reference"


def test_scored_subnet_is_the_contract_vocabulary(vocab, fit):
    """CONTRACT.md: the names the neuron side wires subnet mode to."""
    spec = load_spec("@beam/scored-subnet@2.0.0")
    plan = compile_plan(spec, Template(topology=spec.ref), fit(spec), vocab)
    miner, validator, holder = plan.slot("miner"), plan.slot("validator"), plan.slot("holder")
    assert (miner.role, miner.count, miner.permissions) == ("miner", (1, None), {"runs.train"})
    assert (validator.role, validator.count) == ("validator", (1, None))
    assert validator.permissions == {"runs.observe", "runs.score"}
    assert (holder.role, holder.count, holder.holds) == ("holder", (1, 1), {"model", "run.lead"})
    steps = {
        s.name: [(p.action, p.phase, p.lane, p.gates) for p in s.steps]
        for s in (miner, validator, holder)
    }
    assert steps == {
        "miner": [
            ("train", "upload", "grads", ("version_out",)),
            ("reveal", "reveal", "grads", ()),
        ],
        "validator": [("score", "score", "scores", ("revealed",))],
        "holder": [("merge", "merge", "model", ())],
    }
    lanes = {
        n: (lane.kind, lane.writers, lane.readers, lane.mode, lane.commit_reveal)
        for n, lane in plan.lanes.items()
    }
    assert lanes == {
        "grads": ("gradient", ("miner",), ("holder", "validator"), "broadcast", True),
        "scores": ("scores", ("validator",), ("holder",), "directed", False),
        "model": ("model-manifest", ("holder",), ("miner", "validator"), "broadcast", False),
    }
    assert (plan.merge_weights, plan.data_rule) == ("median_score", "assigned")
    assert plan.slots_of("holder") == [holder]


def test_docs_list_every_builtin_topology():
    text = (specs_dir().parent / "docs" / "topologies.md").read_text()
    for spec in SPECS:
        assert f"| `{spec.name}` | {', '.join(spec.tags)} |" in text, spec.name
        assert f"- `{spec.name}`: " in text, spec.name
    # the worked example is the shipped file, verbatim
    assert (specs_dir() / "scored-subnet.toml").read_text() in text
