"""The run page of each topology family, run for real and measured in headless Chromium at
1280 x 800 (issue 47 item 3).

The 13 builtin topologies fall into five families by what their page must show:

- **subnet on a chain** (``@beam/scored-subnet``, ``@beam/subnet``, ``@beam/subnet-observed``
  run as the subnet): validators score miners and set weights, which the chain turns into
  incentive; the page names the roster's weights ``weight on chain`` and explains each miner's
  pay. Run: the subnet plan (holder, validator, two miners), the validator's weights recorded
  as the chain's weight setting would take them.
- **room, one model line** (``diloco``, ``static-diloco``, ``fedavg``, ``fedavg-data``,
  ``fedavg-live``, ``elastic-diloco``, ``split-authorities``): one holder merges its trainers
  every round; no validators, no chain, no weights: the earning card is the trainers merged.
  Run: ``@beam/diloco``.
- **scored room** (``scored-subnet``, ``subnet-observed``, ``subnet`` in a room): validators
  score, the holder merges by the scores, but a room has no chain: no chain column, no
  incentive. Run: ``@beam/scored-subnet``.
- **room merged only at its end** (``gossip-ring``): no holder merges during the run; the
  held-out loss is measured once, at the collector's final merge, so the loss chart is the
  trainers' loss per round. Run: ``@beam/gossip-ring``.
- **several model lines** (``two-models``: two holders; ``sweep``: a line per point and a final
  merge): each line's merges are shown apart, above the fold. Runs: ``@beam/two-models`` and
  ``@beam/sweep`` (whose points' lines merge every round and whose final line merges once, so
  its chart is the trainers' loss per round).

Each family's run folder is made here by running the topology in threads (``page_runs.py``:
the real role classes, each member's bytes counted and its metrics written as a node writes
them), rendered with ``render_page``, screenshot at 1280 x 800 and measured in the browser: a
script injected into a copy of the page writes every card's, panel's, table header cell's and
chart point's box into the DOM, which ``--dump-dom`` prints.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from chromium import HEADLESS
from page_runs import neuron_world, run_folder
from test_monitor_screenshot import ACCENT, _near, _pixels, read_png  # noqa: I001 (tests/monitor on sys.path)

import subnet.neuron.validator as validator_module
from subnet.data import random_sample_ids
from subnet.monitor.report import load_run, render_page
from subnet.scoring.assess import own_subset

neuron_data_dir = neuron_world.neuron_data_dir  # the neuron tests' tiny dataset (a fixture)
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WIDTH, FOLD = 1280, 800
CHAIN_COLUMNS = ("chain", "incentive")  # a column that only a run on a chain may have


@dataclass(frozen=True)
class Family:
    """A family of topologies, the one run to show it, and what its page must show."""

    ref: str | None  # None: the subnet (on a chain)
    room: bool
    earning: str  # the card that answers "am I earning"
    chart: str  # the loss chart's title starts so
    points: int  # its points: one per merged round of the main line, or per round trained
    # several model lines: line -> (its holder, the rounds it merged); none for one line
    lines: dict[str, tuple[str, int]] = field(default_factory=dict)


ROUNDS = 3  # every family's run: three windows
HELD_OUT, TRAIN_LOSS = "Global held-out loss", "Trainers' mean loss per round"
FAMILIES = {
    "subnet-on-a-chain": Family(None, False, "Miners earning", HELD_OUT, ROUNDS),
    "room-one-line": Family("@beam/diloco@1.0.0", True, "Trainers merged", HELD_OUT, ROUNDS),
    "scored-room": Family("@beam/scored-subnet@2.0.0", True, "Trainers merged", HELD_OUT, ROUNDS),
    "merged-at-the-end": Family(
        "@beam/gossip-ring@1.0.0", True, "Trainers merged", TRAIN_LOSS, ROUNDS
    ),
    # model A is granted its data from round 1 on (round 0 grants); model B merges every round
    "several-lines": Family(
        "@beam/two-models@1.0.0",
        True,
        "Trainers merged",
        "model_a's held-out loss",
        ROUNDS - 1,
        {"model_a": ("holder", ROUNDS - 1), "model_b": ("holder_b0", ROUNDS)},
    ),
    # a line per point every round, the final merge of the points' models at the end
    "several-lines-sweep": Family(
        "@beam/sweep@1.0.0",
        True,
        "Trainers merged",
        TRAIN_LOSS,
        ROUNDS,
        {"model": ("holder", 1), "model.p0": ("holder", ROUNDS), "model.p1": ("holder", ROUNDS)},
    ),
}

# Injected into a copy of the page (the page itself carries no script): every card, panel,
# table header cell and chart point, with its box, written into the DOM once the page loaded.
MEASURE = """<script>
window.addEventListener('load', () => {
  const box = (e) => { const b = e.getBoundingClientRect();
    return {left: b.left, right: b.right, top: b.top, bottom: b.bottom}; };
  const out = {width: window.innerWidth, height: window.innerHeight, cards: [], panels: []};
  document.querySelectorAll('.card').forEach((c) => {
    out.cards.push({label: c.querySelector('.label').textContent,
                    value: c.querySelector('.value').textContent, ...box(c),
                    overflow: c.querySelector('.value').scrollWidth - c.querySelector('.value').clientWidth});
  });
  document.querySelectorAll('section.panel').forEach((p) => {
    const h = p.querySelector('h2'); const t = p.querySelector('svg text');
    out.panels.push({name: h ? h.textContent : (t ? t.textContent : ''), ...box(p),
      scroll: p.scrollWidth, client: p.clientWidth,
      cells: [...p.querySelectorAll('th')].map((th) => ({text: th.textContent, ...box(th)})),
      points: [...p.querySelectorAll('circle.pt')].map(box),
      rows: [...p.querySelectorAll('tbody tr')].map((tr) => ({
        first: tr.cells[0].textContent, text: tr.textContent, on: tr.querySelectorAll('.strip i.on').length,
        cells: tr.querySelectorAll('.strip i').length}))});
  });
  const pre = document.createElement('pre'); pre.id = 'boxes';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


@dataclass(frozen=True)
class Page:
    """One family's rendered page: its HTML, the measured boxes and the screenshot's rows."""

    family: Family
    html: str
    boxes: dict[str, Any]
    rows: list[bytes]

    def panel(self, start: str) -> dict[str, Any]:
        """The panel whose heading (or chart title) starts with ``start``."""
        found = [p for p in self.boxes["panels"] if p["name"].startswith(start)]
        names = [p["name"] for p in self.boxes["panels"]]
        assert found, f"no panel {start!r} on the page; its panels: {names}"
        return found[0]

    def card(self, label: str) -> dict[str, Any]:
        """The card labelled ``label``."""
        found = [c for c in self.boxes["cards"] if c["label"] == label]
        labels = [c["label"] for c in self.boxes["cards"]]
        assert found, f"no {label!r} card; the cards: {labels}"
        return found[0]


def _seeded_subset(ids: list[int], n: int, rng: random.Random | None = None) -> list[int]:
    return own_subset(ids, n, random.Random(0))


def _chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            browser,
            *HEADLESS,
            f"--user-data-dir={profile}",
            f"--window-size={WIDTH},{FOLD}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.fixture(scope="module")
def browser() -> str:
    """The Chromium binary (the module skips without one)."""
    found = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if found is None:
        pytest.skip("no Chromium installed: `make browser` installs it for the screenshot tests")
    return found


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def page(
    request: pytest.FixtureRequest,
    browser: str,
    neuron_data_dir: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Page:
    """The family's run (threads), its page, the page's boxes and its 1280 x 800 screenshot."""
    family = FAMILIES[request.param]
    root = tmp_path_factory.mktemp(request.param)
    with pytest.MonkeyPatch.context() as patch:  # seeded sample draws, as test_in_memory's
        patch.setattr(validator_module, "random_sample_ids", partial(random_sample_ids, seed=0))
        patch.setattr(validator_module, "own_subset", _seeded_subset)
        run = run_folder(root / "run", neuron_data_dir, family.ref, ROUNDS)
    html = render_page(load_run(run))
    (root / "page.html").write_text(html, encoding="utf-8")
    (root / "measured.html").write_text(html.replace("</body>", MEASURE + "</body>"), "utf-8")
    png = root / "page.png"
    _chromium(browser, root / "profile", f"--screenshot={png}", (root / "page.html").as_uri())
    dom = _chromium(
        browser,
        root / "profile",
        "--virtual-time-budget=2000",
        "--dump-dom",
        (root / "measured.html").as_uri(),
    ).stdout
    found = re.search(r'<pre id="boxes">(.*?)</pre>', dom, re.S)
    assert found, "the page did not load in Chromium, or the measuring script did not run"
    boxes = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert png.exists(), "Chromium wrote no screenshot"
    width, height, rows = read_png(png)
    assert (width, height) == (WIDTH, FOLD), f"the screenshot is {width} x {height}"
    return Page(family, html, boxes, rows)


def test_the_three_answers_are_above_the_fold(page: Page) -> None:
    """Am I earning, is the model improving, what does it cost: each a card inside the first
    800 px, with a figure; the loss chart starts there too, its line drawn in the screenshot."""
    assert page.boxes["width"] == WIDTH
    answers = {
        "earning": page.card(page.family.earning),
        "improving": page.card("Final loss"),
        "cost (tokens)": page.card("Tokens merged"),
        "cost (bytes)": next(c for c in page.boxes["cards"] if c["label"].startswith("Bandwidth")),
    }
    below = {k: round(c["bottom"]) for k, c in answers.items() if c["bottom"] > FOLD}
    assert not below, f"answers below the fold at {WIDTH} x {FOLD} (their bottoms): {below}"
    spill = {c["label"]: c["overflow"] for c in page.boxes["cards"] if c["overflow"] > 0}
    assert not spill, f"card figures wider than their cards (px over): {spill}"
    empty = {
        k: c["value"] for k, c in answers.items() if re.fullmatch(r"[–\s]*|0(\.0)?×.*", c["value"])
    }
    assert not empty, f"cards above the fold that answer nothing (a dash, a 0x ratio): {empty}"
    chart = page.panel(page.family.chart)
    assert chart["top"] < FOLD - 200, f"the loss chart starts at {chart['top']:.0f} px"
    visible = [p for p in chart["points"] if p["bottom"] <= FOLD]
    assert visible, "none of the loss chart's points is above the fold"
    band = _pixels(page.rows[int(chart["top"]) : FOLD])
    line = sum(n for colour, n in band.items() if _near(colour, ACCENT))
    assert line > 300, f"the loss chart's line is not drawn above the fold ({line} px of it)"
    cards = _pixels(page.rows[: int(max(c["bottom"] for c in answers.values()))])
    dark = sum(n for colour, n in cards.items() if max(colour) < 80)
    assert dark > 2_000, f"the cards' figures are not drawn ({dark} dark px)"


def test_chain_columns_only_on_a_chain(page: Page) -> None:
    """A room has no chain: no 'weight on chain' or incentive column; the subnet has one."""
    headers = [c["text"] for p in page.boxes["panels"] for c in p["cells"]]
    chain = [h for h in headers if any(word in h.lower() for word in CHAIN_COLUMNS)]
    if page.family.room:
        assert not chain, f"chain columns on a room's page: {chain}"
        spoken = re.findall(r"weights? on (?:the )?chain[^.<]*", page.html)
        assert not spoken, f"a room's page speaks of a chain's weights: {spoken}"
    else:
        assert "weight on chain (latest)" in chain, f"no chain column on the subnet's: {headers}"
        page.panel("Why each miner earned what it did")


def test_the_loss_chart_has_a_point_per_round(page: Page) -> None:
    """One point per round: merged rounds, or (merged only at the end) rounds trained."""
    chart = page.panel(page.family.chart)
    points = page.family.points
    assert len(chart["points"]) == points, (
        f"{page.family.chart!r} has {len(chart['points'])} point(s), not one per round ({points})"
    )
    xs = sorted(p["left"] for p in chart["points"])
    assert all(b - a > 50 for a, b in zip(xs, xs[1:], strict=False)), f"points on top: {xs}"


def test_several_model_lines_show_each_lines_merges(page: Page) -> None:
    """Two-models, sweep: a row per model line, naming its holder, its rounds merged as a strip
    of cells, above the fold; a run of one line has no such panel."""
    lines = [p for p in page.boxes["panels"] if p["name"] == "Merges per model line"]
    if not page.family.lines:
        assert not lines, "a run of one model line shows a per-line panel"
        return
    assert len(lines) == 1, f"{len(lines)} 'Merges per model line' panels on a multi-model page"
    (panel,) = lines
    assert panel["bottom"] <= FOLD, f"the per-line merges end at {panel['bottom']:.0f} px"
    rows = {r["first"]: r for r in panel["rows"]}
    assert sorted(rows) == sorted(page.family.lines), f"model lines shown: {sorted(rows)}"
    assert all(r["cells"] == ROUNDS for r in rows.values()), f"not a cell per round: {rows}"
    merged = {lane: r["on"] for lane, r in rows.items()}
    expected = {lane: n for lane, (_, n) in page.family.lines.items()}
    assert merged == expected, f"rounds merged per line {merged}, the run merged {expected}"
    unnamed = [
        lane for lane, (holder, _) in page.family.lines.items() if holder not in rows[lane]["text"]
    ]
    assert not unnamed, f"lines whose holder is not named: {unnamed}"
    band = _pixels(page.rows[int(panel["top"]) : int(panel["bottom"])])
    filled = sum(n for colour, n in band.items() if _near(colour, ACCENT))
    assert filled > 4 * 200, f"the merged rounds' cells are not drawn ({filled} px)"


def test_every_tables_columns_fit_at_1280_px(page: Page) -> None:
    """No header cell off screen and no panel that scrolls sideways at 1280 px."""
    off = [
        (p["name"], c["text"])
        for p in page.boxes["panels"]
        for c in p["cells"]
        if c["right"] > WIDTH or c["left"] < 0
    ]
    assert not off, f"columns off screen at {WIDTH} px: {off}"
    wide = [p["name"] for p in page.boxes["panels"] if p["scroll"] > p["client"]]
    assert not wide, f"panels that scroll sideways at {WIDTH} px: {wide}"
