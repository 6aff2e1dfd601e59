"""The sparse broadcast: model version v+1 published as version v minus one sparse update.

A lossless XOR patch of fp32 weights after a merge of N sparse uploads touches the union of their
supports (40 % of `hypertrain-20m` for 32 uploads): about 14x one upload. Instead the holder
re-sparsifies the update it would apply (`base - target`, after the outer step) with the
protocol's own sparse codec at the upload's budget, keeping what the codec dropped in its own
error feedback (decay 1: nothing is forgotten, it goes out in later versions), and publishes

    version v+1 = version v - decode(delta)

as the version's state. Every peer rebuilds it from its copy of v with `apply_delta`. Decoding a
SparseLoCo payload only gathers codebook values and scatters them into zeros, and the apply is one
IEEE-754 fp32 subtraction per value (correctly rounded, no fused multiply-add, no reduction), so
every CPU computes the same bits as the holder: the manifest's digest is checked bit for bit and
a disagreement (a bug, another torch whose kernels differ, a tampered object) sends the peer to
the full checkpoint with the reason logged.

Peers need no outer-optimizer state: momentum, if any, stays with the holder, which steps its
own model to `target` and publishes the re-sparsified step from `base` towards it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor
from subnet.compression.base import Payload, PayloadError

#: Codecs whose decode is a pure gather/scatter (bit-exact everywhere) and whose payload is a
#: fixed budget: the only ones the sparse broadcast uses.
SPARSE_CODECS = frozenset({"sparseloco", "sparseloco-rice"})
#: Codecs a published delta may name: the sparse upload codecs and the model-wide top-k.
DELTA_CODECS = SPARSE_CODECS | {"sparse-global-rice"}
#: Where a delta's top-k is chosen: in every chunk as uploads do, or over the whole model.
SCOPES = frozenset({"chunk", "model"})


def delta_codec(codec: CompressionConfig, budget: float, scope: str = "chunk") -> CompressionConfig:
    """The codec of the published deltas: `budget` times the upload's top-k (rounded).

    A merge of R uploads touches up to R times one upload's support; keeping only one upload's
    budget per version defers most of it to later versions through the holder's error feedback
    (and costs loss), keeping R times keeps nearly all of it. Capped at a whole chunk. `scope`
    `chunk` keeps that many values in every chunk (the upload's own codec), `model` as many in
    total, wherever the model's largest values are (`sparse-global-rice`).
    """
    if budget <= 0:
        raise ValueError(f"the broadcast budget must be > 0, not {budget}")
    if scope not in SCOPES:
        raise ValueError(f"the broadcast scope must be one of {sorted(SCOPES)}, not {scope!r}")
    topk = min(codec.chunk * codec.chunk, max(1, round(codec.topk * budget)))
    update: dict = {"topk": topk}
    if scope == "model":
        update["name"] = "sparse-global-rice"
    return codec.model_copy(update=update)


def uses_sparse_broadcast(mode: str, codec: CompressionConfig) -> bool:
    """Whether versions go out as sparse deltas: `sparse`, or `auto` with a sparse upload codec.

    `auto` keeps the lossless patch for dense codecs (FedAvg, DiLoCo topologies): re-sparsifying
    their merges would change the algorithm, not just the bytes.
    """
    if mode == "sparse" and codec.name not in SPARSE_CODECS:
        raise ValueError(f"broadcast 'sparse' needs a sparse codec ({sorted(SPARSE_CODECS)})")
    return mode == "sparse" or (mode == "auto" and codec.name in SPARSE_CODECS)


class DeltaError(ValueError):
    """A delta that cannot be applied; `reason` is a compressor reject reason or `state_mismatch`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class SparseDelta:
    """One version's update as it is published: the codec that decodes it and its payload."""

    codec: CompressionConfig
    payload: Payload


def apply_delta(state: Mapping[str, Tensor], decoded: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """`state - decoded` per tensor, fp32 on the CPU, in new tensors (`state` is not touched).

    Raises:
        DeltaError: names or shapes differ (`state_mismatch`).
    """
    if set(state) != set(decoded):
        raise DeltaError("state_mismatch", f"{len(set(state) ^ set(decoded))} names differ")
    out: dict[str, Tensor] = {}
    for name, base in state.items():
        update = decoded[name]
        if tuple(base.shape) != tuple(update.shape):
            raise DeltaError("state_mismatch", f"{name}: {tuple(update.shape)}")
        base32 = base.detach().to("cpu", torch.float32)
        out[name] = torch.sub(base32, update.detach().to("cpu", torch.float32)).contiguous()
    return out


def decode_delta(delta: SparseDelta, shapes: Mapping[str, tuple[int, ...]]) -> dict[str, Tensor]:
    """The update a delta carries, validated against `shapes` first (`DeltaError` if invalid)."""
    if delta.codec.name not in DELTA_CODECS:
        raise DeltaError("invalid_value", f"codec {delta.codec.name} is not a sparse codec")
    try:
        return build_compressor(delta.codec).decode(delta.payload, shapes)
    except PayloadError as exc:
        raise DeltaError(exc.reason, str(exc)) from None


class Resparsifier:
    """The holder's side: each merged step re-sparsified to `budget` times one upload's top-k.

    Keeps the holder's error feedback (what earlier deltas left out, times `decay` each
    version); it must be saved and restored with the holder's model, or the left-out part of
    past steps is lost. `scope` is where the top-k is chosen (see `delta_codec`).
    """

    def __init__(
        self, codec: CompressionConfig, budget: float = 1, scope: str = "chunk", decay: float = 1.0
    ) -> None:
        if codec.name not in SPARSE_CODECS:
            raise ValueError(f"the sparse broadcast needs a sparse codec, not {codec.name}")
        self.codec = delta_codec(codec, budget, scope)
        self.compressor = build_compressor(self.codec)
        self.feedback = ErrorFeedback(decay=decay)

    def reduce(
        self, base: Mapping[str, Tensor], target: Mapping[str, Tensor]
    ) -> tuple[dict[str, Tensor], SparseDelta]:
        """The state to publish instead of `target`, and the delta that makes it from `base`."""
        update = {
            name: base[name].detach().to("cpu", torch.float32)
            - target[name].detach().to("cpu", torch.float32)
            for name in base
        }
        payload, decoded = self.feedback.compress(self.compressor, update)
        return apply_delta(base, decoded), SparseDelta(self.codec, payload)

    def state_dict(self) -> dict[str, Tensor]:
        """The error-feedback buffers (safetensors-ready)."""
        return self.feedback.state_dict()

    def load_state_dict(self, state: Mapping[str, Tensor]) -> None:
        """Restore what `state_dict` returned."""
        self.feedback.load_state_dict(state)
