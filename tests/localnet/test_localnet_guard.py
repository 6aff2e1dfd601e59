"""The local stack guards its folder; the demo sizes its window and explains a stall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from subnet.localnet import StackRunning
from subnet.localnet.calibrate import eval_passes, window_blocks_for
from subnet.localnet.diagnose import stall_reason
from subnet.localnet.lock import StackLock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def other_process():
    """A live python process that is not this one (the 'running stack')."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    for _ in range(100):  # until it has exec'd (a loaded machine can take a moment)
        if not cmdline.exists() or b"time.sleep" in cmdline.read_bytes():
            break
        __import__("time").sleep(0.1)
    yield proc
    proc.kill()
    proc.wait()


def test_lock_is_exclusive_and_released(tmp_path):
    lock = StackLock(tmp_path)
    lock.acquire()
    assert json.loads((tmp_path / "localnet.lock").read_text())["pid"] == os.getpid()
    lock.update(network="sim://127.0.0.1:1")
    assert lock.read()["network"] == "sim://127.0.0.1:1"
    lock.release()
    assert not (tmp_path / "localnet.lock").exists()


def test_a_live_owner_is_named_and_a_stale_lock_is_taken_over(tmp_path, other_process):
    (tmp_path / "localnet.lock").write_text(json.dumps(
        {"pid": other_process.pid, "started": 0, "network": "sim://127.0.0.1:4242"}))  # fmt: skip
    with pytest.raises(StackRunning, match=f"pid {other_process.pid}.*sim://127.0.0.1:4242"):
        StackLock(tmp_path).acquire()
    other_process.kill()
    other_process.wait()
    lock = StackLock(tmp_path)
    lock.acquire()  # the owner is gone: stale, replaced
    assert lock.read()["pid"] == os.getpid()
    lock.release()


def test_second_localnet_refuses_and_touches_nothing(tmp_path, other_process):
    (tmp_path / "localnet.lock").write_text(json.dumps({"pid": other_process.pid, "started": 0}))
    (tmp_path / "endpoints.json").write_text('{"network": "sim://running"}')
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "localnet.py"), "--root", str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert f"pid {other_process.pid}" in errors[0] and "Traceback" not in proc.stderr
    assert (tmp_path / "endpoints.json").read_text() == '{"network": "sim://running"}'
    assert not (tmp_path / "simnet.db").exists()


def test_window_is_sized_from_the_measured_step():
    fast = window_blocks_for(0.005, 20, 0.5, miners=3, cores=2)
    assert fast.window_blocks == 20  # the floor
    assert 0 < fast.upload_deadline < fast.report_deadline < fast.window_blocks
    # The validators wait for the miners' reveals (1 s with 1.5x headroom: 3 blocks) at most,
    # inside their phase.
    assert fast.reveal_deadline == fast.upload_deadline + 3 < fast.report_deadline
    slow = window_blocks_for(0.3, 20, 0.5, miners=3, cores=2)
    # 20 steps of 0.45 s (3 miners on 2 cores) plus upload, with 1.5x headroom, in half a window
    assert slow.upload_deadline * 0.5 >= 1.5 * (20 * 0.45)
    assert slow.upload_deadline < slow.reveal_deadline < slow.report_deadline < slow.window_blocks
    # The validators evaluate 3 uploads on 64 own and 64 random samples (17 passes of 64
    # samples, ~45 steps' worth, 2 validators on 2 cores): their phase holds it with headroom.
    score_s = (slow.report_deadline - slow.reveal_deadline) * 0.5
    assert score_s >= 1.5 * (17 * 64 / 24 * 0.45)


def test_a_timed_forward_pass_sizes_the_validators_phase():
    """Known answer: 3 uploads on 64 + 64 samples are 17 passes of 64 = 136 passes of 8. A
    forward pass of 0.08 s (measured: 0.7 - 0.9 of a 0.1 s inner step here, not the third the
    step-based estimate assumes) needs 136 x 0.08 x 1.5 (2 validators on 2 cores) x 1.5."""
    assert eval_passes(3, 64, 8) == 136 and eval_passes(4, 64, 8) == (16 + 2) * 8
    by_step = window_blocks_for(0.1, 20, 0.5, miners=3, cores=2)
    timed = window_blocks_for(0.1, 20, 0.5, miners=3, cores=2, forward_s=0.08)
    assert timed.eval_s == pytest.approx(136 * 0.08) and timed.eval_s > 2 * by_step.eval_s
    score_s = (timed.report_deadline - timed.reveal_deadline) * 0.5
    assert score_s >= 1.5 * (1.0 + 136 * 0.08 * 1.5)
    assert timed.upload_deadline == by_step.upload_deadline  # the miners' phase is unchanged
    assert timed.upload_deadline < timed.report_deadline < timed.window_blocks


def test_stall_reason_names_late_skipped_and_empty_windows(tmp_path):
    def write(name, *records):
        folder = tmp_path / "state" / name
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))

    write("miner-a", {"event": "upload", "window": 3, "late": True, "role": "miner"},
          {"event": "upload", "window": 4, "late": True, "role": "miner"},
          {"event": "upload", "window": 5, "late": False, "role": "miner"},
          {"event": "window_skipped", "window": 7, "role": "miner"})  # fmt: skip
    write("holder-h", {"event": "version", "window": -1, "version": 0},
          {"event": "version", "window": 5, "version": 1},
          {"event": "uploads", "window": 3, "empty": "no positive score"},
          {"event": "uploads", "window": 4, "empty": "no positive score"})  # fmt: skip
    step = {"event": "step", "window": 6, "action": "score", "last_offset": 15, "end_offset": 15}
    write("validator-v", step, {**step, "window": 8, "end_offset": 17})
    line = stall_reason(tmp_path, rounds=8, elapsed=301.4)
    assert line.startswith("timed out after 301 s: 1 of 8 rounds merged")
    assert "miners uploaded late in windows 3-4" in line
    assert "skipped windows 7" in line and "nothing to merge in windows 3-4" in line
    assert "validator score ended past its phase in windows 8" in line  # not in 6: on time
    assert "\n" not in line
