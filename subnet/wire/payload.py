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

from subnet.wire.fields import DuplicateKey, unique_keys
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
    """Parse the safetensors header: `{name: (dtype code, shape)}` and the string metadata.

    Total on hostile input: any malformed table (bad JSON, nesting past the parser's limit,
    wrongly typed entries, absurd numbers) is `Rejected(malformed_payload)`, a key named twice
    at any level (a metadata key, a tensor name) `Rejected(duplicate_key)` (what a signature
    covers reads one way only), an unknown dtype `Rejected(dtype_mismatch)`; nothing else
    escapes.
    """
    if len(payload) < 8:
        raise Rejected(Reason.MALFORMED_PAYLOAD, "shorter than the safetensors length prefix")
    size = int.from_bytes(payload[:8], "little")
    if size > min(MAX_SAFETENSORS_HEADER, len(payload) - 8):
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"safetensors header length {size} out of bounds")
    try:
        raw = json.loads(
            payload[8 : 8 + size],
            parse_constant=_no_constant,
            parse_int=_small_int,
            object_pairs_hook=unique_keys,
        )
    except DuplicateKey as exc:  # before ValueError: it is one
        raise Rejected(Reason.DUPLICATE_KEY, f"safetensors header: {exc}"[:200]) from None
    except RecursionError:
        raise Rejected(Reason.MALFORMED_PAYLOAD, "safetensors header nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"safetensors header: {exc}"[:200]) from None
    if not isinstance(raw, dict):
        raise Rejected(Reason.MALFORMED_PAYLOAD, "safetensors header is not an object")
    metadata = raw.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise Rejected(Reason.MALFORMED_PAYLOAD, "metadata must map strings to strings")
    return {name: _entry(name, entry) for name, entry in raw.items()}, metadata


def _entry(name: str, entry: object) -> tuple[str, tuple[int, ...]]:
    """One tensor's `(dtype code, shape)`, checked for type before it is used."""
    if not isinstance(entry, dict):
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"tensor {name[:60]!r} is not an object")
    shape, dtype, offsets = entry.get("shape"), entry.get("dtype"), entry.get("data_offsets")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"tensor {name[:60]!r} has no valid shape")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int and o >= 0 for o in offsets)
    ):
        raise Rejected(Reason.MALFORMED_PAYLOAD, f"tensor {name[:60]!r} has no valid offsets")
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise Rejected(
            Reason.DTYPE_MISMATCH, f"tensor {name[:60]!r} has unsupported dtype {str(dtype)[:20]}"
        )
    return dtype, tuple(shape)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not valid JSON")


def _small_int(literal: str) -> int:
    # Shapes and offsets fit in 64 bits; a longer literal is an attack on int() (which refuses
    # past 4,300 digits only after the work) and is refused before conversion.
    if len(literal.lstrip("-")) > 20:
        raise ValueError(f"a {len(literal)}-digit integer in the tensor table")
    return int(literal)


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
    except (safetensors.SafetensorError, ValueError, RuntimeError, TypeError, OverflowError) as exc:
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
