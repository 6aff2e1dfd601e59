"""Why a local run stopped short: one line from its neurons' metrics.

``stall_reason`` reads every ``metrics.jsonl`` under the run folder and names what kept rounds
from merging: uploads that landed late, windows miners skipped as too slow, steps that ended past
their phase (a validator's scoring, the holder's merge), windows validators found empty, windows
the holder had nothing to merge in. The demo prints it when it times out.
"""

from __future__ import annotations

from pathlib import Path

from ..monitor.report.load import metrics_files, read_jsonl
from ..monitor.report.units import fmt_windows as _windows


def stall_reason(root: str | Path, rounds: int, elapsed: float) -> str:
    """``timed out after N s: 7 of 8 rounds merged; miners uploaded late in windows ...``."""
    late: set[int] = set()
    skipped: set[int] = set()
    empty: set[int] = set()
    failed: dict[str, set[int]] = {}
    overran: dict[str, set[int]] = {}
    merged = uploads = 0
    for path in metrics_files(root):
        role = path.parent.name.partition("-")[0]
        for r in read_jsonl(path):
            event, window = r.get("event"), r.get("window")
            if not isinstance(window, int):
                continue
            if event == "version" and r.get("version", 0) > 0:
                merged += 1
            elif event == "upload":
                uploads += 1
                if r.get("late"):
                    late.add(window)
            elif event == "window_skipped":
                skipped.add(window)
            elif event == "uploads" and r.get("empty"):
                empty.add(window)
            elif event == "step" and (r.get("end_offset") or 0) > r.get("last_offset", 1 << 30):
                overran.setdefault(f"{role} {r.get('action')}", set()).add(window)
            elif event == "window_failed" and r.get("reason") != "too_slow":
                failed.setdefault(f"{r.get('role', '?')} {r.get('reason')}", set()).add(window)
    parts = [f"timed out after {elapsed:.0f} s: {merged} of {rounds} rounds merged"]
    if late:
        parts.append(f"miners uploaded late in windows {_windows(late)}")
    if skipped:
        parts.append(f"miners skipped windows {_windows(skipped)} as too slow to finish in time")
    for what, windows in sorted(overran.items()):
        parts.append(f"{what} ended past its phase in windows {_windows(windows)}")
    if empty:
        parts.append(f"the holder had nothing to merge in windows {_windows(empty)}")
    for what, windows in sorted(failed.items()):
        parts.append(f"{what} in windows {_windows(windows)}")
    if len(parts) == 1:
        parts.append("no miner upload recorded" if not uploads else "no failure recorded")
    return "; ".join(parts) + f" (logs: {Path(root) / 'logs'})"
