"""Numerics across kernel paths: what two honest computations of one upload differ by.

The same training window, run on other kernel paths of this machine (``ATEN_CPU_CAPABILITY``
``default``, ``avx2`` and the machine's best; ``MKL_ENABLE_INSTRUCTIONS=AVX2``; 1 and 2 threads)
and on 1 or 2 ranks (DDP, FSDP2), against the reference: 1 rank, the best path, 1 thread. Each
run is ``tests/training/dist_worker.py`` (the two-rank test's worker: two windows of the `tiny`
preset, the miner's error feedback and SparseLoCo upload) in a fresh process with the path's
environment. Per run, the worst of its windows:

* ``delta_rel``: the pseudo-gradient's relative L2 difference; ``input_rel`` the codec input's
  (pseudo-gradient plus the run's own error feedback); ``loss_abs`` the mean loss's;
* ``agreement``: :func:`subnet.compression.agreement.agreement` of the run's payload against the
  reference's input (the run's own residual carried), at ``--rtol``: ``distance_rel`` (the lower
  bound on the input difference the payload forces, over the input's norm), support and code flips;
* ``codebook_rel``: the largest relative codebook difference (what ``allclose`` once compared);
* ``update_rel`` and ``ef_rel``: the relative L2 difference of the decoded update and of the
  error feedback (what v5's audit replays compared; v6's checks compare ``input_rel``).

Then ``in_process``: the suite's other comparisons of two computations in one process (gradient
accumulation against one big batch, streaming merge against eager aggregation, the outer SGD
against torch's) on every path, as the share of the test's tolerance the error uses.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from benchmarks.common import REPO, environment, free_port

WORKER = REPO / "tests" / "training" / "dist_worker.py"
RANKS = [(1, "-"), (2, "ddp"), (2, "fsdp")]


def paths() -> list[tuple[str, dict[str, str], int]]:
    """(label, environment, threads) of every path measured; the first is the reference."""
    best = _best_capability()
    return [
        (f"{best} (best), 1 thread", {}, 1),
        (f"{best} (best), 2 threads", {}, 2),
        ("avx2", {"ATEN_CPU_CAPABILITY": "avx2"}, 1),
        ("default", {"ATEN_CPU_CAPABILITY": "default"}, 1),
        ("MKL AVX2", {"MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1),
        (
            "default + MKL AVX2, 2 threads",
            {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
            2,
        ),
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``bench.py numerics``."""
    parser.add_argument("--rtol", type=float, default=1e-4, help="agreement's input tolerance")


