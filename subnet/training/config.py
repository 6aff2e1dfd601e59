"""Typed settings for the inner loop, the outer step and aggregation (protocol config pieces)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

OuterName = Literal["nesterov", "sgd", "fedavg"]
AggregationRule = Literal["mean", "sparse_mean", "median", "trimmed_mean"]


class InnerConfig(BaseModel):
    """The local AdamW phase: ``steps`` (DiLoCo's H) optimizer steps of ``accumulation`` micro-batches.

    Defaults follow DiLoCo (Douillard et al., 2023) scaled to small models: AdamW with decoupled
    weight decay, betas (0.9, 0.95), gradient clipping at norm 1.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # With the warm start (moment_init) the first steps move about lr / sqrt(moment_init): 3e-3
    # beat the old 1e-3 with kept moments at H = 2 and 30 on tiny (docs/benchmarks.md).
    lr: float = Field(3e-3, gt=0, description="AdamW learning rate of the inner steps")
    weight_decay: float = Field(
        0.1, ge=0, description="AdamW decoupled weight decay (matrices only; not norms, biases)"
    )
    betas: tuple[float, float] = Field(
        (0.9, 0.95), description="AdamW betas, comma-separated: beta1,beta2"
    )
    eps: float = Field(1e-8, gt=0, description="AdamW epsilon")
    moment_init: float = Field(
        10.0,
        ge=0,
        description=(
            "a fresh AdamW's second moment starts at this multiple of the first step's squared "
            "gradient, not at zero: a per-coordinate warm start that makes a round's training a "
            "function of public inputs alone (0: AdamW's own zero start)"
        ),
    )
    # 0.1: 20M windows stop being chaotic at lr 3e-3 (0.01 does not), and tiny's tuned loss
    # improves (docs/benchmarks.md#verify).
    moment_floor: float = Field(
        0.1,
        ge=0,
        description=(
            "the warm start's second moment is at least this multiple of its tensor's mean: "
            "damps the first steps of coordinates whose first gradient is near zero, which "
            "otherwise move by about lr and make a window chaotic (0: no floor)"
        ),
    )
    steps: int = Field(30, ge=1, description="H: optimizer steps per round")
    min_steps: int = Field(
        10,
        ge=1,
        description=(
            "fewest steps an upload may train: a miner short of time trains a prefix of its "
            "assignment (at least this many steps, capped at steps) and is credited pro rata"
        ),
    )
    grad_clip: float = Field(1.0, ge=0, description="max global grad norm; 0 disables clipping")
    micro_batch: int = Field(
        8, ge=1, description="sequences per micro-batch (read by the data side)"
    )
    accumulation: int = Field(1, ge=1, description="micro-batches per optimizer step")
    bf16_autocast: bool = Field(
        False, description="run forward passes under bf16 autocast (GPUs that support it)"
    )

    def least_steps(self) -> int:
        """The fewest steps an upload may train: ``min_steps``, capped at ``steps``."""
        return min(self.min_steps, self.steps)


class OuterConfig(BaseModel):
    """The outer optimizer applied to the aggregated pseudo-gradient.

    ``nesterov`` is SGD with Nesterov momentum (DiLoCo's choice, lr 0.7, momentum 0.9) and reads
    ``lr`` and ``momentum``; ``sgd`` is plain SGD and reads only ``lr`` (SparseLoCo's choice, where
    error feedback stands in for momentum); ``fedavg`` is SGD with lr 1 and reads neither, so the
    new model is the (weighted) average of the workers' models (McMahan et al., 2017).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: OuterName = Field(
        "nesterov", description="outer optimizer: sgd (SparseLoCo), nesterov (DiLoCo) or fedavg"
    )
    lr: float = Field(0.7, gt=0, description="outer learning rate (sgd, nesterov)")
    momentum: float = Field(0.9, ge=0, lt=1, description="Nesterov momentum (nesterov only)")


class AggregationConfig(BaseModel):
    """How contributions are combined: optional norm clipping, then one rule.

    ``mean`` and ``sparse_mean`` use the contributors' weights (scores, or data units); ``median``
    and ``trimmed_mean`` count every contributor with positive weight equally, since a weighted
    order statistic would let one heavy contributor move the result on its own.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    rule: AggregationRule = Field(
        "mean",
        description="how the holder combines uploads: mean, sparse_mean, median, trimmed_mean",
    )
    clip_to_median_norm: bool = Field(
        True, description="clip every upload to the median norm before combining (robustness)"
    )
    trim_ratio: float = Field(
        0.1, ge=0, lt=0.5, description="fraction cut at each end (trimmed_mean)"
    )
    guard: bool = Field(
        False,
        description=(
            "the persistence guard (subnet.training.guard): a sender that keeps pushing a "
            "chunk in one direction beyond twice the median sender has that chunk scaled down; "
            "on in the subnet's protocol (untrusted senders), off for rooms' own tables"
        ),
    )


class ParallelConfig(BaseModel):
    """Local, per-machine training settings (``--parallel.*``); not part of the protocol."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["ddp", "fsdp"] = Field(
        "ddp", description="under torchrun: ddp (replicate) or fsdp (FSDP2 fully_shard)"
    )
    compile: bool = Field(False, description="torch.compile the model for the inner loop")
    timeout_s: float = Field(
        300.0, gt=0, description="seconds a training collective may wait for a peer rank"
    )
    idle_timeout_s: float = Field(
        3600.0, gt=0, description="seconds a serving rank waits for rank 0's next job"
    )
