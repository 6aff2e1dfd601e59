"""The run page: one self-contained HTML document (inline CSS and SVG, no script, no URLs)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from html import escape

from . import bytes_panel, lines_panel, pay_panel, summary
from .load import Run
from .svg import line_chart
from .topology import load_topology
from .units import (
    DASH,
    fmt_bytes,
    fmt_clock,
    fmt_datetime,
    fmt_int,
    fmt_loss,
    fmt_seconds,
    fmt_share,
    fmt_windows,
)

CSS = """
:root { --ink: #111827; --muted: #6b7280; --line: #e5e7eb; --bg: #f6f7fb; --card: #fff;
  --accent: #4f46e5; --good: #047857; --good-bg: #d1fae5; --idle-bg: #f3f4f6; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink); line-height: 1.45;
  font: 15px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue",
  "Noto Sans", "DejaVu Sans", Arial, sans-serif; }
main { max-width: 1440px; margin: 0 auto; padding: 24px 20px 48px; }
header { display: flex; align-items: baseline; justify-content: space-between; gap: 16px;
  flex-wrap: wrap; margin-bottom: 20px; }
h1 { font-size: 26px; margin: 0; letter-spacing: -0.01em; }
h2 { font-size: 16px; margin: 0 0 12px; }
.meta { color: var(--muted); font-size: 13px; }
.meta code { font-size: 12px; background: var(--idle-bg); padding: 1px 5px; border-radius: 4px; }
.live { color: var(--good); font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(158px, 1fr)); gap: 12px;
  margin-bottom: 18px; }
.card, .panel { background: var(--card); border: 1px solid var(--line); border-radius: 12px;
  box-shadow: 0 1px 2px rgba(16, 24, 40, 0.04); }
.card { padding: 14px 14px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: 0.05em; }
.card .value { font-size: 28px; font-weight: 650; margin-top: 4px; letter-spacing: -0.02em;
  font-variant-numeric: tabular-nums; white-space: nowrap; }
.card .value small { font-size: 14px; font-weight: 500; color: var(--muted); margin-left: 4px; }
.card .note { color: var(--muted); font-size: 12px; margin-top: 2px; }
.panel { padding: 18px 20px; margin-bottom: 18px; overflow-x: auto; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 6px 8px; border-bottom: 1px solid var(--line); white-space: nowrap;
  font-size: 14px; vertical-align: top; }
th { color: var(--muted); font-size: 11px; font-weight: 600; text-transform: uppercase;
  letter-spacing: 0.03em; text-align: left; white-space: normal; }
td.w { white-space: normal; min-width: 9em; }
td.n, th.n { text-align: right; }
tr:last-child td { border-bottom: none; }
.who { font-weight: 600; }
.hk { color: var(--muted); font-size: 12px; font-family: ui-monospace, Menlo, Consolas, monospace; }
.role { color: var(--muted); }
.pill { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px;
  font-weight: 600; }
