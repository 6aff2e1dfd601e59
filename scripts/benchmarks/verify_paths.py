"""The kernel paths ``bench.py verify`` trains on, each in its own process (or two ranks), and
the windows' base models they all start from."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import torch

from benchmarks.common import REPO, ensure_dataset, free_port
from subnet.compression import ErrorFeedback, build_compressor
from subnet.config import ProtocolConfig
from subnet.data import TokenDataset
from subnet.kernels import PINNED
from subnet.model import build_model
from subnet.training import build_inner_optimizer, load_parameters, pseudo_gradient, train_inner

WORKER = Path(__file__).with_name("verify_worker.py")


class KernelPath(NamedTuple):
    """How one path trains: its environment (a value of None unsets the variable), threads,
    2-rank mode, and precision."""

    env: dict[str, str | None]
    threads: int
    mode: str | None
    precision: str = "fp32"


# What holds an unpinned CPU's replay class (subnet.verify.classes): ATen on its AVX-512
# kernels, MKL free (on this Sapphire Rapids CPU it takes its AMX kernels)
AVX512 = {"ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AUTO"}
PATHS: dict[str, KernelPath] = {
    "default": KernelPath({"ATEN_CPU_CAPABILITY": "default"}, 1, None),
    "avx2": KernelPath({"ATEN_CPU_CAPABILITY": "avx2"}, 1, None),
    "best": KernelPath({}, 1, None),
    "mkl-avx2": KernelPath({"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1, None),
    "threads2": KernelPath({}, 2, None),
    # ATen pinned to AVX2 (what a protocol could require), MKL or threads still free
    "avx2-mkl": KernelPath(
        {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1, None
    ),
    "avx2-t2": KernelPath({"ATEN_CPU_CAPABILITY": "avx2"}, 2, None),
    # what every neuron runs (subnet.kernels.pin: ATen and MKL both held to AVX2), 1 or 2
    # threads; the paths above leave MKL free, which on an Intel CPU with AVX-512 or AMX takes
    # its own kernels (another replay class)
    "pinned": KernelPath(dict(PINNED), 1, None),
    "pinned-t2": KernelPath(dict(PINNED), 2, None),
    # the kernels subnet.kernels pins, on a CPU whose MKL has only AVX2
    "avx2-mkl-t2": KernelPath({**PINNED, "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 2, None),
    # 2-rank miners on the kernels subnet.kernels pins, MKL held to AVX2 (another CPU than the
    # validators'), replayed as 2 ranks (replay@ranks2 of a one-process path)
    "ddp2": KernelPath({**PINNED, "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1, "ddp"),
    "fsdp2": KernelPath({**PINNED, "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1, "fsdp"),
    # replay classes other than the pinned CPU's, two processes of each (a miner and a validator
    # on two machines of the class): an unpinned AVX-512 CPU in fp32, and the same in bf16
    # autocast (oneDNN's bf16 kernels, on this CPU its AMX ones)
    "avx512": KernelPath(AVX512, 1, None),
    "avx512-b": KernelPath(AVX512, 1, None),
    "bf16": KernelPath(AVX512, 1, None, "bf16"),
    "bf16-b": KernelPath(AVX512, 1, None, "bf16"),
}

# What ``bench.py verify`` runs unless ``--paths`` says otherwise: miners as Beam runs them, on
# the kernels ``subnet.kernels`` pins, on this CPU or with MKL's instructions held to AVX2 too
# (another CPU), on 1 or 2 threads, 1 or 2 ranks. ``default``, ``best``, ``mkl-avx2``,
# ``threads2``, ``avx2``, ``avx2-mkl`` and ``avx2-t2`` are what an operator who overrides the
# pin runs (on an AMD CPU MKL takes its AVX2 kernels unpinned; on an Intel one with AVX-512 or
# AMX it does not).
DEFAULT_PATHS = (
    "pinned",
    "avx2-mkl-t2",
    "pinned-t2",
    "ddp2",
    "fsdp2",
    "avx512",
    "avx512-b",
    "bf16",
    "bf16-b",
)


def bases_on_disk(args: argparse.Namespace, p: ProtocolConfig, folder: Path) -> Path:
    """The windows' base models (a reference miner's run, outer SGD) and samples, on disk; the
    ones already in ``folder`` if they were made with the same settings (``--runs``)."""
    setting = {
        "preset": args.honest_preset,
        "data": str(args.honest_data.resolve()),
        "seq_len": p.seq_len,
        "inner": p.inner.model_dump(),
        "ef_decay": p.compression.ef_decay,
    }
    path = folder / "bases.pt"
    if path.exists():
        kept = torch.load(path, weights_only=False, mmap=True)
        if kept["setting"] != setting or len(kept["samples"]) != args.windows:
            raise SystemExit(
                f"error: {folder} holds runs of other settings or another number of windows; "
                "give --runs a new folder"
            )
        return path
    data = TokenDataset.from_folder(ensure_dataset(args.honest_data), seq_len=p.seq_len)
    model = build_model(args.honest_preset, vocab_size=data.vocab_size, seed=0)
    comp, ef, inner = (
        build_compressor(p.compression),
        ErrorFeedback(p.compression.ef_decay),
        p.inner,
    )
    per = inner.steps * inner.micro_batch
    train = data.split_samples("train")
    bases, samples = [], []
    for w in range(args.windows):
        base = {k: v.detach().clone() for k, v in model.state_dict().items()}
        ids = [(w * per + i) % train for i in range(per)]
        train_inner(
            model, data.batches(ids, inner.micro_batch), inner, build_inner_optimizer(model, inner)
        )
        _, decoded = ef.compress(comp, pseudo_gradient(base, model))
        load_parameters(model, {k: base[k] - p.outer.lr * decoded[k] for k in base})
        bases.append(base)
        samples.append(ids)
    torch.save({"setting": setting, "bases": bases, "samples": samples}, path)
    return path


def run_path(
    name: str, bases: Path, folder: Path, probe_noises: str = "", rank_replays: int = 0
) -> dict:
    """One kernel path's record (its own process, or two ranks); the one already in ``folder``
    if there is one (``--runs``: the bases it was trained from are checked by the caller)."""
    env_extra, threads, mode, precision = PATHS[name]
    out = folder / f"{name}.pt"
    if out.exists():
        return torch.load(out, weights_only=False, mmap=True)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": str(threads)}
    for key, value in env_extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    cmd = [
        sys.executable,
        str(WORKER),
        "--bases",
        str(bases),
        "--out",
        str(out),
        "--threads",
        str(threads),
        "--precision",
        precision,
    ]
    if mode is None and rank_replays:
        cmd += ["--rank-replays", str(rank_replays)]
    if mode is None and probe_noises == "none":
        cmd += ["--no-probe"]
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=3600)
    elif mode is None:
        cmd += ["--probe-noises", probe_noises]
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=3600)
    else:
        env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
        ranks = [
            subprocess.Popen(
                [*cmd, "--mode", mode],
                env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for r in range(2)
        ]
        for rank in ranks:
            _, err = rank.communicate(timeout=3600)
            if rank.returncode:
                raise RuntimeError(f"{name}: a rank failed: {err.decode()[-2000:]}")
    # Mapped, not read: 12 windows of hypertrain-20m on 7 paths are about 24 GB of records, more
    # than the memory of the machine that compares them; pages come in as the checks read them.
    return torch.load(out, weights_only=False, mmap=True)
