"""One kernel path of ``bench.py verify``: train the benchmark's windows as a miner would.

Started by ``verify.py`` as its own process, with the path's environment already set (kernel
dispatch and MKL choices are fixed when torch loads), or twice, as two ranks, for a 2-rank DDP or
FSDP miner. For every window it starts from the given base model (the same bases for every
path), trains H steps with a fresh, warm-started AdamW on the window's samples, and records what
a miner keeps and sends: the pseudo-gradient, its error feedback before and after (its own
chain), and the compressed upload. A validator's replay is the same training on its own path,
so the record of path B is B's replay of every window.

    python scripts/benchmarks/verify_worker.py --bases BASES.pt --out OUT.pt [--threads N]
        [--mode ddp|fsdp]   (under torchrun-style RANK / WORLD_SIZE / MASTER_* variables)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch  # noqa: E402

from subnet.compression import CompressionConfig, ErrorFeedback, build_compressor  # noqa: E402
from subnet.data import TokenDataset  # noqa: E402
from subnet.model import build_model  # noqa: E402
from subnet.neuron.replay import PROBE_NOISE, Replayer  # noqa: E402
from subnet.training import (  # noqa: E402
    InnerConfig,
    build_inner_optimizer,
    load_parameters,
    pseudo_gradient,  # noqa: E402
)
from subnet.training.distributed import launch  # noqa: E402
from subnet.training.parallel import ParallelConfig  # noqa: E402
from subnet.training.trainer import Trainer  # noqa: E402
from subnet.verify.classes import of_machine  # noqa: E402


def train_windows(
    bases: dict,
    trainer: Trainer,
    probe: bool = False,
    extra=(),
    threads_probe: bool = False,
    ranks: int = 0,
    precision: str = "fp32",
) -> dict:
    """Every window's pseudo-gradient, error feedback before and after, and upload; with
    ``probe``, also the validator's chaos probe of it (a replay with perturbed gradients), and
    one more probe per noise level in ``extra`` (``probe@NOISE``: what another level would see) and,
    with ``threads_probe``, a replay on another thread count (``probe@threads``); with ``ranks``,
    the replay of a miner on that many ranks (``replay@ranksN``); ``precision``: ``bf16``
    trains under bf16 autocast. The record names the replay class it trained in."""
    setting = bases["setting"]
    inner = InnerConfig(**{**setting["inner"], "bf16_autocast": precision == "bf16"})
    data = TokenDataset.from_folder(Path(setting["data"]), seq_len=setting["seq_len"])
    model = build_model(setting["preset"], vocab_size=data.vocab_size, seed=0)
    compressor = build_compressor(CompressionConfig())
    ef = ErrorFeedback(setting["ef_decay"])
    out: dict = {"windows": [], "class": str(of_machine("cpu", precision))}
    for w, base in enumerate(bases["bases"]):
        load_parameters(model, base)
        ids = bases["samples"][w]
        optimizer = build_inner_optimizer(model, inner)
        trainer.train(model, list(data.batches(ids, inner.micro_batch)), inner, optimizer)
        delta = pseudo_gradient(base, model)
        before = ef.state_dict()
        payload, _ = ef.compress(compressor, delta)
        record = {"delta": delta, "before": before, "after": ef.state_dict(), "payload": payload}
        replayer = Replayer(model, inner)
        batches = list(data.batches(ids, inner.micro_batch))
        if ranks:
            # How it replays a miner of that many ranks (their gradients, averaged as DDP)
            record[f"replay@ranks{ranks}"] = replayer.replay(
                base, batches, inner.steps, ranks=ranks
            )
        if probe:
            record["probe"] = replayer.replay(base, batches, inner.steps, noise=PROBE_NOISE)
            for noise in extra:
                record[f"probe@{noise:g}"] = replayer.replay(base, batches, inner.steps, noise)
            if threads_probe:
                # The same replay on another thread count: how far this window's last bits
                # carry when only the reductions' split changes (what a validator can vary).
                own = torch.get_num_threads()
                other = own - 1 if own > 1 else 2
                record["probe@threads"] = replayer.replay(base, batches, inner.steps, threads=other)
        out["windows"].append(record)
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bases", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mode", default=None, help="ddp or fsdp: one of two ranks")
    parser.add_argument("--precision", default="fp32", help="fp32, or bf16 (autocast)")
    parser.add_argument("--no-probe", action="store_true", help="train only: no chaos probe")
    parser.add_argument("--rank-replays", type=int, default=0, help="also replay as N ranks")
    parser.add_argument(
        "--probe-noises",
        default="",
        help="more chaos-probe noise levels, and 'threads' for a replay on another thread count",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bases = torch.load(args.bases, weights_only=False)
    if args.mode is None:
        extra = [float(x) for x in args.probe_noises.split(",") if x and x != "threads"]
        threads_probe = "threads" in args.probe_noises.split(",")
        probe = not args.no_probe
        record = train_windows(
            bases, Trainer(), probe, extra, threads_probe, args.rank_replays, args.precision
        )
        torch.save(record, args.out)
        return 0
    config = ParallelConfig(mode=args.mode, timeout_s=120, idle_timeout_s=120)
    with launch(config, "cpu", bases["setting"]["inner"]["micro_batch"]) as group:
        assert group is not None
        if not group.is_main:
            return group.serve()
        torch.save(train_windows(bases, Trainer(config), precision=args.precision), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