.pill.active { color: var(--good); background: var(--good-bg); }
.pill.idle { color: var(--muted); background: var(--idle-bg); }
.pill.warn { color: #92400e; background: #fef3c7; }
.alert { background: #fffbeb; border: 1px solid #fcd34d; color: #78350f; border-radius: 12px;
  padding: 12px 16px; margin-bottom: 18px; }
.bar { display: inline-block; width: 64px; height: 6px; background: var(--idle-bg);
  border-radius: 3px; margin-left: 8px; vertical-align: middle; overflow: hidden; }
.bar i { display: block; height: 100%; background: var(--accent); }
.empty { color: var(--muted); }
.strip i { display: inline-block; width: 18px; height: 14px; margin-right: 3px;
  border-radius: 3px; vertical-align: middle; }
.strip i.on { background: var(--accent); }
.strip i.off { background: var(--idle-bg); border: 1px solid var(--line); }
footer { color: var(--muted); font-size: 12px; text-align: center; margin-top: 8px; }
"""


# Each table's columns: (label, numeric: right-aligned)
ROSTER_COLUMNS = (
    ("participant", False),
    ("status", False),
    ("rounds", True),
    ("tokens merged / trained", True),
    ("tokens/s", True),
    ("merge share (mean of rounds)", True),
    ("train loss", True),
    ("verdicts", False),
)
# What each money column is: a merge share does not pay, the validators' weights do.
SHARE_NOTE = (
    "Merge share: the mean weight a miner's uploads had in the holder's merges over all rounds "
    "(it moves the model, it pays nothing)."
)
ROSTER_NOTE = SHARE_NOTE + (
    " Weight: the mean of the validators' latest weights, "
    "set from each miner's moving score; on a chain it sets the incentive (emission). The two "
    "differ where a miner's score changed lately or some of its rounds were merged on another "
    "validator's report."
)
ROUND_COLUMNS = (
    ("round", True),
    ("started (UTC)", False),
    ("nodes", True),
    ("compute", True),
    ("sync", True),
    ("gradients merged (all uploads)", True),
    ("a DDP worker, up + down", True),
    ("loss", True),
)
LANE_COLUMNS = (
    ("lane", False),
    ("kind", False),
    ("mode", False),
    ("writers", False),
    ("readers", False),
)
SLOT_ROUND_COLUMNS = (
    ("round", True),
    ("slot", False),
    ("sent", False),
    ("merged", False),
    ("failed", False),
)
FAILURE_COLUMNS = (
    ("time (UTC)", False),
    ("window", True),
    ("participant", False),
    ("role", False),
    ("reason", False),
)


def render_page(
    run: Run, *, refresh: int | None = None, recent: int = 20, now: float | None = None
) -> str:
    """The whole page; ``refresh`` (seconds) adds an auto-refresh meta tag for live serving."""
    now = time.time() if now is None else now
    head = summary.headline(run)
    people = summary.roster(run)
    weighed = any(r.weight is not None for r in people)
    refresh_tag = f'<meta http-equiv="refresh" content="{int(refresh)}">' if refresh else ""
    sections = [
        _header(run, now, live=bool(refresh)),
        _stall(head),
        _cards(head, run, people),
        lines_panel.panel(run),
        _chart(run, head),
        _roster(
            people,
            traffic=bool(run.traffic),
            incentive=bool(run.chain),
            weights=_weights_label(run) if weighed else None,
        ),
        pay_panel.panel(run, room=_room(run)),
        bytes_panel.panel(run),
        _rounds(summary.round_rows(run, last=recent), total=head.rounds),
        topology_section(run, recent),
        _failures(run),
        "<footer>Rendered by scripts/report.py from the run's metrics files; "
        "self-contained, no network needed.</footer>",
    ]
    body = "".join(sections)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{refresh_tag}<title>{escape(run.name)} · Beam run</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main></body></html>\n"
    )


def _weights_label(run: Run) -> str | None:
    """The weights column's label: on a chain, or a room's (no chain); None when none were set."""
    if not run.weights:
        return None
    room = (run.network or "").startswith("room ")
    return "validators' weight (latest)" if room else "weight on chain (latest)"


def _header(run: Run, now: float, live: bool) -> str:
    bits = [
        f"network <code>{escape(run.network)}</code>" if run.network else "",
        f"netuid {run.netuid}" if run.netuid is not None else "",
        f"config <code>{escape(run.config_hash[:12])}</code>" if run.config_hash else "",
        f"{fmt_int(run.n_params)} parameters" if run.n_params else "",
        f"started {fmt_datetime(run.started)}" if run.started else "",
    ]
    updated = f"updated {fmt_clock(now)} UTC"
    status = f'<span class="live">● live</span> · {updated}' if live else updated
    meta = " · ".join(b for b in bits if b)
    return (
        f'<header><div><h1>{escape(run.name)}</h1><div class="meta">{meta}</div></div>'
        f'<div class="meta">{status}</div></header>'
    )


def _card(label: str, value: str, note: str = "", unit: str = "") -> str:
    unit_html = f"<small>{escape(unit)}</small>" if unit and value != DASH else ""
    return (
        f'<div class="card"><div class="label">{escape(label)}</div>'
        f'<div class="value">{escape(value)}{unit_html}</div>'
        f'<div class="note">{escape(note) or "&nbsp;"}</div></div>'
    )


def _cards(h: summary.Headline, run: Run, people: list[summary.RosterRow]) -> str:
    by_role = sorted(h.nodes_by_role.items(), key=lambda kv: summary.ROLE_ORDER.get(kv[0], 3))
    roles = ", ".join(f"{n} {role}{'s' if n != 1 else ''}" for role, n in by_role)
    start = f"from {fmt_loss(h.initial_loss)} at start" if h.initial_loss is not None else ""
    plural = "s" if h.failed_windows != 1 else ""
    versions = "merged versions"
    if h.rounds_trained > h.rounds:  # gossip: every round trains, one merge at the end
        versions += f", of {fmt_int(h.rounds_trained)} rounds trained"
    main = next(iter(run.lines), None) if len(run.lines) > 1 else None
    if main is not None:  # several model lines: the cards are the main line's
        versions = f"{main}'s merged versions; each line below"
        start = f"{main}, {start}"
    failed = f"{h.failed_windows} failed window{plural}" if h.failed_windows else versions
    saved, unit, saved_note = bytes_panel.card(run, h.bytes, h.ddp_bytes)  # both ways
    per_second = "merged tokens per wall-clock second"
    cards = [
        _card("Final loss", fmt_loss(h.final_loss), start),
        _card("Outer rounds", fmt_int(h.rounds), failed),
        _card("Nodes", fmt_int(h.nodes) if h.nodes else DASH, roles),
        _card("Avg throughput", fmt_int(h.throughput), per_second, unit="tok/s"),
        _card("Tokens merged", fmt_int(h.tokens) if h.rounds else DASH, _tokens_note(h)),
        _earning(people, bool(run.chain)) if _paid(run, people) else _merged_card(run),
        _card(
            "Bandwidth vs DDP" if unit == "less" else "Bandwidth per round",
            saved,
            saved_note,
            unit=unit,
        ),
    ]
    return f'<section class="cards">{"".join(cards)}</section>'


def _room(run: Run) -> bool:
    """A room run (its run.json names the room): no chain, nobody is paid."""
    return (run.network or "").startswith("room ")


def _paid(run: Run, rows: list[summary.RosterRow]) -> bool:
    """Whether "am I earning" has an answer: on a chain, or where validators set weights."""
    return not _room(run) or any(r.weight is not None for r in rows)


def _merged_card(run: Run) -> str:
    """A room's "is my work counted": the trainers merged in the newest round."""
    counted = summary.trainers_merged(run)
    if counted is None:
        return _card("Trainers merged", DASH, "no round merged yet; a room pays no one")
    merged, trainers = counted
    note = "in the newest merged round; a room has no chain and pays no one"
    return _card("Trainers merged", f"{merged} of {trainers}", note)


def _earning(rows: list[summary.RosterRow], on_chain: bool) -> str:
    """ "Am I earning": the miners with incentive (on a chain) or validators' weight, of all."""
    miners = [r for r in rows if r.role == "miner"]
    paid = {r.name: (r.incentive if on_chain else r.weight) or 0.0 for r in miners}
    if not miners or not any(r.weight is not None or r.incentive is not None for r in miners):
        return _card("Miners earning", DASH, "no validator has set weights yet")
    earning = [name for name, v in paid.items() if v > 0]
    top = max(paid, key=paid.get)
    what = "incentive" if on_chain else "validators' weight"
    note = f"with {what} > 0; largest {fmt_share(paid[top])} ({top}); roster below"
    return _card("Miners earning", f"{len(earning)} of {len(miners)}", note)


def _tokens_note(h: summary.Headline) -> str:
    if not h.tokens_trained:
        return "merged into the model"
    unmerged = max(0, h.tokens_trained - h.tokens)
    return f"of {fmt_int(h.tokens_trained)} trained ({fmt_int(unmerged)} not merged)"


def _stall(h: summary.Headline) -> str:
    """A banner when rounds stopped coming: how long, and what the windows since looked like."""
    n = h.windows_without_round
    if h.latest_window is None or n < summary.RECENT_WINDOWS:
        return ""
    last = "no round merged yet"
    if h.last_round_window is not None:
        last = f"last round merged window {h.last_round_window}"
    bits = [f"<b>No new round for {n} windows</b> ({last}; newest window {h.latest_window})."]
    if h.empty_windows:
        bits.append(f"Empty windows (nothing to merge): {escape(fmt_windows(h.empty_windows))}.")
    if h.late_uploads:
        bits.append(f"{h.late_uploads} miner upload(s) landed after the upload deadline.")
    return f'<div class="alert">{" ".join(bits)}</div>'


def _chart(run: Run, h: summary.Headline) -> str:
    points = [(float(r), loss) for r, loss in summary.loss_curve(run)]
    reference = ("initial", h.initial_loss) if h.initial_loss is not None else None
    trained = summary.train_loss_curve(run)
    if len(points) < 2 and len(trained) >= 2:  # held-out only at the end (gossip): train loss
        svg = line_chart(
            [(float(w), loss) for w, loss in trained],
            title="Trainers' mean loss per round (held-out loss is measured only when merged)",
            x_label="round (window)",
            y_label="train loss",
        )
        return f'<section class="panel">{svg}</section>'
    main = f"{next(iter(run.lines))}'s" if len(run.lines) > 1 else "Global"
    svg = line_chart(
        points,
        title=f"{main} held-out loss per outer round",
        x_label="round",
        y_label="held-out loss",
        reference=reference,
    )
    return f'<section class="panel">{svg}</section>'


def _table(
    headers: Sequence[tuple[str, bool]],
    rows: list[list[str]],
    empty: str,
    wrap: set[int] = frozenset(),
) -> str:
    """``headers`` are ``(label, numeric)``; cells are already-escaped HTML; the columns in
    ``wrap`` may break lines (long names, verdict lists), the rest stay on one."""
    if not rows:
        return f'<p class="empty">{escape(empty)}</p>'
    head = "".join(f'<th class="n">{h}</th>' if n else f"<th>{h}</th>" for h, n in headers)

    def cls(i: int, numeric: bool) -> str:
        names = ["n"] * numeric + ["w"] * (i in wrap)
        return f' class="{" ".join(names)}"' if names else ""

    body = "".join(
        "<tr>"
        + "".join(
            f"<td{cls(i, n)}>{c}</td>"
            for i, (c, (_, n)) in enumerate(zip(row, headers, strict=True))
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _verdict_cell(r: summary.RosterRow) -> str:
    if not r.verdicts:
        return DASH
    order = ("scored", "unverified", "late", "missing", "stale", "rejected", "copied")
    rank = {verdict: i for i, verdict in enumerate(order)}  # others after these, by name
    counts = sorted(r.verdicts.items(), key=lambda kv: (rank.get(kv[0], len(order)), kv[0]))
    text = " · ".join(f"{escape(k)} {v}" for k, v in counts)
    last = f'<br><span class="hk">last: {escape(r.last_verdict)}</span>' if r.last_verdict else ""
    return text + last


def _roster(
    rows: list[summary.RosterRow],
    traffic: bool = False,
    incentive: bool = False,
    weights: str | None = "weight on chain (latest)",
) -> str:
    """The roster table; ``incentive`` and ``traffic`` add those columns, ``weights`` (its
    label; None: no validator set any) the validators' weights."""
    headers = [*ROSTER_COLUMNS]
    if weights:
        headers.append((weights, True))
    if incentive:
        headers.append(("incentive", True))
    if traffic:
        headers.append(("bytes up / down", True))
    cells = []
    for r in rows:
        share = fmt_share(r.share)
        if r.share is not None:
            width = max(0.0, min(r.share, 1.0)) * 100
            share += f'<span class="bar"><i style="width:{width:.0f}%"></i></span>'
        pill = {"active": "active", "idle": "idle"}.get(r.status, "warn")
        tokens = DASH if r.tokens is None else f"{fmt_int(r.tokens_merged)} / {fmt_int(r.tokens)}"
        row = [
            f'<span class="who">{escape(r.name)}</span> <span class="hk">{escape(r.hotkey[:8])}'
            f'</span><br><span class="role">{escape(r.role)}</span>',
            f'<span class="pill {pill}">{escape(r.status)}</span>',
            fmt_int(r.rounds),
            tokens,
            fmt_int(r.tokens_per_s),
            share,
            fmt_loss(r.loss),
            _verdict_cell(r),
            *([fmt_share(r.weight)] if weights else []),
        ]
        if incentive:
            row.append(fmt_share(r.incentive))
        if traffic:
            up, down = r.traffic or (None, None)
            row.append(f"{fmt_bytes(up)}<br>{fmt_bytes(down)}")
        cells.append(row)
    table = _table(headers, cells, "No participants known yet.", wrap={0, 7})
    note = f'<p class="meta">{escape(ROSTER_NOTE if weights else SHARE_NOTE)}</p>'
    return f'<section class="panel"><h2>Roster</h2>{table}{note}</section>'


def _rounds(rows: list[summary.RoundRow], total: int) -> str:
    cells = [
        [
            fmt_int(r.round),
            fmt_clock(r.started),
            fmt_int(r.nodes),
            fmt_seconds(r.compute_s),
            fmt_seconds(r.sync_s),
            fmt_bytes(r.bytes),
            fmt_bytes(r.ddp_worker),
            fmt_loss(r.loss),
        ]
        for r in rows
    ]
    title = (
        "Recent rounds" if total <= len(rows) else f"Recent rounds (last {len(rows)} of {total})"
    )
    table = _table(ROUND_COLUMNS, cells, "No merged rounds yet.")
    return f'<section class="panel"><h2>{escape(title)}</h2>{table}</section>'


def topology_section(run: Run, recent: int = 20) -> str:
    """The topology panel: name@version, the lanes (who writes, who reads) and the last
    ``recent`` rounds of each slot (who sent, merged, failed); empty without ``plan`` records."""
    view = load_topology(run.path, {hk: p.name for hk, p in run.participants.items()})
    if view is None:
        return ""

    def names(members: tuple[str, ...] | list[str]) -> str:
        return escape(", ".join(members)) if members else DASH

    lanes = [
        [
            f"<code>{escape(lane.name)}</code>",
            escape(lane.kind),
            escape(lane.mode),
            f"{escape(', '.join(lane.writers))}: {names(lane.writer_members)}",
            f"{escape(', '.join(lane.readers))}: {names(lane.reader_members)}",
        ]
        for lane in view.lanes
    ]
    windows = sorted({r.window for r in view.rounds})[-recent:]
    rounds = [
        [str(r.window), escape(r.slot), names(r.sent), names(r.merged), names(r.failed)]
        for r in view.rounds
        if r.window in windows
    ]
    slots = "; ".join(f"{escape(slot)}: {names(members)}" for slot, members in view.slots.items())
    digest = ", ".join(view.digests)
    return (
        f'<section class="panel"><h2>Topology <code>{escape(view.ref)}</code></h2>'
        f'<p class="meta">plan {escape(digest)} · {slots}</p>'
        + _table(LANE_COLUMNS, lanes, "no lanes")
        + "<h2>Rounds by slot</h2>"
        + _table(SLOT_ROUND_COLUMNS, rounds, "no rounds yet")
        + "</section>"
    )


def _failures(run: Run) -> str:
    if not run.failures:
        return ""
    names = {hk: p.name for hk, p in run.participants.items()}
    cells = [
        [
            fmt_clock(f.t),
            fmt_int(f.window),
            escape(names.get(f.hotkey, f.hotkey[:8])),
            escape(f.role),
            f"<code>{escape(f.reason)}</code>",
        ]
        for f in run.failures[-20:][::-1]
    ]
    table = _table(FAILURE_COLUMNS, cells, "")
    return f'<section class="panel"><h2>Failed windows</h2>{table}</section>'
