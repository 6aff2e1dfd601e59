"""What the compiled plan fixes for every member alike: H, the samples of a window, the data
rule of a lane.

Read from the whole plan, never from the step at hand, so a trainer and every reader checking
its receipt count the same samples. Pure functions of the runtime's plan and protocol.
"""

from __future__ import annotations

from ..topology import RunPlan
from ..training.config import InnerConfig
from .runtime import Runtime


def inner_steps(rt: Runtime) -> int:
    """H: the ``inner_steps`` of the plan's ``train`` step, else the protocol's."""
    for slot in rt.plan.slots.values():
        for step in slot.steps:
            if step.action == "train" and "inner_steps" in step.params:
                return int(step.params["inner_steps"])
    return rt.cfg.protocol.inner.steps


def lane_data_rule(plan: RunPlan, lane: str | None) -> str:
    """The data rule of the uploads on ``lane``: the writing step's own, else the plan's.

    A trainer of two models trains each on its step's rule (``@beam/two-models``: model A on
    granted units, model B on assigned samples); the reader of a lane checks receipts with the
    rule of the step that wrote it.
    """
    for slot in plan.slots.values():
        for step in slot.steps:
            if lane is not None and step.lane == lane and step.data_rule:
                return step.data_rule
    return plan.data_rule


def inner_config(rt: Runtime) -> InnerConfig:
    """The protocol's inner settings with the plan's H, at this node's precision
    (``--neuron.precision``; a validator's replay takes each upload's own)."""
    inner, precision = rt.cfg.protocol.inner, rt.cfg.node.neuron.precision
    bf16 = inner.bf16_autocast if precision == "protocol" else precision == "bf16"
    return inner.model_copy(update={"steps": inner_steps(rt), "bf16_autocast": bf16})


def precision(rt: Runtime) -> str:
    """This node's training precision, as a replay class names it (``fp32`` or ``bf16``)."""
    return "bf16" if inner_config(rt).bf16_autocast else "fp32"


def samples_per_window(rt: Runtime) -> int:
    """How many samples a trainer works on per window (H steps x micro-batch x accumulation)."""
    inner = rt.cfg.protocol.inner
    return inner_steps(rt) * inner.micro_batch * inner.accumulation
