"""The run page's bytes section: per peer per round by role, both ways, against DDP's ring.

Figures come from :mod:`.traffic`; this module only lays them out (the same table markup and
CSS classes as the rest of the page).
"""

from __future__ import annotations

from html import escape

from . import traffic
from .load import Run
from .units import DASH, fmt_bytes, fmt_int, fmt_ratio


def card(run: Run, uploads: int = 0, ddp_uploads: int = 0) -> tuple[str, str, str]:
    """``(value, unit, note)`` of the headline card: DDP's bytes over a miner's, both ways
    (unit ``less``), or a miner's bytes per round where there is no DDP figure (gossip's
    merges log none; DDP of one trainer sends nothing).

    A run whose metrics carry no meter counts (written before they existed) shows the
    upload-only ratio of ``ddp_uploads / uploads``, and says so.
    """
    saved, ring = traffic.miner_saving(run), traffic.ddp_ring_per_round(run)
    miner = next((r for r in traffic.by_role(run) if r.role == "miner"), None)
    if saved is None or ring is None or miner is None:
        if miner is not None and miner.both_per_round:  # no DDP figure: gossip, one trainer
            note = "a trainer's bytes up + down per round (no DDP figure for this run)"
            return fmt_bytes(miner.both_per_round), "", note
        if uploads and ddp_uploads:
            note = (
                f"gradient uploads only: {fmt_bytes(uploads)} vs DDP's "
                f"{fmt_bytes(ddp_uploads)} (no downloads logged)"
            )
            return fmt_ratio(ddp_uploads / uploads), "less", note
        return DASH, "", "a miner's bytes up + down per round vs a DDP worker's"
    note = (
        f"a miner's gradients up + models and data down, {fmt_bytes(miner.both_per_round)} "
        f"a round, vs a DDP worker's gradients, {fmt_bytes(2 * ring)}"
    )
    return fmt_ratio(saved), "less", note


# What each role's bytes are made of, both ways (everything goes through object storage).
COUNTS = {
    "miner": (
        "gradient uploads (and, when a check names it, its answer: drawn chunks of its error "
        "feedback with proofs)",
        "model versions, data shards",
    ),
    "validator": (
        "score reports, check notices",
        "every gradient it scores, the answers to its checks, model versions",
    ),
    "holder": (
        "model versions published, the dataset (first record)",
        "the gradients it merges, score reports",
    ),
}


def panel(run: Run) -> str:
    """A table: for each role, what its bytes are, peers, rounds counted, bytes up and down per
    peer per round; then DDP's ring all-reduce per worker per round. Empty string when no bytes
    were logged."""
    rows = traffic.by_role(run)
    if not rows:
        return ""
    head = (
        "role: up / down",
        "peers",
        "peer-rounds",
        "up / peer / round",
        "down / peer / round",
        "up + down",
        "after the first: up",
        "down",
        "total up",
        "total down",
    )
    cells = _cells(run, rows)
    th = "".join(
        f"<th>{h}</th>" if i == 0 else f'<th class="n">{h}</th>' for i, h in enumerate(head)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="w">{c}</td>' if i == 0 else f'<td class="n">{c}</td>'
            for i, c in enumerate(row)
        )
        + "</tr>"
        for row in cells
    )
    note = (
        "Everything each peer's storage client sent (up) and received (down), bodies and "
        "header lines, from its metrics; per round is the mean over its records (a miner's "
        "or validator's window, the holder's version); after the first leaves out each peer's first "
        "record (dataset shards, the first checkpoint, the holder's initial model). DDP: what each worker sends, and "
        "receives as much, all-reducing fp32 gradients every inner step over the round's "
        "contributors."
    )
    checks = traffic.verification(run)
    line = f'<p class="meta">{escape(checks[0].upper() + checks[1:])}</p>' if checks else ""
    return (
        f'<section class="panel"><h2>Bytes per peer per round</h2><table><thead><tr>{th}'
        f"</tr></thead><tbody>{body}</tbody></table>{line}"
        f'<p class="meta">{escape(note)}</p></section>'
    )


def _cells(run: Run, rows: list[traffic.RoleTraffic]) -> list[list[str]]:
    """The table's cells: one row per role, then DDP's ring all-reduce where the run logs one."""
    cells = [
        [
            _what(r.role),
            fmt_int(r.peers),
            fmt_int(r.records),
            fmt_bytes(r.up_per_round),
            fmt_bytes(r.down_per_round),
            fmt_bytes(r.both_per_round),
            fmt_bytes(r.steady_up),
            fmt_bytes(r.steady_down),
            fmt_bytes(r.up),
            fmt_bytes(r.down),
        ]
        for r in rows
    ]
    ring = traffic.ddp_ring_per_round(run)
    if ring is not None:
        cells.append(
            [
                "<b>DDP worker</b><br>up: fp32 gradients, ring all-reduce every step; "
                "down: as much",
                DASH,
                DASH,
                fmt_bytes(ring),
                fmt_bytes(ring),
                fmt_bytes(2 * ring),
                fmt_bytes(ring),
                fmt_bytes(ring),
                DASH,
                DASH,
            ]
        )
    return cells


def _what(role: str) -> str:
    up, down = COUNTS.get(role, ("", ""))
    if not up:
        return f"<b>{escape(role)}</b>"
    return f"<b>{escape(role)}</b><br>up: {escape(up)}; down: {escape(down)}"
