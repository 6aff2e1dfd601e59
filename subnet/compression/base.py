"""The compressor interface: a small strategy object with an info record (as in hivemind).

A compressor turns a dict of named fp32 tensors into a *payload*, itself a flat dict of tensors, so
the wire layer can write it as safetensors inside a signed envelope (no pickle anywhere). The reader
always knows the expected shapes (they are the model's), so payloads carry no shape metadata;
instead every payload can be checked against the shapes with :meth:`Compressor.validate` before any
of it is decoded or touches a model.

Subclasses implement three per-tensor hooks; the base class owns key naming, iteration and the
structural checks (missing or unexpected keys, dtypes, lengths), so each codec file stays about its
own format.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from subnet.wire.reasons import Reason

Payload = dict[str, torch.Tensor]
Shapes = Mapping[str, tuple[int, ...]]

#: Why a payload was rejected: a member of the one reason enum (``missing_tensor``,
#: ``unexpected_tensor``, ``shape_mismatch``, ``dtype_mismatch``, ``index_out_of_range``,
#: ``unsorted_index``, ``non_finite``, ``invalid_value``); logged and counted by the reader.
RejectReason = Reason

#: Separator between a parameter name and the part of its encoding (``"h.0.attn.w::idx"``).
KEY_SEP = "::"


class PayloadError(ValueError):
    """A payload that does not match the expected shapes or format; ``reason`` says how."""

    def __init__(self, reason: RejectReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason: RejectReason = reason


# What a check of training verifies of an upload in a codec, beyond replaying its input
# (``subnet.verify.check``): ``sparse``, that each chunk sent is the codec's top-k of the
# claimed error feedback on the shared codebook levels; ``lossless``, that no error feedback is
# left; ``other``, nothing more (the input alone). Every codec states it: none gets the weakest
# check by being new.
CheckRules = Literal["sparse", "lossless", "other"]


@dataclass(frozen=True)
class CompressorInfo:
    """What a compressor is: its registry name, whether decoding is exact, a one-line summary,
    and what a check of training verifies of its output (``CheckRules``)."""

    name: str
    lossless: bool
    summary: str
    check: CheckRules


@dataclass(frozen=True)
class PartSpec:
    """Expected dtype and element count of one part of one tensor's encoding."""

    dtype: torch.dtype
    numel: int


def payload_nbytes(payload: Payload) -> int:
    """Bytes the payload's tensors occupy (what crosses the network, before any envelope)."""
    return sum(t.numel() * t.element_size() for t in payload.values())


