"""A validator that evaluates a sample of the uploads: the rest are reported at their
standing, every upload is evaluated in time, and the holder merges on what it is told."""

from __future__ import annotations

import functools

import subnet.neuron.validator as validator_module
from subnet.data import random_sample_ids
from subnet.neuron.holder import ModelHolder
from subnet.neuron.miner import Miner
from subnet.neuron.validator import Validator
from tests.neuron.test_checks import play, records


def test_two_evaluations_a_window_of_four_uploads_and_standing_for_the_others(
    world_with, monkeypatch
) -> None:
    monkeypatch.setattr(validator_module, "random_sample_ids",
                        functools.partial(random_sample_ids, seed=0))  # fmt: skip
    names = {"holder": "holder", "v1": "validator", **{f"m{i}": "miner" for i in range(4)}}
    world = world_with(names, scoring={"checks": 0, "evaluations": 2})
    holder = ModelHolder(world.runtimes["holder"])
    assert holder.try_setup()
    miners = [Miner(world.runtimes[f"m{i}"]) for i in range(4)]
    validator = Validator(world.runtimes["v1"])
    evaluated_ever: set[str] = set()
    for window in range(6):
        play(holder, miners, validator, window)
        scores = records(validator, "scores")[-1]
        verdicts = scores["verdicts"]
        sampled = {hk for hk, (why, _) in verdicts.items() if why not in ("standing",)}
        assert len(sampled) == 2, verdicts  # two evaluated, the two others at their standing
        before = records(validator, "scores")[-2]["moving"] if window else {}
        for hk, (why, score) in verdicts.items():
            if why == "standing":  # reported at the moving score it had before this window
                assert score == before.get(hk, 0.0)
                assert scores["moving"][hk] == before.get(hk, 0.0)  # and kept
        evaluated_ever |= sampled
    assert len(evaluated_ever) == 4  # every miner evaluated within 6 windows
    assert any(v > 0 for v in records(validator, "scores")[-1]["moving"].values())
