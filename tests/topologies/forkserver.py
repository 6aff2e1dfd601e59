"""A fork server for the room runs: the imports are paid once, each member is a fork of it.

Started fresh, 42 interpreters that each import torch, bittensor and boto3 (about 4.5 s of CPU
apiece) had not logged a single line after three minutes on the shared 2-core machine. The fork
server imports them once (and loads botocore's S3 model once); each member is then a fork that
runs ``neurons/<role>.py`` as ``__main__`` with its own argv, environment, log file and pid: its
own OS process, which talks to the others only over S3, stopped by SIGTERM like any other.

Protocol (one JSON line each way): the harness sends ``{"argv", "log", "env"}``, the server
answers ``{"pid"}``; when a member exits the server writes its return code (negative: the
signal, as ``subprocess`` reports it) to ``<codes>/<pid>``. ``Forked`` reads it back behind the
``Popen`` methods ``childproc.stop_all`` uses.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

# What every member imports, paid once here before any fork (torch._dynamo: the first inner
# optimizer imports it, several seconds of CPU on a loaded machine).
WARM = ("torch", "torch._dynamo", "numpy", "bittensor", "boto3", "subnet.node.entry", "subnet.room.node",
        "subnet.neuron.miner", "subnet.neuron.validator", "subnet.neuron.holder")  # fmt: skip


class Forked:
    """A member forked by the server, with the ``Popen`` surface ``stop_all`` needs."""

    def __init__(self, pid: int, codes: Path) -> None:
        self.pid, self.code_file, self.returncode = pid, codes / str(pid), None

    def poll(self) -> int | None:
        if self.returncode is None and self.code_file.exists():
            self.returncode = int(self.code_file.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"member {self.pid}", timeout)
            time.sleep(0.1)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not yet reaped, so the pid is still ours
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The harness's side: start the server, fork members through it, stop it."""

    def __init__(self, folder: Path) -> None:
        self.codes = folder / "codes"
        self.codes.mkdir(parents=True, exist_ok=True)
        from subnet.childproc import die_with_parent

        with open(folder / "forkserver.out", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, str(self.codes)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=log, preexec_fn=die_with_parent,  # noqa: PLW1509
            )  # fmt: skip
        self.lock = threading.Lock()

    def ready(self) -> None:
        """Return once the server's imports are done (they run while the caller does other
        work), so what is timed after this is forking alone."""
        self._ask({})

    def _ask(self, request: dict) -> dict:
        with self.lock:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server exited ({self.proc.poll()}); see forkserver.out")
        return json.loads(line)

    def spawn(self, args: list[str], log_path: Path, env: dict[str, str] | None = None) -> Forked:
        """``childproc.spawn``'s signature: ``args[1]`` is the script, ``args[0]`` the python."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        reply = self._ask({"argv": args[1:], "log": str(log_path), "env": env or {}})
        return Forked(reply["pid"], self.codes)

    def stop(self) -> None:
        self.proc.stdin.close()  # the server exits on end of input
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# The server's side ------------------------------------------------------------------------


def _child(request: dict) -> None:
    """In the fork: become the member (never returns)."""
    code = 1
    try:
        from subnet.childproc import die_with_parent

        die_with_parent()  # the server going away takes its members with it
        fd = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.environ.update(request["env"])
        import faulthandler

        faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: its stacks
        import runpy

        import numpy

        numpy.random.seed()  # a fresh interpreter's global RNG differs per process; so must ours
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))  # as `python SCRIPT` has it
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # noqa: BLE001 (the member's own traceback, into its log)
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(codes: Path) -> bool:
    """Record the code of every member that exited; whether any is still running."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True
        code = os.waitstatus_to_exitcode(status)
        tmp = codes / f".{pid}"
        tmp.write_text(str(code))
        tmp.rename(codes / str(pid))


def serve(codes: Path) -> None:
    """Import what members need, then fork one per request until stdin closes."""
    import importlib

    from subnet.childproc import die_with_parent

    die_with_parent()
    for name in WARM:
        importlib.import_module(name)
    from subnet.storage.config import StorageConfig
    from subnet.storage.s3 import S3Store

    S3Store(StorageConfig(bucket="warm-up", endpoint_url="http://127.0.0.1:9"), None)  # botocore
    assert threading.active_count() == 1, "no threads may run at fork"
    stdin = sys.stdin.buffer
    while True:
        _reap(codes)
        if not select.select([stdin], [], [], 0.2)[0]:
            continue
        line = stdin.readline()
        if not line:
            break
        request = json.loads(line)
        pid = os.fork() if request else 0
        if request and pid == 0:
            _child(request)
        sys.stdout.write(json.dumps({"pid": pid}) + "\n")
        sys.stdout.flush()
    while _reap(codes):  # end of input: wait for the members still running, then go
        time.sleep(0.2)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