class Compressor(ABC):
    """Base class: encode named tensors into a payload, validate a payload, decode it back."""

    info: CompressorInfo

    @abstractmethod
    def encode_tensor(self, tensor: torch.Tensor) -> dict[str, torch.Tensor]:
        """Encode one tensor into named parts (each a flat tensor)."""

    @abstractmethod
    def part_specs(self, shape: tuple[int, ...]) -> dict[str, PartSpec]:
        """The parts, dtypes and lengths an honest encoding of a tensor of ``shape`` has."""

    @abstractmethod
    def decode_tensor(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> torch.Tensor:
        """Decode structurally valid parts into an fp32 tensor of ``shape``."""

    def check_parts(
        self, parts: Mapping[str, torch.Tensor], shape: tuple[int, ...]
    ) -> RejectReason | None:
        """Content checks beyond structure (index ranges, finiteness). Default: values finite."""
        for part in parts.values():
            if part.is_floating_point() and not bool(torch.isfinite(part).all()):
                return Reason.NON_FINITE
        return None

    def encode(self, tensors: Mapping[str, torch.Tensor]) -> Payload:
        """Encode every tensor; keys are ``f"{name}::{part}"``."""
        payload: Payload = {}
        for name, tensor in tensors.items():
            for part, value in self.encode_tensor(tensor.detach().float()).items():
                payload[f"{name}{KEY_SEP}{part}"] = value.contiguous()
        return payload

    def validate(self, payload: Payload, shapes: Shapes) -> RejectReason | None:
        """Return why ``payload`` is not a valid encoding for ``shapes``, or ``None`` if it is."""
        expected: set[str] = set()
        for name, shape in shapes.items():
            parts: dict[str, torch.Tensor] = {}
            for part, spec in self.part_specs(tuple(shape)).items():
                key = f"{name}{KEY_SEP}{part}"
                expected.add(key)
                tensor = payload.get(key)
                if tensor is None:
                    return Reason.MISSING_TENSOR
                if tensor.dtype != spec.dtype:
                    return Reason.DTYPE_MISMATCH
                if tensor.dim() != 1 or tensor.numel() != spec.numel:
                    return Reason.SHAPE_MISMATCH
                parts[part] = tensor
            reason = self.check_parts(parts, tuple(shape))
            if reason is not None:
                return reason
        if set(payload) - expected:
            return Reason.UNEXPECTED_TENSOR
        return None

    def decode(self, payload: Payload, shapes: Shapes) -> dict[str, torch.Tensor]:
        """Validate, then decode every tensor to fp32; raises :class:`PayloadError` if invalid."""
        reason = self.validate(payload, shapes)
        if reason is not None:
            raise PayloadError(reason, self.info.name)
        out: dict[str, torch.Tensor] = {}
        for name, shape in shapes.items():
            specs = self.part_specs(tuple(shape))
            parts = {part: payload[f"{name}{KEY_SEP}{part}"] for part in specs}
            out[name] = self.decode_tensor(parts, tuple(shape))
        return out

    def support(self, payload: Payload, shapes: Shapes) -> np.ndarray | None:
        """Sorted global coordinates a sparse payload sends (its fingerprint for copy detection),
        or ``None`` for a dense codec. Validates the payload; raises :class:`PayloadError`."""
        reason = self.validate(payload, shapes)
        if reason is not None:
            raise PayloadError(reason, self.info.name)
        return None

    def measure(self, payload: Payload, shapes: Shapes) -> tuple[np.ndarray | None, float]:
        """``(support, norm)`` of one payload (what a validator screens every upload by). The
        default asks each in turn; a codec that parses a payload once for both overrides it."""
        return self.support(payload, shapes), self.norm(payload, shapes)

    def norm(self, payload: Payload, shapes: Shapes) -> float:
        """Global L2 norm of the decoded update. The default decodes; sparse codecs compute it
        from the payload alone, so norm clipping needs no second dense decode."""
        decoded = self.decode(payload, shapes)
        return math.sqrt(sum(float(t.double().pow(2).sum()) for t in decoded.values()))

    def add_into(
        self,
        payload: Payload,
        shapes: Shapes,
        num: dict[str, torch.Tensor],
        den: dict[str, torch.Tensor] | None,
        factor: float,
        scale: float,
    ) -> None:
        """Add this update into running sums: ``num += factor * (scale * u)`` and, if ``den`` is
        given, ``den += factor * [scale * u != 0]`` (missing entries start at zero).

        The default decodes; sparse codecs add only the coordinates they sent, which gives the
        same sums bit for bit (the other coordinates would add zeros) at a fraction of the cost.
        """
        for name, t in self.decode(payload, shapes).items():
            add_sparse(num, den, name, t, None, factor, scale)


def add_sparse(
    num: dict[str, torch.Tensor],
    den: dict[str, torch.Tensor] | None,
    name: str,
    values: torch.Tensor,
    flat: torch.Tensor | None,
    factor: float,
    scale: float,
    shape: tuple[int, ...] | None = None,
) -> None:
    """``num[name]`` (and ``den[name]``) += one tensor's values, at flat positions ``flat`` or,
    when ``flat`` is None, densely (``values`` then holds every coordinate)."""
    clipped = values.float() * scale
    shape = tuple(shape) if shape is not None else tuple(values.shape)
    for sums, term in ((den, None), (num, clipped)):
        if sums is None:
            continue
        if term is None:  # den: count the coordinates this update touches
            term = (clipped != 0).float().mul_(factor)
        else:
            term = term.mul_(factor)
        if name not in sums:  # (not setdefault: that would allocate a model's worth each call)
            sums[name] = torch.zeros(shape, dtype=torch.float32)
        acc = sums[name]
        if flat is None:
            acc.add_(term.reshape(acc.shape))
        else:
            acc.view(-1).index_add_(0, flat, term)
