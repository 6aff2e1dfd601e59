"""Render the fixture run's page in headless Chromium and check the screenshot shows the figures.

The PNG is decoded with ``zlib`` and ``struct`` (no imaging library): the page must not be blank,
the chart's accent colour must be drawn in the chart's band, and dark text must be there.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

import pytest
from chromium import HEADLESS

from subnet.monitor.report import load_run, render_page

FIXTURE_RUN = Path(__file__).parent / "fixtures" / "run"
BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WIDTH, HEIGHT = 1280, 1800
ACCENT = (0x4F, 0x46, 0xE5)  # the loss line, its points and the share bars


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """``(width, height, rows)`` of an 8-bit RGB/RGBA, non-interlaced PNG; rows are RGB bytes."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
    assert header is not None and header[2] == 8 and header[3] in (2, 6) and header[6] == 0
    width, height, bpp = header[0], header[1], 3 if header[3] == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    prev, rows = bytearray(stride), []
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1 : start + 1 + stride]), prev, bpp)
        rows.append(bytes(line) if bpp == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
        prev = line
    return width, height, rows


def _unfilter(kind: int, line: bytearray, prev: bytearray, bpp: int) -> bytearray:
    """Undo one row's PNG filter (None, Sub, Up, Average, Paeth) in place."""
    if kind == 2:
        return bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if kind == 1:
            line[i] = (line[i] + a) & 255
        elif kind == 3:
            line[i] = (line[i] + ((a + b) >> 1)) & 255
        elif kind == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    return line


def _pixels(rows: list[bytes]) -> Counter[tuple[int, int, int]]:
    return Counter((row[i], row[i + 1], row[i + 2]) for row in rows for i in range(0, len(row), 3))


def _near(colour: tuple[int, int, int], target: tuple[int, int, int], tol: int = 24) -> bool:
    return all(abs(c - t) <= tol for c, t in zip(colour, target, strict=True))


def test_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if browser is None:
        pytest.skip("no Chromium installed: apt-get install chromium to run the screenshot test")
    page, png = tmp_path / "report.html", tmp_path / "report.png"
    page.write_text(render_page(load_run(FIXTURE_RUN)), encoding="utf-8")
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={png}", page.as_uri()],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert png.exists() and png.stat().st_size > 20_000, "no screenshot, or a near-empty one"
    width, height, rows = read_png(png)
    assert (width, height) == (WIDTH, HEIGHT)

    everything = _pixels(rows)
    background, count = everything.most_common(1)[0]
    assert count / (width * height) < 0.9, "the page is (almost) one colour"
    assert len(everything) > 200, "too few distinct colours for text, chart and tables"
    dark = sum(n for colour, n in everything.items() if max(colour) < 80)
    assert dark > 5_000, "no dark text: the headline figures and tables are missing"
    chart_band = _pixels(rows[250:800])  # below the cards, above the roster
    line = sum(n for colour, n in chart_band.items() if _near(colour, ACCENT))
    assert line > 1_000, "the loss chart's line and points are not drawn"


# Injected into a copy of the page (the page itself carries no script): measures every table
# header cell and every panel at the window's width and writes them into the DOM, which
# ``--dump-dom`` prints once the page has loaded.
MEASURE = """<script>
window.addEventListener('load', () => {
  const out = {width: window.innerWidth, cells: [], panels: []};
  document.querySelectorAll('section.panel').forEach((p) => {
    const h = p.querySelector('h2'); const name = h ? h.textContent : '';
    out.panels.push({name: name, scroll: p.scrollWidth, client: p.clientWidth});
    p.querySelectorAll('th').forEach((th) => {
      const b = th.getBoundingClientRect();
      out.cells.push({panel: name, text: th.textContent, left: b.left, right: b.right});
    });
  });
  const pre = document.createElement('pre'); pre.id = 'boxes';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""


def _full_run(tmp_path: Path) -> Path:
    """The fixture run with every optional column filled: bytes on every record, the chain's
    incentive for every participant, the validators' score parts."""
    import json
    import shutil

    run = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run)
    hotkeys = []
    for path in run.glob("state/*/metrics.jsonl"):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for i, r in enumerate(records):
            r.update(bytes_up=123_456_789 + i, bytes_down=987_654_321 + i)
            if r["event"] == "scores":
                r["measured"] = {
                    hk: {
                        "assigned": 0.0123,
                        "random": 0.0111,
                        "specific": 0.00234,
                        "se": 0.00045,
                        "fraction": 1.0,
                    }
                    for hk in r["verdicts"]
                }
            hotkeys.append(r["hotkey"])
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    chain = {
        hk: {"uid": i, "incentive": 0.123456, "dividends": 0.0}
        for i, hk in enumerate(sorted(set(hotkeys)))
    }
    (run / "chain.json").write_text(json.dumps(chain))
    return run


def test_at_1280_px_every_column_of_every_table_is_on_screen(tmp_path: Path) -> None:
    import json
    import re

    browser = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    if browser is None:
        pytest.skip("no Chromium installed: `make browser` installs it for the screenshot test")
    html = render_page(load_run(_full_run(tmp_path)))
    page = tmp_path / "measured.html"
    page.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [
            browser,
            *HEADLESS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={WIDTH},{HEIGHT}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout
    found = re.search(r'<pre id="boxes">(.*?)</pre>', dom, re.S)
    assert found, "the page did not load, or the measuring script did not run"
    boxes = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert boxes["width"] == WIDTH
    panels = {p["name"] for p in boxes["panels"]}
    assert {
        "Roster",
        "Recent rounds",
        "Why each miner earned what it did",
        "Bytes per peer per round",
    } <= panels, panels
    roster = [c["text"] for c in boxes["cells"] if c["panel"] == "Roster"]
    assert "incentive" in roster and "bytes up / down" in roster  # every optional column
    off = [c for c in boxes["cells"] if c["right"] > boxes["width"] or c["left"] < 0]
    assert not off, f"columns off screen at {WIDTH} px: {off}"
    wide = [p for p in boxes["panels"] if p["scroll"] > p["client"]]
    assert not wide, f"panels that scroll sideways at {WIDTH} px: {wide}"