def _best_capability() -> str:
    code = "import torch; print(torch.backends.cpu.get_cpu_capability().lower())"
    clean = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    out = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def train(out: Path, env: dict[str, str], threads: int, world: int, mode: str) -> dict:
    """One run of the worker on ``world`` ranks; its saved windows."""
    base = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    args = [sys.executable, str(WORKER), "--out", str(out), "--threads", str(threads)]
    if world == 1:
        base.pop("WORLD_SIZE", None)
        subprocess.run(args, env=base, check=True, capture_output=True)
    else:
        base.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
        procs = [
            subprocess.Popen(
                [*args, "--mode", mode],
                env={**base, "RANK": str(r)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            for r in range(world)
        ]
        codes = [p.wait(timeout=600) for p in procs]
        if codes != [0] * world:
            raise RuntimeError(f"ranks exited {codes}: {procs[0].stderr.read()[-500:]}")
    return torch.load(out)


def _rel(a: dict, b: dict) -> float:
    num = sum(float((a[k].double() - b[k].double()).pow(2).sum()) for k in b)
    den = sum(float(b[k].double().pow(2).sum()) for k in b)
    return math.sqrt(num / den) if den else 0.0


def compare(ref: dict, run: dict, rtol: float) -> dict:
    """The figures above for one run against the reference, worst window first."""
    from subnet.compression import CompressionConfig, build_compressor
    from subnet.compression.agreement import agreement

    codec, decay = build_compressor(CompressionConfig()), CompressionConfig().ef_decay
    row = dict.fromkeys(
        (
            "delta_rel",
            "input_rel",
            "loss_abs",
            "distance_rel",
            "codebook_rel",
            "update_rel",
            "ef_rel",
        ),
        0.0,
    )
    row.update(support_flips=0, code_flips=0, agrees=True)
    own: dict = {}  # the run's residual after the previous window
    ref_ef: dict = {}
    for w in range(sum(1 for k in ref if k.startswith("delta"))):
        shapes = {k: tuple(t.shape) for k, t in ref[f"delta{w}"].items()}
        reference = {k: own[k].mul(decay) + v if own else v for k, v in ref[f"delta{w}"].items()}
        got = agreement(codec, run[f"payload{w}"], reference, rtol)
        mine, theirs = (
            codec.decode(run[f"payload{w}"], shapes),
            codec.decode(ref[f"payload{w}"], shapes),
        )
        own = {k: run[f"input{w}"][k] - mine[k] for k in shapes}
        ref_ef = {k: ref[f"input{w}"][k] - theirs[k] for k in shapes}
        cb = [k for k in ref[f"payload{w}"] if k == "cb" or k.endswith("::cb")]
        figures = {
            "delta_rel": _rel(run[f"delta{w}"], ref[f"delta{w}"]),
            "input_rel": _rel(run[f"input{w}"], ref[f"input{w}"]),
            "loss_abs": abs(run[f"loss{w}"] - ref[f"loss{w}"]),
            "distance_rel": got.distance / (got.budget / rtol) if got.budget else 0.0,
            "codebook_rel": max(
                float(
                    (
                        (run[f"payload{w}"][k] - ref[f"payload{w}"][k]).abs()
                        / ref[f"payload{w}"][k].abs().clamp(min=1e-30)
                    ).max()
                )
                for k in cb
            ),
            "update_rel": _rel(mine, theirs),
            "ef_rel": _rel(own, ref_ef),
        }
        for key, value in figures.items():
            row[key] = max(row[key], value)
        row["support_flips"] += got.support_flips
        row["code_flips"] += got.code_flips
        row["agrees"] = row["agrees"] and got.ok
    return {k: (f"{v:.2e}" if isinstance(v, float) else v) for k, v in row.items()}


def in_process_errors() -> dict[str, float]:
    """This process's errors of the suite's in-process comparisons (see the module doc)."""
    sys.path.insert(0, str(REPO / "tests" / "training"))
    from test_training_inner import Bigram, _batches
    from test_training_streaming import _updates

    from subnet.compression import CompressionConfig, build_compressor
    from subnet.training import AggregationConfig, InnerConfig, OuterSGD, aggregate, train_inner
    from subnet.training.streaming import merge_payloads

    torch.set_num_threads(int(os.environ.get("BEAM_NUMERICS_THREADS", "1")))
    out: dict[str, float] = {}
    small = _batches(6, batch=2)
    big = [
        (torch.cat([a[0], b[0]]), torch.cat([a[1], b[1]]))
        for a, b in zip(small[::2], small[1::2], strict=True)
    ]
    a, b = Bigram(), Bigram()
    train_inner(a, small, InnerConfig(steps=3, accumulation=2, grad_clip=0.5))
    train_inner(b, big, InnerConfig(steps=3, accumulation=1, grad_clip=0.5))
    a, b = a.requires_grad_(False), b.requires_grad_(False)
    out["accumulation"] = max(
        float(((pa - pb).abs() / (1e-6 + 1e-5 * pb.abs())).max())
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True)
    )
    worst = 0.0
    for name in ("sparseloco", "sparseloco-rice", "int8", "dense-fp32"):
        codec = build_compressor(CompressionConfig(name=name, topk=8, chunk=4))
        shapes = {"a": (6, 5), "b": (7,)}
        payloads = [codec.encode(u) for u in _updates(4, seed=2)]
        decoded = [codec.decode(p, shapes) for p in payloads]
        want = aggregate(decoded, [1.0, 2.0, 3.0, 4.0], AggregationConfig())
        got = merge_payloads(codec, payloads, shapes, [1.0, 2.0, 3.0, 4.0], AggregationConfig())
        for k in want:
            used = (got[k] - want[k]).abs() / (1e-7 + 1e-6 * want[k].abs())
            worst = max(worst, float(used.max()))
    out["streaming"] = worst
    worst = 0.0
    for nesterov in (True, False):
        gen = torch.Generator().manual_seed(0)
        p_ref = torch.nn.Parameter(torch.randn(10, generator=gen))
        params = {"w": p_ref.detach().clone()}
        ref = torch.optim.SGD([p_ref], lr=0.7, momentum=0.9, nesterov=nesterov)
        ours = OuterSGD(0.7, 0.9, nesterov=nesterov)
        for _ in range(5):
            g = torch.randn(10, generator=gen)
            p_ref.grad = g.clone()
            ref.step()
            ours.step(params, {"w": g})
        worst = max(worst, float((params["w"] - p_ref.detach()).abs().max()) / 1e-6)
    out["outer_sgd"] = worst
    return out


#: Each in-process test's tolerance; the figures are the share of it used (1 = at the limit).
IN_PROCESS_TOLERANCE = {
    "accumulation": "|a - b| <= 1e-6 + 1e-5 |b| (tests/training/test_training_inner.py)",
    "streaming": "|got - want| <= 1e-7 + 1e-6 |want| (tests/training/test_training_streaming.py)",
    "outer_sgd": "|ours - torch| <= 1e-6 (tests/training/test_training_outer.py)",
}


def _in_process(env: dict[str, str], threads: int) -> dict[str, float]:
    code = (
        "import json, sys; sys.path.insert(0, 'scripts'); from benchmarks import numerics; "
        "print(json.dumps(numerics.in_process_errors()))"
    )
    full = {**os.environ, **env, "PYTHONPATH": str(REPO), "BEAM_NUMERICS_THREADS": str(threads)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, cwd=REPO, capture_output=True, text=True, check=True
    )
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict:
    """Every path x rank count against the reference; the in-process comparisons per path."""
    table, in_process = {}, {}
    with tempfile.TemporaryDirectory(prefix="beam-numerics-") as tmp:
        ref = None
        for label, env, threads in paths():
            for world, mode in RANKS:
                out = Path(tmp) / f"{len(table)}.pt"
                got = train(out, env, threads, world, mode)
                ref = ref if ref is not None else got
                table[f"{label} | {'1 rank' if world == 1 else f'2 ranks {mode}'}"] = compare(
                    ref, got, args.rtol
                )
            in_process[label] = {k: f"{v:.1e}" for k, v in _in_process(env, threads).items()}
    worst = {
        key: max(float(row[key]) for row in table.values())
        for key in ("delta_rel", "input_rel", "loss_abs", "distance_rel", "update_rel", "ef_rel")
    }
    return {
        "rtol": args.rtol,
        "runs": table,
        "worst": {k: f"{v:.2e}" for k, v in worst.items()},
        "all_agree": all(row["agrees"] for row in table.values()),
        "in_process": in_process,
        "in_process_tolerance": IN_PROCESS_TOLERANCE,
        "environment": environment("cpu"),
    }
