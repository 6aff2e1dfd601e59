"""Every role saves all it declares: run a window in the in-memory world, start a fresh role on
the same state folder (a restart), and compare the two trees attribute by attribute.

A role declares each attribute as ``saved`` or ``rebuilt`` (``BaseNeuron``); an attribute in
neither fails here, and so does a saved one that comes back different.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from typing import Any

import pytest
import torch
from pydantic import BaseModel

from subnet.data import random_sample_ids
from subnet.neuron import validator as validator_module
from subnet.neuron.base import BaseNeuron
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.neuron.validator import Validator
from subnet.topology import Template
from tests.neuron.test_neuron_roles import run_at


def tree(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """A comparable tree of ``value``: tensors as lists, components by their saved state."""
    if id(value) in seen:
        return "<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, torch.Tensor):
        return ("tensor", value.dtype, tuple(value.shape), value.detach().cpu().tolist())
    if isinstance(value, (str, int, float, bool, bytes, type(None))):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump()
    if isinstance(value, dict):
        return {str(k): tree(v, seen) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [tree(v, seen) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(map(repr, value))
    if hasattr(value, "state_dict"):  # modules, optimizers, error feedback, replicas, checks
        return tree(value.state_dict(), seen)
    if callable(getattr(value, "state", None)):  # components saved by ``state()``
        return tree(value.state(), seen)
    if dataclasses.is_dataclass(value):
        return {f.name: tree(getattr(value, f.name), seen) for f in dataclasses.fields(value)}
    return {k: tree(v, seen) for k, v in sorted(vars(value).items())}


def restarted(role: BaseNeuron) -> BaseNeuron:
    """A fresh role of the same class on the same runtime, resumed from the state file."""
    twin = type(role)(role.rt)
    assert twin.try_setup()
    return twin


def check_round_trip(role: BaseNeuron) -> None:
    declared = set(BaseNeuron.LOOP) | set(role.saved) | set(role.rebuilt)
    undeclared = sorted(set(vars(role)) - declared)
    assert not undeclared, f"{role.role}: declare {undeclared} as saved or rebuilt"
    twin = restarted(role)
    assert twin.schedule.cursor.state_dict() == role.schedule.cursor.state_dict()
    for name in role.saved:
        assert tree(getattr(twin, name)) == tree(getattr(role, name)), f"{role.role}.{name}"


def subnet_window(world, monkeypatch) -> list[BaseNeuron]:
    """One scored window: commits, reveals, a report, a merge."""
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    miners = [Miner(world.runtimes[n]) for n in ("m1", "m2")]
    validator = Validator(world.runtimes["v1"])
    for miner in miners:
        run_at(miner, 0)
    run_at(validator, 4)
    for miner in miners:
        run_at(miner, 6)
    assert run_at(validator, 6) == 1
    assert run_at(holder, 8) == 1
    assert validator.book.records and validator.arrivals.first_seen == {}  # pruned once scored
    late = validator.arrivals.first_seen
    late[(1, "late")] = (11, 1.5)  # a window in progress: upload order kept
    validator.arrivals.unreachable.add((1, "gone"))
    validator.save()
    return [holder, validator, miners[0]]


@pytest.mark.parametrize("name", ["holder", "validator", "miner"])
def test_every_subnet_role_restores_what_it_saved(world, monkeypatch, name):
    roles = {r.role: r for r in subnet_window(world, monkeypatch)}
    check_round_trip(roles[name])


# The validator's state file keys, as validators before its split into parts wrote them: a
# validator restarted on an older state file must find each part's state where it was.
VALIDATOR_KEYS = {
    *("version", "moving", "evaluated", "records", "last_weights_block", "equivocations"),
    *("checks", "first_seen", "unreachable", "deadline_looked"),
}


def test_the_validator_state_keeps_its_keys(world, monkeypatch):
    validator = next(r for r in subnet_window(world, monkeypatch) if r.role == "validator")
    meta, tensors = validator.state()
    assert set(meta) == VALIDATOR_KEYS
    assert meta["first_seen"] == [[1, "late", 11, 1.5]] and meta["unreachable"] == [(1, "gone")]
    twin = Validator(validator.rt)
    twin.setup()
    saved = json.loads(json.dumps(meta))  # as read back from the file
    twin.restore(saved, tensors)
    assert json.loads(json.dumps(twin.state()[0])) == saved


ROOMS = {
    "diloco": ("@beam/diloco@1.0.0", {"holder": "lead", "m1": "worker", "m2": "worker"}),
}


@pytest.mark.parametrize("room", list(ROOMS))
def test_every_room_role_restores_what_it_saved(world_with, room):
    topology, names = ROOMS[room]
    world = world_with(names, Template(topology=topology))
    lead = ModelHolder(world.runtimes["holder"])
    assert lead.try_setup()
    workers = [Miner(world.runtimes[n]) for n in ("m1", "m2")]
    for worker in workers:
        run_at(worker, 0)
    assert run_at(lead, 9) == 1
    lead.admitted = ["someone"]  # what an ``admit`` step keeps for the next grant
    lead.save()
    for role in (lead, workers[0]):
        check_round_trip(role)


# The miner's state file keys, as miners before its split into parts wrote them (the first
# model line unprefixed, the others under ``lines``; committed uploads; held error feedback).
MINER_KEYS = {"version", "adamw_groups", "state_window", "lines", "sealed", "held"}


def test_the_miner_state_keeps_its_keys(world, monkeypatch):
    miner = next(r for r in subnet_window(world, monkeypatch) if r.role == "miner")
    run_at(miner, 12)  # commits window 1: a sealed upload in the state
    meta, tensors = miner.state()
    assert set(meta) == MINER_KEYS
    assert meta["lines"] == {} and set(meta["sealed"]) == {"grads"}
    assert [(h["lane"], h["window"]) for h in meta["held"]] == [("grads", 0), ("grads", 1)]
    heads = {name.split("/")[0].split(":")[0] for name in tensors}
    assert heads == {"model", "ef", "adamw", "sealed", "held"}
    assert "sealed:grads" in tensors and any(n.startswith("held:grads:1:") for n in tensors)
    twin = Miner(miner.rt)
    twin.setup()
    saved = json.loads(json.dumps(meta))  # as read back from the file
    twin.restore(saved, tensors)
    again, again_tensors = twin.state()
    assert json.loads(json.dumps(again)) == saved and set(again_tensors) == set(tensors)


# The holder's state file keys, as holders before its split into components wrote them: its own
# model line's record at the top level (the persistence guard's seed and memory with it), then
# the caught senders, the admitted and the points. (Plain SGD, the default outer step, keeps no
# tensors under "outer/"; the sparse broadcast keeps its error feedback under "broadcast/".)
HOLDER_KEYS = {"version", "unpublished", "guard_seed", "caught", "admitted", "points"}


def test_the_holder_state_keeps_its_keys(world, monkeypatch):
    holder = next(r for r in subnet_window(world, monkeypatch) if r.role == "holder")
    meta, tensors = holder.state()
    assert set(meta) == HOLDER_KEYS and meta["version"] == holder.own.version == 1
    assert {name.split("/", 1)[0] for name in tensors} == {"model", "guard", "broadcast"}
    assert {name.split("/", 1)[1] for name in tensors if name.startswith("model/")} == set(
        holder.model.state_dict()
    )
    twin = ModelHolder(holder.rt)
    twin.setup()
    saved = json.loads(json.dumps(meta))  # as read back from the file
    twin.restore(saved, tensors)
    assert json.loads(json.dumps(twin.state()[0])) == saved
    assert all(torch.equal(t, tensors[k]) for k, t in twin.state()[1].items())
