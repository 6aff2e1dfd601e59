"""Sender-side error feedback: what a lossy codec dropped is added back into the next update.

Each round the sender forms ``acc = decay * e + g``, sends ``C(acc)`` and keeps
``e = acc - decode(C(acc))`` (Seide et al., 2014; Karimireddy et al., 2019, "Error Feedback Fixes
SignSGD"). SparseLoCo (Sarfi et al., 2025) shows that with aggressive top-k this decayed
accumulator stands in for DiLoCo's outer momentum, which is why its outer step is plain SGD.
The buffer never leaves the sender, so nobody else can corrupt it; it is saved and resumed with
the sender's other state.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from subnet.compression.base import Compressor, Payload


class ErrorFeedback:
    """The residual buffers of one sender, one fp32 tensor per parameter name."""

    def __init__(self, decay: float = 0.95) -> None:
        if not 0.0 <= decay <= 1.0:
            raise ValueError("decay must lie in [0, 1]")
        self.decay = decay
        self.buffers: dict[str, torch.Tensor] = {}

    def compress(
        self, compressor: Compressor, update: Mapping[str, torch.Tensor]
    ) -> tuple[Payload, dict[str, torch.Tensor]]:
        """Encode ``decay * e + update``; keep the residual; return ``(payload, decoded)``.

        ``decoded`` is exactly what every reader will reconstruct from ``payload``, so the sender
        can account for its own contribution without decoding twice.
        """
        acc: dict[str, torch.Tensor] = {}
        for name, value in update.items():
            value = value.detach().float()
            previous = self.buffers.get(name)
            acc[name] = value.clone() if previous is None else previous.mul(self.decay).add_(value)
        payload = compressor.encode(acc)
        decoded = compressor.decode(payload, {name: tuple(t.shape) for name, t in acc.items()})
        # Some codecs (sparseloco-rice) encode and decode on the CPU: bring the decode to the
        # accumulator's device, so a GPU sender keeps its residual on the GPU.
        decoded = {name: decoded[name].to(acc[name].device) for name in acc}
        self.buffers = {name: acc[name].sub_(decoded[name]) for name in acc}
        return payload, decoded

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The buffers, as a flat tensor dict (safetensors-ready)."""
        return {name: t.clone() for name, t in self.buffers.items()}

    def load_state_dict(self, state: Mapping[str, torch.Tensor]) -> None:
        """Restore buffers saved by :meth:`state_dict`."""
        self.buffers = {name: t.detach().float().clone() for name, t in state.items()}
