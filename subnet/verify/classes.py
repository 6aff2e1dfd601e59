"""Replay classes: what decides a window's arithmetic, so that a check goes only where it is exact.

A check replays a miner's window and compares (``subnet.verify.check``); it is exact only when
the validator computes what the miner computed, bit for bit. What decides that is the
**class** of the machine and its settings, written ``platform/precision/software``:

- **platform**: the device and the kernels it dispatches to. A CPU is named by ATen's vector
  width and MKL's code path (``cpu-avx2-mkl.avx2`` once ``subnet.kernels.pin`` holds both, the
  same on every x86 CPU since 2013), plus the matrix units MKL and oneDNN pick by themselves
  when they are not held (``amx``, ``avx512bf16``; every bf16 class names them: oneDNN's bf16
  kernels follow the CPU). A GPU is named by its compute capability and model and the CUDA
  the wheel was built with (``cuda-sm90-nvidia-h100-80gb-hbm3-cu12.8``).
- **precision**: ``fp32``, or ``bf16`` (forward passes under bf16 autocast).
- **software**: the torch build (``torch2.13.0+cpu``), which fixes the kernels' code (and on a
  GPU cuBLAS and cuDNN, bundled with the wheel).

The miner's threads and ranks also decide its arithmetic; they travel in their own fields of
the signed metadata (``threads``, ``ranks``) and every replay reproduces them, so they are not
part of what a validator must match. A validator **covers** the classes it can replay exactly:
its own platform and software, in fp32 and (where its kernels run bf16) in bf16
(:func:`covered`). Two machines in one class agree bit for bit once :func:`deterministic` has
run (measured for the CPU classes in ``bench.py verify``; for CUDA, ``scripts/gpu_check.sh``).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..wire.replay_class import MAX_CLASS_CHARS, PRECISIONS, ReplayClass

if TYPE_CHECKING:
    import torch

__all__ = ["MAX_CLASS_CHARS", "PRECISIONS", "ReplayClass"]

_SLUG = re.compile(r"[^a-z0-9.+]+")
PINNED_PLATFORM = "cpu-avx2-mkl.avx2"  # every CPU neuron's, on the kernels subnet.kernels pins


def slug(text: str) -> str:
    """``text`` as a class part: lowercase, runs of other characters as one ``-``."""
    return _SLUG.sub("-", text.lower()).strip("-") or "unknown"


def software() -> str:
    """The torch build that fixes the kernels' code."""
    import torch

    return slug(f"torch{torch.__version__}")


def _cpu_units() -> str:
    """The matrix units MKL and oneDNN pick by themselves on this CPU (``ONEDNN_MAX_CPU_ISA``
    caps oneDNN's when set)."""
    import torch

    capped = os.environ.get("ONEDNN_MAX_CPU_ISA")
    if capped:
        return "onednn." + slug(capped)
    if torch.cpu._is_amx_tile_supported():
        return "amx"
    if torch.cpu._is_avx512_bf16_supported():
        return "avx512bf16"
    if torch.cpu._is_avx512_supported():
        return "avx512"
    return "avx2"


def platform(device: str, precision: str, environ: Mapping[str, str] | None = None) -> str:
    """This machine's platform for ``device`` at ``precision`` (the module doc)."""
    import torch

    env = os.environ if environ is None else environ
    dev = torch.device(device)
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        return slug(
            f"cuda-sm{props.major}{props.minor}-{props.name}-cu{torch.version.cuda or 'none'}"
        )
    if dev.type != "cpu":
        return slug(dev.type)
    aten = slug(torch.backends.cpu.get_cpu_capability())
    mkl = (env.get("MKL_CBWR") or "auto").lower()
    free = mkl == "auto"
    if free:  # MKL's own pick by the CPU, unless its instructions are capped
        capped = env.get("MKL_ENABLE_INSTRUCTIONS")
        name = f"cpu-{aten}-mkl.auto" + (f".{slug(capped)}" if capped else "")
    else:  # MKL's conditional reproducibility: the same path on every CPU that has it
        name = f"cpu-{aten}-mkl.{slug(mkl)}"
    if free or precision == "bf16":
        name += f"-{_cpu_units()}"
    return name


def of_machine(device: str, precision: str) -> ReplayClass:
    """The class this process trains in on ``device`` at ``precision``."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
    return ReplayClass(platform(device, precision), precision, software())


def runs_bf16(device: str, model: torch.nn.Module | None = None, seq_len: int = 64) -> bool:
    """Whether this process's kernels train under bf16 autocast at all: one forward and
    backward of ``model`` (the validator's replay model; else a small layer) on ``seq_len``
    tokens. ATen held to AVX2 on a CPU with AMX, for one, cannot: its bf16 attention needs
    AVX-512 (``pack_vnni2``)."""
    import torch

    try:
        with torch.autocast(torch.device(device).type, dtype=torch.bfloat16):
            if model is None:
                out = torch.nn.Linear(32, 32).to(device)(torch.ones(4, 32, device=device))
            else:
                vocab = model.get_parameter("tok_emb.weight").shape[0]
                idx = torch.randint(0, vocab, (2, seq_len), device=device)
                out = model(idx, idx)[1]
        out.float().sum().backward()
    except RuntimeError:
        return False
    finally:
        if model is not None:
            model.zero_grad(set_to_none=True)
    return True


def covered(
    device: str, model: torch.nn.Module | None = None, seq_len: int = 64
) -> tuple[ReplayClass, ...]:
    """The classes a validator on ``device`` replays exactly: its own, in each precision its
    kernels run (``runs_bf16`` on its replay ``model``)."""
    precisions = PRECISIONS if runs_bf16(device, model, seq_len) else ("fp32",)
    return tuple(of_machine(device, p) for p in precisions)


def deterministic(device: str) -> list[str]:
    """Make two runs of a window in this class agree bit for bit; what was set, for the log.

    On a CPU the kernels are fixed by ``subnet.kernels.pin`` and the threads by the upload's
    metadata. On CUDA: deterministic algorithms (an op with no deterministic kernel raises
    instead of varying), cuBLAS's fixed workspace (``CUBLAS_WORKSPACE_CONFIG``, set by ``pin``
    before CUDA starts), no TF32 and no reduced-precision bf16 reductions in matrix products,
    cuDNN's deterministic, non-benchmarked kernels."""
    import torch

    if torch.device(device).type != "cuda":
        return []
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    return [
        "use_deterministic_algorithms",
        f"CUBLAS_WORKSPACE_CONFIG={os.environ.get('CUBLAS_WORKSPACE_CONFIG', '')}",
        "tf32 off",
        "bf16 reduced-precision reductions off",
        "cudnn deterministic",
    ]


def accepted(cls: ReplayClass | str, patterns: Iterable[str]) -> bool:
    """Whether a subnet that accepts ``patterns`` (shell patterns over the class's text, as
    ``scoring.classes`` lists them; none: every class) accepts ``cls``."""
    patterns = list(patterns)
    return not patterns or any(fnmatch.fnmatchcase(str(cls), p) for p in patterns)
