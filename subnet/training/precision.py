"""Whether bf16 is worth turning on: does this device have native bf16 matrix kernels?

On CUDA, bf16 needs compute capability 8.0 (Ampere) or newer. On a CPU, oneDNN runs bf16 matmuls
natively only with AVX512-BF16 or AMX (Intel Cooper Lake / Sapphire Rapids, AMD Zen 4 and later);
elsewhere (AVX2-only CPUs such as Zen 3) it emulates them, and bf16 is many times slower than fp32
(docs/benchmarks.md measures it).
"""

from __future__ import annotations

import torch


def bf16_native(device: str | torch.device) -> bool:
    """True when ``device`` runs bf16 matrix multiplies in hardware."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return device.type in ("mps", "xpu")
