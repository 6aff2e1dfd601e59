"""Beam's benchmarks: ``python scripts/bench.py NAME [--json] [flags]``.

NAME is ``adversarial``, ``broadcast``, ``compression``, ``convergence``, ``demo_load``, ``faults``,
``gpu_class``, ``gpu_replay``, ``numerics``, ``rescore``, ``scale``, ``throughput`` or ``verify``
(``--help`` after NAME lists its flags).
Defaults fit a 2-core CPU; ``--device cuda`` plus the size flags scale a run up on a GPU. With
``--json`` the last line printed is one JSON object; without it, a readable summary. The measured
figures and the commands that produced them are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmarks import (  # noqa: E402
    adversarial,
    broadcast,
    compression,
    convergence,
    demo_load,
    faults,
    gpu_class,
    gpu_replay,
    numerics,
    rescore,
    scale,
    throughput,
    verify,
)

BENCHMARKS = {
    "adversarial": adversarial,
    "broadcast": broadcast,
    "compression": compression,
    "convergence": convergence,
    "faults": faults,
    "gpu_class": gpu_class,
    "gpu_replay": gpu_replay,
    "numerics": numerics,
    "rescore": rescore,
    "scale": scale,
    "throughput": throughput,
    "demo_load": demo_load,
    "verify": verify,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The shared flags plus each benchmark's own, as subcommands."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="name", required=True)
    for name, module in BENCHMARKS.items():
        p = sub.add_parser(name, help=(module.__doc__ or "").splitlines()[0])
        p.add_argument("--json", action="store_true", help="print one JSON object as the last line")
        p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
        p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
        module.add_arguments(p)
    return parser.parse_args(argv)


def _summary(record: dict, indent: str = "") -> None:
    for key, value in record.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _summary(value, indent + "  ")
        else:
            print(f"{indent}{key}: {value}")


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark and print its record."""
    args = parse_args(argv)
    record = BENCHMARKS[args.name].run(args)
    if args.json:
        print(json.dumps(record, sort_keys=False))
    else:
        _summary(record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
