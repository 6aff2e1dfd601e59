"""The run's topology on the run page: its name@version, its lanes (who writes, who reads) and
each slot's rounds (per round, which members sent, merged or failed).

Read only from what the processes left behind: each neuron's ``plan`` record (the topology, its
slot, the plan's lanes, written once when its loop starts), its ``train``, ``scores``,
``grant``, ``mix`` and ``version`` records, and its ``window_failed`` records. A run of an
older neuron without ``plan`` records has no topology section.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .load import metrics_files, read_jsonl

# Records that say a member sent something for a round (its window field), by event.
SENT_EVENTS = ("train", "scores", "grant", "consensus", "mix", "reduce")


@dataclass(frozen=True)
class LaneView:
    """One lane of the plan, with the slots and the members on each side."""

    name: str
    kind: str
    mode: str
    writers: tuple[str, ...]  # slots
    readers: tuple[str, ...]
    writer_members: tuple[str, ...]  # member names
    reader_members: tuple[str, ...]


@dataclass(frozen=True)
class SlotRound:
    """One slot in one round: its members that sent, merged (published a version, or were
    merged into one) and failed."""

    window: int
    slot: str
    sent: tuple[str, ...]
    merged: tuple[str, ...]
    failed: tuple[str, ...]


@dataclass
class TopologyView:
    """What the page shows of the run's topology."""

    ref: str
    digests: tuple[str, ...]  # the plan digests the members ran (one, unless misconfigured)
    slots: dict[str, list[str]] = field(default_factory=dict)  # slot -> member names
    lanes: list[LaneView] = field(default_factory=list)
    rounds: list[SlotRound] = field(default_factory=list)


def load_topology(path: str | Path, names: dict[str, str] | None = None) -> TopologyView | None:
    """The topology view of the run folder ``path`` (None when no neuron logged its plan).

    ``names`` maps hotkeys to display names (the run header's); others show as 8 characters.
    """
    records = [r for f in metrics_files(path) for r in read_jsonl(f)]
    plans = [r for r in records if r.get("event") == "plan" and r.get("hotkey")]
    if not plans:
        return None
    names = {**_member_names(Path(path)), **(names or {})}
    slot_of = {str(r["hotkey"]): str(r.get("slot", "?")) for r in plans}

    def name(hotkey: str) -> str:
        return names.get(hotkey) or hotkey[:8]

    slots: dict[str, list[str]] = {}
    for hotkey, slot in sorted(slot_of.items(), key=lambda kv: (kv[1], name(kv[0]))):
        slots.setdefault(slot, []).append(name(hotkey))
    lanes_doc = next((r["lanes"] for r in plans if isinstance(r.get("lanes"), dict)), {})
    lanes = [
        _lane(lane_name, doc, slots)
        for lane_name, doc in sorted(lanes_doc.items())
        if isinstance(doc, dict)
    ]
    ref = str(plans[0].get("ref") or "?")
    digests = tuple(sorted({str(r.get("digest")) for r in plans}))
    return TopologyView(ref, digests, slots, lanes, _rounds(records, slot_of, name))


def _member_names(path: Path) -> dict[str, str]:
    """hotkey -> name from a topology room's ``run.json`` (``members``: name -> [hotkey, slot])."""
    try:
        members = json.loads((path / "run.json").read_text()).get("members")
    except (OSError, ValueError, AttributeError):
        return {}
    if not isinstance(members, dict):
        return {}
    return {str(v[0]): str(k) for k, v in members.items() if isinstance(v, list) and v}


def _lane(name: str, doc: dict[str, Any], slots: dict[str, list[str]]) -> LaneView:
    writers = tuple(str(s) for s in doc.get("writers") or ())
    readers = tuple(str(s) for s in doc.get("readers") or ())
    return LaneView(
        name,
        str(doc.get("kind", "?")),
        str(doc.get("mode", "?")),
        writers,
        readers,
        tuple(m for s in writers for m in slots.get(s, [])),
        tuple(m for s in readers for m in slots.get(s, [])),
    )


def _rounds(records: list[dict[str, Any]], slot_of: dict[str, str], name) -> list[SlotRound]:
    """Per (round, slot): who sent, who merged or was merged, who failed."""
    sent: dict[tuple[int, str], set[str]] = {}
    merged: dict[tuple[int, str], set[str]] = {}
    failed: dict[tuple[int, str], set[str]] = {}

    def add(table, window: Any, hotkey: str) -> None:
        if isinstance(window, int) and window >= 0 and hotkey in slot_of:
            table.setdefault((window, slot_of[hotkey]), set()).add(hotkey)

    for r in records:
        event, hotkey, window = r.get("event"), str(r.get("hotkey", "")), r.get("window")
        if event in SENT_EVENTS:
            add(sent, window - 1 if event == "grant" else window, hotkey)  # a grant for w+1
        elif event == "version":
            add(merged, window, hotkey)  # the holder published the round's merge
            for contributor in r.get("contributors") or {}:
                add(merged, window, str(contributor))
        elif event == "window_failed":
            add(failed, window, hotkey)
    keys = sorted(set(sent) | set(merged) | set(failed))
    return [
        SlotRound(
            w,
            slot,
            *(tuple(sorted(name(h) for h in t.get((w, slot), ()))) for t in (sent, merged, failed)),
        )
        for w, slot in keys
    ]
