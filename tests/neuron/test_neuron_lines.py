"""Model lines: what a trainer's steps set per model (lane, data rule, sweep point, kept
optimizer state), read from the compiled plan's steps."""

from __future__ import annotations

import pytest
import torch

from subnet.neuron.actions.sweep import point_of
from subnet.neuron.bindings import lane_data_rule
from subnet.neuron.lines import build_lines, step_inner
from subnet.storage.keys import PROTOCOL_VERSION
from subnet.topology import Template

SWEEP = Template(topology="@beam/sweep@1.0.0",
                 params={"min_workers": 3, "inner_steps": 2, "points": [0.001, 0.004]})  # fmt: skip
SWEEP_NAMES = {"holder": "lead", "w0": "worker", "w1": "worker", "w2": "worker"}
TWO = Template(topology="@beam/two-models@1.0.0", params={"min_workers": 1, "inner_steps": 2})
TWO_NAMES = {"holder": "holder_a", "hb": "holder_b", "w0": "worker"}


def _train_step(rt, lane: str | None = None):
    steps = [s for s in rt.plan.slot("worker").steps if s.action == "train"]
    return next(s for s in steps if lane is None or s.lane == lane)


def test_each_sweep_worker_trains_its_point_with_the_points_setting(world_with):
    world = world_with(SWEEP_NAMES, SWEEP)
    workers = sorted(["w0", "w1", "w2"], key=world.hotkey)
    for i, name in enumerate(workers):  # worker i of the sorted cohort: point i mod 2
        rt = world.runtimes[name]
        step = _train_step(rt)
        assert point_of(rt, step.params) == (i % 2, [0.001, 0.004][i % 2])
        assert step_inner(rt, step).lr == [0.001, 0.004][i % 2]
        assert step_inner(rt, step).steps == 2  # the plan's H
    assert point_of(world.runtimes["holder"], {}) is None  # a step without points


def test_a_sweep_key_that_is_no_inner_setting_or_a_bad_value_is_refused(world_with):
    world = world_with(SWEEP_NAMES, SWEEP)
    rt = world.runtimes["w0"]
    step = _train_step(rt)
    bad_key = type(step)(**{**step.__dict__, "params": {**step.params, "sweep_key": "outer.lr"}})
    with pytest.raises(ValueError, match="sweep_key"):
        step_inner(rt, bad_key)
    zero = type(step)(**{**step.__dict__, "params": {**step.params, "points": [0.0]}})
    with pytest.raises(ValueError):  # AdamW's lr must be > 0: refused, not silently the default
        step_inner(rt, zero)


def test_a_two_model_worker_holds_one_line_per_model_lane(world_with):
    world = world_with(TWO_NAMES, TWO)
    rt = world.runtimes["w0"]
    lines = build_lines(rt, rt.plan.slot("worker"), vocab_size=320)
    assert list(lines) == ["model_a", "model_b"]
    assert [line.data_rule for line in lines.values()] == ["granted", "assigned"]
    assert lines["model_a"].replica.holder == world.hotkey("holder")
    assert lines["model_b"].replica.holder == world.hotkey("hb")
    assert lines["model_a"].optimizer is not lines["model_b"].optimizer
    # readers check each lane's receipts with the rule of the step writing it
    assert lane_data_rule(rt.plan, "grads_a") == "granted"
    assert lane_data_rule(rt.plan, "grads_b") == "assigned"


@pytest.mark.parametrize("keep", [True, False])
def test_keep_optimizer_decides_whether_adamw_moments_survive_a_round(world_with, keep):
    world = world_with(TWO_NAMES, TWO)
    rt = world.runtimes["w0"]
    step = _train_step(rt, "grads_b")
    step = type(step)(**{**step.__dict__, "params": {**step.params, "keep_optimizer": keep}})
    (line,) = build_lines(
        rt,
        type(rt.plan.slot("worker"))(**{**rt.plan.slot("worker").__dict__, "steps": (step,)}),
        vocab_size=320,
    ).values()
    assert line.keep_optimizer is keep
    model = line.replica.model
    loss = sum(p.sum() for p in model.parameters())
    loss.backward()
    line.optimizer.step()  # one step: AdamW now holds moments
    assert line.optimizer.state
    before = line.optimizer
    if not line.keep_optimizer:  # what Miner.train does at the start of a round
        line.fresh_optimizer()
    assert bool(line.optimizer.state) is keep
    assert (line.optimizer is before) is keep
    assert isinstance(line.optimizer, torch.optim.AdamW)


