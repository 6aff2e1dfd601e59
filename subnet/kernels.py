"""The CPU kernels every neuron trains and replays with, fixed before torch loads.

A validator checks a miner's window by training it again (``subnet.neuron.replay``). Whatever
the arithmetic differs in, a chaotic window grows: on ``hypertrain-20m`` a last-bit difference
becomes up to 5.6e-3 of the codec input in 30 steps (docs/benchmarks.md#verify), far past what a
check can tolerate without letting lies through. Three things change a CPU's arithmetic:

- **ATen's vector width.** ATen dispatches its own kernels (softmax, norms, the optimizer) by
  the CPU: AVX-512 here, AVX2 elsewhere, each rounding differently. :func:`pin` holds them to
  AVX2 (``ATEN_CPU_CAPABILITY``), which every x86 CPU since 2013 has; on an AVX-512 CPU it costs
  nothing measurable (the matrix products are MKL's either way).
- **MKL's code path.** MKL picks its kernels by the CPU too; ``MKL_CBWR=AVX2`` (its conditional
  numerical reproducibility) makes every CPU with AVX2 take the same one.
- **The number of threads**, which splits reductions. It is the miner's to choose; it says how
  many it trained with in its upload's signed metadata (``threads``), and the validator replays
  with as many (``Replayer.replay``).

With the three fixed, a replay of a single-process miner is the miner's arithmetic bit for bit
(``tests/verify/test_exact_replay.py``). Neurons call :func:`pin` before anything loads torch.
An operator who sets either variable otherwise trains in another replay class
(``subnet.verify.classes``), checked by the validators that cover it.
"""

from __future__ import annotations

import os
import sys

# What every neuron sets, unless its operator set the variable already.
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}
# cuBLAS's fixed workspace, which its deterministic mode needs before CUDA starts (any of its
# documented sizes is deterministic, so one the operator set is kept and not reported).
CUDA_PINNED = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
REPLAYABLE = "AVX2"  # what torch.backends.cpu.get_cpu_capability() says once pinned


def pin(environ: dict[str, str] | None = None) -> list[str]:
    """Set :data:`PINNED` in ``environ`` (this process's, which its children inherit) where
    unset; the ``NAME=value`` of each one the operator set otherwise, left as it is. A process
    that loaded torch already (a test running a neuron in process) is left as it is."""
    env = os.environ if environ is None else environ
    loaded = environ is None and "torch" in sys.modules
    differ = []
    for name, value in CUDA_PINNED.items():
        if not loaded:
            env.setdefault(name, value)
    for name, value in PINNED.items():
        current = env.get(name)
        if current is None:
            if not loaded:
                env[name] = value
        elif current.lower() != value.lower():
            differ.append(f"{name}={current}")
    return differ


def replay_warning(capability: str, differ: list[str]) -> str | None:
    """Why this process trains in another replay class than the pinned CPU's, or None:
    ``capability`` is ATen's (``torch.backends.cpu.get_cpu_capability()``), ``differ`` what
    :func:`pin` left as the operator set it. Only validators on the same kernels check such a
    miner's uploads (``subnet.verify.classes``); none may."""
    if differ:
        return (
            f"{', '.join(differ)} is set: uploads are in another replay class than the pinned "
            f"CPU's ({PINNED}), checked only by validators on the same kernels; unset it to be "
            "checked (and paid) by every CPU validator"
        )
    if capability != REPLAYABLE:
        return (
            f"this CPU's kernels are {capability}, not {REPLAYABLE}: uploads are in another "
            "replay class than the pinned CPU's, checked only by validators on the same kernels"
        )
    return None
