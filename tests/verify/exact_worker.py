"""One side of ``test_exact_replay``: a miner's window, or a validator's replay of it.

    python tests/verify/exact_worker.py miner|validator DATA OUT [--claim THREADS]

Run with the kernel environment already set (it is fixed when torch loads). The miner trains as
``subnet.neuron.miner`` does (``Trainer.train``, a fresh warm-started AdamW); the validator
replays as ``subnet.neuron.checks`` does (``Replayer.replay`` with the miner's thread count).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from subnet.config import ProtocolConfig  # noqa: E402
from subnet.data import TokenDataset  # noqa: E402
from subnet.model import build_model  # noqa: E402
from subnet.neuron.replay import Replayer  # noqa: E402
from subnet.training import build_inner_optimizer, pseudo_gradient  # noqa: E402
from subnet.training.trainer import Trainer  # noqa: E402

STEPS = 6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=("miner", "validator"))
    parser.add_argument("data")
    parser.add_argument("out")
    parser.add_argument("--claim", type=int, default=None, help="the miner's threads")
    args = parser.parse_args()
    inner = ProtocolConfig().inner.model_copy(update={"steps": STEPS})
    data = TokenDataset.from_folder(Path(args.data), seq_len=ProtocolConfig().seq_len)
    model = build_model("tiny", vocab_size=data.vocab_size, seed=0)
    base = {k: v.detach().clone() for k, v in model.state_dict().items()}
    batches = list(data.batches(list(range(STEPS * inner.micro_batch)), inner.micro_batch))
    if args.role == "miner":
        Trainer().train(model, batches, inner, build_inner_optimizer(model, inner))
        delta = pseudo_gradient(base, model)
    else:
        delta = Replayer(model, inner).replay(base, batches, STEPS, threads=args.claim)
    record = {
        "delta": {k: v.detach() for k, v in delta.items()},
        "threads": torch.get_num_threads(),
        "capability": torch.backends.cpu.get_cpu_capability(),
    }
    torch.save(record, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