DATA = Template(topology="@beam/fedavg-data@2.0.0", params={"workers": 2, "local_steps": 2})
DATA_NAMES = {"holder": "lead", "w0": "worker", "w1": "worker"}


def test_fedavg_data_reads_the_dataset_under_the_runs_data_prefix(world_with):
    from subnet.neuron.holder import publish_dataset

    world = world_with(DATA_NAMES, DATA)
    lead, worker = world.runtimes["holder"], world.runtimes["w0"]
    assert lead.data_prefix() == worker.data_prefix() == "data/"  # the spec's default
    publish_dataset(lead)
    keys = [info.key for info in world.stores["holder"].list()]
    assert keys and all(k.startswith("data/") for k in keys)
    assert worker.dataset().split_samples("train") > 0  # read from the lead's data/ prefix


def test_a_bad_data_prefix_is_one_clear_error(world_with):
    from subnet.config import ConfigError

    for bad in ("../x/", "/abs/", "Data/", "data", "a/../b/"):
        template = Template(topology=DATA.topology, params={**DATA.params, "data_prefix": bad})
        rt = world_with(DATA_NAMES, template).runtimes["w0"]
        with pytest.raises(ConfigError, match="data prefix"):
            rt.data_prefix()


def test_without_a_prefix_the_dataset_stays_where_the_subnet_keeps_it(world):
    assert world.runtimes["holder"].data_prefix() == f"beam/v{PROTOCOL_VERSION}/datasets/tiny/"


# Step params no code reads, and why: the lane a train step reads already names its model.
LABELS = {"model": "two-models' a/b label: the model lane read decides the model"}


def test_every_step_param_of_a_builtin_spec_is_read_by_the_code():
    """A spec's step parameter that no action reads would be a setting that silently does
    nothing: each must appear as ``params.get("NAME"`` or ``params["NAME"]`` in the neuron code."""
    import re
    from pathlib import Path

    from subnet.topology import builtin_specs

    source = "".join(p.read_text() for p in Path("subnet/neuron").rglob("*.py"))
    read = set(re.findall(r"params(?:\.get\(|\[)\"([a-z_]+)\"", source))
    names = {key for spec in builtin_specs() for role in spec.roles.values()
             for step in role.steps for key in (step.params or {})}  # fmt: skip
    assert names - read - set(LABELS) == set(), names - read
    assert {"keep_optimizer", "sweep_key", "points", "per_point", "prefix"} <= read


def test_a_save_while_a_points_model_is_lent_keeps_each_model_in_its_place(world_with):
    from subnet.neuron.holder import ModelHolder
    from subnet.training import snapshot

    world = world_with(SWEEP_NAMES, SWEEP)
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    assert sorted(lead.points.lines) == [0, 1]
    line = lead.points.lines[1]
    with torch.no_grad():
        for p in line.model.parameters():
            p.add_(1.0)  # point 1's model differs from the holder's own
    own, point = snapshot(lead.model), snapshot(line.model)
    with lead.points.as_line(line):
        assert lead.model is line.model  # the merge works on the point's model
        meta, tensors = lead.state()  # a save in the middle of that merge
    name = next(iter(own))
    assert torch.equal(tensors[f"model/{name}"], own[name])
    assert torch.equal(tensors[f"p1:model/{name}"], point[name])
    assert not torch.equal(own[name], point[name])
    assert lead.model is not line.model and meta["version"] == lead.version == 0
