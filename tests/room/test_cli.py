"""``python -m subnet.room``: the walk-through of docs/rooms.md, verb by verb, over real S3."""

from __future__ import annotations

import pytest

from subnet.localnet.wallets import dev_wallet
from subnet.room.cli import main
from subnet.storage.config import StorageConfig
from subnet.storage.s3 import S3Store

NAMES = ("owner", "alice", "bob", "eve")


@pytest.fixture
def env(moto_server, tmp_path, monkeypatch):
    """Dev wallets and a bucket each; returns a runner of CLI verbs as wallet ``name``."""
    for key, value in moto_server.environ().items():
        monkeypatch.setenv(key, value)
    hotkeys = {n: dev_wallet(tmp_path / "wallets", n).hotkey.ss58_address for n in NAMES}
    url = moto_server.endpoint_url
    for n in NAMES:
        S3Store.from_config(StorageConfig(bucket=f"cli-{n}", endpoint_url=url,
                                          addressing_style="path")).ensure_bucket()  # fmt: skip
    room = f"{url}/cli-owner/lab"

    def run(verb: str, name: str, *flags: str) -> int:
        return main([verb, "--wallet.name", name, "--wallet.path", str(tmp_path / "wallets"),
                     "--storage.bucket", f"cli-{name}", "--storage.endpoint_url", url,
                     "--storage.addressing_style", "path", *flags])  # fmt: skip

    return run, room, hotkeys


def test_walk_through(env, capsys) -> None:
    run, room, hk = env
    assert run("create", "owner", "--room", room, "--slots", "holder") == 0
    assert f"room address: {room}" in capsys.readouterr().out
    tokens = {}
    for name, perms, slot in (("alice", "runs.observe,runs.score", "validator"),
                              ("bob", "runs.train", "miner")):  # fmt: skip
        assert run("invite", "owner", "--room", room, "--permissions", perms, "--slots", slot,
                   "--expires", "1h") == 0  # fmt: skip
        tokens[name] = capsys.readouterr().out.strip()
        assert tokens[name].startswith("beam-invite:")
        assert run("join", name, "--invite", tokens[name]) == 0
        assert "redeemed invite" in capsys.readouterr().out
    assert run("join", "eve", "--invite", tokens["bob"]) == 2  # single use
    assert "error: reused" in capsys.readouterr().err
    assert run("admit", "owner", "--room", room) == 0
    out = capsys.readouterr().out
    assert f"admitted {hk['alice']}" in out and f"admitted {hk['bob']}" in out
    assert run("members", "owner", "--room", room) == 0
    assert "slots=validator  permissions=runs.observe,runs.score" in capsys.readouterr().out
    assert run("run", "owner", "--room", room, "--run", "r1", "--template",
               "@beam/scored-subnet@2.0.0") == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "run r1: @beam/scored-subnet@2.0.0, plan" in out and "neurons/validator.py" in out
    assert run("status", "owner", "--room", room) == 0
    out = capsys.readouterr().out
    assert "run r1" in out and "nothing written yet" in out
    assert run("revoke", "alice", "--room", room, "--member", hk["bob"]) == 2
    assert "error: not_authorized" in capsys.readouterr().err
    assert run("revoke", "owner", "--room", room, "--member", hk["alice"],
               "--permissions", "runs.score") == 0  # fmt: skip
    assert run("leave", "bob", "--room", room) == 0
    capsys.readouterr()
    assert run("members", "owner", "--room", room) == 0
    out = capsys.readouterr().out
    assert "permissions=runs.observe  since=v1" in out and "(left)" in out


@pytest.mark.parametrize(
    "verb,flags,expect",
    [("create", ["--room", "ftp://x/y"], "is not a room address"),
     ("invite", ["--room", "http://127.0.0.1:1/b-x/lab", "--permissions", "runs.train"], "error:"),
     ("run", ["--room", "http://127.0.0.1:1/cli-owner/lab"], "--run is required"),
     ("join", ["--invite", "hello"], "error: malformed"),
     ("invite", ["--room", "http://127.0.0.1:1/cli-owner/lab", "--expires", "soon"], "error:")],
)  # fmt: skip
def test_errors_are_one_line(env, capsys, verb, flags, expect) -> None:
    run, _, _ = env
    assert run(verb, "owner", *flags) == 2
    err = capsys.readouterr().err.strip()
    assert expect in err and len(err.splitlines()) == 1 and err.startswith("error:"), err
