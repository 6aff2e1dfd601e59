"""The run page from the fixture run: figures in the HTML, the chart's points, the CLI, --serve."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from subnet.monitor.report import load_run, make_server, render_page
from subnet.monitor.report.svg import line_chart, nice_ticks

FIXTURE_RUN = Path(__file__).parent / "fixtures" / "run"
REPO = Path(__file__).resolve().parents[2]


def test_page_shows_the_headline_figures_and_tables() -> None:
    page = render_page(load_run(FIXTURE_RUN), now=1_700_000_200)
    text = re.sub(r"<[^>]+>", " ", page)
    for figure in ("6.410", "from 10.840 at start", "960", "130,560", "6,120×", "2.45 GB"):
        assert figure in text, figure
    for cell in ("miner1", "76,800", "2,000", "46.2%", "idle", "validator2"):
        assert cell in text, cell
    # the rounds table (round 1 started 22:13:30 UTC): a DDP worker's ring up + down, 576 MB
    # for the last round's 2 contributors (the fixture logs 576 MB over both, each way)
    for cell in ("6.91 s", "0.40 s", "80.0 kB", "576 MB", "22:13:30", "a DDP worker, up + down"):
        assert cell in text, cell
    assert "7,200×" not in text  # no second ratio beside the headline's
    assert "StorageError" in text  # the failed-windows table
    assert "<script" not in page and "refresh" not in page


def test_the_page_says_who_earns_and_names_each_money_column(tmp_path: Path) -> None:
    import json
    import shutil

    run_dir = tmp_path / "run"
    shutil.copytree(FIXTURE_RUN, run_dir)
    text = re.sub(r"<[^>]+>", " ", render_page(load_run(run_dir), now=1_700_000_200))
    # no chain.json: the weights' uids name nobody, so no weights column and no earners
    assert "weight on chain" not in text and "no validator has set weights yet" in text
    assert "Merge share: the mean weight" in text  # what the share column is
    run = load_run(run_dir)
    miners = {p.name: hk for hk, p in run.participants.items() if p.role == "miner"}
    chain = {
        hk: {"uid": 3 + i, "incentive": [0.5, 0.5, 0.0][i], "dividends": 0.0}
        for i, hk in enumerate(miners[n] for n in ("miner1", "miner2", "miner3"))
    }
    (run_dir / "chain.json").write_text(json.dumps(chain))
    text = re.sub(r"<[^>]+>", " ", render_page(load_run(run_dir), now=1_700_000_200))
    assert "Miners earning" in text and "2 of 3" in text and "weight on chain (latest)" in text
    room = load_run(run_dir)
    room.network = "room http://127.0.0.1:8340/beam-room/r"
    text = re.sub(r"<[^>]+>", " ", render_page(room, now=1_700_000_200))
    assert "weight on chain" not in text and "validators' weight (latest)" in text


def test_page_is_self_contained() -> None:
    page = render_page(load_run(FIXTURE_RUN))
    # nothing the browser would fetch (the network string "sim://..." is plain text)
    assert not re.search(r"(?i)(https?:|\b(href|src|action|xmlns)=|@import|url\()", page)


def test_chart_has_one_point_per_round() -> None:
    page = render_page(load_run(FIXTURE_RUN))
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count('<circle class="pt"') == 4
    assert "Global held-out loss per outer round" in svg and "initial 10.84" in svg
    assert line_chart([], title="t", x_label="x", y_label="y").count("<circle") == 0
    many = line_chart(
        [(float(i), 1 / i) for i in range(1, 201)], title="t", x_label="x", y_label="y"
    )
    assert many.count('<circle class="pt"') == 200


def test_ticks_cover_the_data() -> None:
    assert nice_ticks(6.41, 10.84) == [6, 8, 10, 12]
    assert nice_ticks(1, 4, count=4) == [1, 2, 3, 4]
    ticks = nice_ticks(5.0, 5.0)
    assert ticks[0] < 5.0 < ticks[-1]


def test_page_escapes_names(run_dir: Path) -> None:
    header = (run_dir / "run.json").read_text().replace("beam-demo-fixture", "<b>x</b>")
    (run_dir / "run.json").write_text(header)
    page = render_page(load_run(run_dir))
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_empty_run_renders_dashes(tmp_path: Path) -> None:
    page = render_page(load_run(tmp_path))
    assert "No rounds yet" in page and "No merged rounds yet" in page and "–" in page


def test_script_writes_the_page_and_prints_its_path(run_dir: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "report.py"), str(run_dir)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    out = run_dir / "report.html"
    assert done.stdout.strip() == str(out)
    assert "130,560" in out.read_text()


def test_serve_rerenders_on_each_request(run_dir: Path) -> None:
    server = make_server(run_dir, port=0, refresh=7)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert response.headers["Content-Type"].startswith("text/html")
            page = response.read().decode()
        assert "130,560" in page and '<meta http-equiv="refresh" content="7">' in page
        holder = next(run_dir.glob("state/holder-*/metrics.jsonl"))
        with holder.open("a") as f:
            f.write('{"t": 1700000170, "event": "version", "window": 4, "version": 5, '
                    '"heldout_loss": 6.02, "contributors": {}}\n')  # fmt: skip
        with urllib.request.urlopen(server.url, timeout=10) as response:
            assert "6.020" in response.read().decode()  # the new round, without a restart
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(server.url + "secrets", timeout=10)
        assert error.value.code == 404
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_serve_refuses_non_loopback(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="loopback"):
        make_server(tmp_path, host="0.0.0.0")


def test_a_run_merged_only_at_the_end_charts_its_train_loss_per_round() -> None:
    # gossip: the held-out loss is measured once, at the final merge; the trainers' loss is
    # what moves every round, so the chart shows that (one point per window), named as such
    run = load_run(FIXTURE_RUN)
    run.versions = [v for v in run.versions if v.version <= 1]
    page = render_page(run)
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert "Trainers&#x27; mean loss per round" in svg
    windows = {t.window for t in run.trains if t.loss is not None}
    assert len(windows) >= 2 and svg.count('<circle class="pt"') == len(windows)
