"""Saved neuron state restores bit for bit: model, AdamW moments, and the next step after them."""

from __future__ import annotations

import torch

from subnet.compression import state_digest
from subnet.model import build_model
from subnet.neuron.state import (
    StateFile,
    load_optimizer_state,
    optimizer_state,
    prefixed,
    unprefixed,
)
from subnet.training import InnerConfig, build_inner_optimizer, snapshot, train_inner


def batches(seed: int, n: int = 3):
    g = torch.Generator().manual_seed(seed)
    for _ in range(n):
        x = torch.randint(0, 512, (4, 16), generator=g)
        yield x, torch.roll(x, -1, dims=1)


def test_adamw_state_round_trip_gives_the_same_next_step(tmp_path):
    cfg = InnerConfig(steps=3, micro_batch=4)
    model = build_model("tiny", seed=1)
    opt = build_inner_optimizer(model, cfg)
    train_inner(model, batches(0), cfg, opt)

    groups, moments = optimizer_state(opt)
    file = StateFile(tmp_path)
    file.save(
        {"adamw_groups": groups},
        {**prefixed(snapshot(model), "model"), **prefixed(moments, "adamw")},
    )

    meta, tensors = StateFile(tmp_path).load()
    twin = build_model("tiny", seed=99)  # different init: everything must come from the file
    twin.load_state_dict(unprefixed(tensors, "model"), strict=False)
    twin_opt = build_inner_optimizer(twin, cfg)
    load_optimizer_state(twin_opt, meta["adamw_groups"], unprefixed(tensors, "adamw"))
    assert state_digest(snapshot(twin)) == state_digest(snapshot(model))

    train_inner(model, batches(1), cfg, opt)
    train_inner(twin, batches(1), cfg, twin_opt)
    assert state_digest(snapshot(twin)) == state_digest(snapshot(model))


def test_nothing_saved_keeps_a_fresh_optimizer():
    model = build_model("tiny", seed=1)
    opt = build_inner_optimizer(model, InnerConfig())
    load_optimizer_state(opt, [], {})
    assert opt.state_dict()["state"] == {}
