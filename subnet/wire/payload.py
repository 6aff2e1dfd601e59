"""Check a safetensors payload against the model before any tensor is used.

The safetensors header is parsed here in plain Python first, so names, dtypes and shapes are
rejected before tensors are materialized; values (finiteness, sparse index ranges) are checked
after loading.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import safetensors
import safetensors.torch
import torch

from subnet.wire.reasons import Reason, Rejected

MAX_SAFETENSORS_HEADER = 1 << 20  # 1 MiB of tensor table is far more than any Beam payload needs

# safetensors dtype code -> (torch dtype, bytes per element)
DTYPES: dict[str, tuple[torch.dtype, int]] = {
    "F64": (torch.float64, 8),
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I16": (torch.int16, 2),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
    "U16": (torch.uint16, 2),
    "U32": (torch.uint32, 4),
    "U64": (torch.uint64, 8),
    "BOOL": (torch.bool, 1),
}
_CODE = {dtype: code for code, (dtype, _) in DTYPES.items()}


@dataclass(frozen=True)
class TensorSpec:
    """What one tensor must look like. `None` in `shape` matches any length on that axis.

    `index_bound`, for integer tensors holding sparse indices, requires every value in
    `[0, index_bound)`.
    """

    dtype: torch.dtype
    shape: tuple[int | None, ...]
    index_bound: int | None = None


PayloadSpec = Mapping[str, TensorSpec]


def spec_of(tensors: Mapping[str, torch.Tensor]) -> dict[str, TensorSpec]:
    """The exact spec of `tensors` (e.g. a model's state dict for a dense payload)."""
    return {name: TensorSpec(t.dtype, tuple(t.shape)) for name, t in tensors.items()}


def encode_payload(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str]) -> bytes:
    """Serialize tensors (moved to CPU, made contiguous) as safetensors bytes."""
    flat = {name: t.detach().to("cpu").contiguous() for name, t in tensors.items()}
    return safetensors.torch.save(flat, metadata=dict(metadata) or None)


def read_table(payload: bytes) -> tuple[dict[str, tuple[str, tuple[int, ...]]], dict[str, str]]:
    """Parse the safetensors header: `{name: (dtype code, shape)}` and the string metadata."""
    if len(payload) < 8:
        raise Rejected(Reason.MALFORMED_PAYLOAD, "shorter than the safetensors length prefix")
    size = int.from_bytes(payload[:8], "little")
    if size > min(MAX_SAFETENSORS_HEADER, len(payload) - 8):
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"safetensors header length {size} out of bounds")
    try:
        raw = json.loads(payload[8 : 8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"safetensors header: {exc}") from None
    if not isinstance(raw, dict):
        raise Rejected(Reason.MALFORMED_PAYLOAD, "safetensors header is not an object")
    metadata = raw.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise Rejected(Reason.MALFORMED_PAYLOAD, "metadata must map strings to strings")
    table = {}
    for name, entry in raw.items():
        shape = entry.get("shape") if isinstance(entry, dict) else None
        dtype = entry.get("dtype") if isinstance(entry, dict) else None
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise Rejected(Reason.MALFORMED_PAYLOAD, f"tensor {name!r} has no valid shape")
        if dtype not in DTYPES:
            raise Rejected(Reason.DTYPE_MISMATCH, f"tensor {name!r} has unsupported dtype {dtype}")
        table[name] = (dtype, tuple(shape))
    return table, metadata


def check_table(table: Mapping[str, tuple[str, tuple[int, ...]]], spec: PayloadSpec) -> None:
    """Names, dtypes and shapes against the spec, before any tensor is loaded."""
    if set(table) != set(spec):
        missing, extra = sorted(set(spec) - set(table)), sorted(set(table) - set(spec))
        raise Rejected(Reason.NAME_MISMATCH, f"missing {missing[:5]}, unexpected {extra[:5]}")
    for name, (code, shape) in table.items():
        want = spec[name]
        if DTYPES[code][0] != want.dtype:
            raise Rejected(
                Reason.DTYPE_MISMATCH, f"{name}: {code}, expected {_CODE.get(want.dtype)}"
            )
        if len(shape) != len(want.shape) or any(
            w is not None and w != s for s, w in zip(shape, want.shape, strict=False)
        ):
            raise Rejected(Reason.SHAPE_MISMATCH, f"{name}: {list(shape)}, expected {want.shape}")


def load_tensors(payload: bytes) -> dict[str, torch.Tensor]:
    """Materialize the tensors; the library checks offsets cover the data exactly."""
    try:
        return safetensors.torch.load(payload)
    except (safetensors.SafetensorError, ValueError, RuntimeError) as exc:
        raise Rejected(Reason.MALFORMED_PAYLOAD, str(exc)[:200]) from None


def check_values(tensors: Mapping[str, torch.Tensor], spec: PayloadSpec | None) -> None:
    """Every float finite; every index tensor with a bound inside `[0, bound)`."""
    for name, tensor in tensors.items():
        if tensor.dtype.is_floating_point and not bool(torch.isfinite(tensor).all()):
            raise Rejected(Reason.NON_FINITE, f"{name} holds NaN or infinity")
        bound = spec[name].index_bound if spec is not None else None
        if bound is None or tensor.numel() == 0:
            continue
        if tensor.dtype.is_floating_point or tensor.dtype == torch.bool:
            raise Rejected(Reason.DTYPE_MISMATCH, f"{name} holds indices but is {tensor.dtype}")
        low, high = int(tensor.min()), int(tensor.max())
        if low < 0 or high >= bound:
            raise Rejected(
                Reason.INDEX_OUT_OF_RANGE, f"{name} spans [{low}, {high}], bound {bound}"
            )
