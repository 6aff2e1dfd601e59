"""``python -m subnet.room``: the walk-through of docs/rooms.md, verb by verb, over real S3."""

from __future__ import annotations

import re

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
    assert run("create", "owner", "--room", room, "--slot", "holder", "--name", "owner") == 0
    assert f"room address: {room}" in capsys.readouterr().out
    tokens = {}
    for name, perms, slot in (("alice", "runs.observe,runs.score", "validator"),
                              ("bob", "runs.train", "miner")):  # fmt: skip
        assert (
            run(
                "invite",
                "owner",
                "--room",
                room,
                "--permissions",
                perms,
                "--slot",
                slot,
                "--expires",
                "1h",
                "--name",
                name,
            )
            == 0
        )
        tokens[name] = capsys.readouterr().out.strip()
        assert tokens[name].startswith("beam-invite:")
        assert run("join", name, "--invite", tokens[name]) == 0
        assert "redeemed invite" in capsys.readouterr().out
    assert run("join", "eve", "--invite", tokens["bob"]) == 2  # single use
    assert "error: reused" in capsys.readouterr().err
    assert run("admit", "owner", "--room", room) == 0
    out = capsys.readouterr().out
    assert f"admitted alice {hk['alice']}" in out and f"admitted bob {hk['bob']}" in out
    assert run("members", "owner", "--room", room) == 0
    out = capsys.readouterr().out
    assert f"alice  {hk['alice']}  slots=validator  permissions=runs.observe,runs.score" in out
    assert (
        run(
            "run", "owner", "--room", room, "--run", "r1", "--template", "@beam/scored-subnet@2.0.0"
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "run r1: @beam/scored-subnet@2.0.0, plan" in out and "neurons/validator.py" in out
    assert run("status", "owner", "--room", room) == 0
    out = capsys.readouterr().out
    assert "run r1" in out and "nothing written yet" in out
    assert f"  bob ({hk['bob'][:8]}…) (miner): nothing written yet" in out
    pace = ("--room", room, "--run", "r1", "--tick_seconds", "2.5")
    assert run("pace", "alice", *pace) == 2  # the owner's alone
    assert "error: not_authorized" in capsys.readouterr().err
    assert run("pace", "owner", *pace) == 0
    out = capsys.readouterr().out
    said = re.search(r"run r1: ticks last 2.5 s from tick (\d+) \(window (\d+), in ", out)
    assert said and int(said[1]) == 30 * int(said[2]) and int(said[2]) >= 2, out  # 2 ahead
    assert run("pace", "owner", *pace) == 2  # one change pending at a time
    err = capsys.readouterr().err
    assert f"error: conflict: the change at tick {said[1]} takes effect in" in err
    assert run("status", "owner", "--room", room, "--run", "r1") == 0
    assert f"tick 1 s, 2.5 s from tick {said[1]}" in capsys.readouterr().out
    assert run("revoke", "alice", "--room", room, "--member", hk["bob"]) == 2
    assert "error: not_authorized" in capsys.readouterr().err
    assert run("revoke", "owner", "--room", room, "--member", "alice",
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


def test_invites_by_slot_runs_with_params_and_status_names_missing_runs(env, capsys) -> None:
    run, room, hk = env
    room = room.replace("/lab", "/ring")
    assert run("create", "owner", "--room", room, "--slot", "collector") == 0
    # --slot alone: the permissions are what the slot needs in every builtin topology
    assert run("invite", "owner", "--room", room, "--slot", "worker", "--name", "alice") == 0
    captured = capsys.readouterr()
    assert "alice: runs.train as worker" in captured.err
    assert run("join", "alice", "--invite", captured.out.strip().splitlines()[-1]) == 0
    # a slot that needs different things in different topologies asks which one
    assert run("invite", "owner", "--room", room, "--slot", "validator") == 2
    assert "--template @beam/NAME@VERSION or --permissions" in capsys.readouterr().err
    assert (
        run(
            "invite",
            "owner",
            "--room",
            room,
            "--slot",
            "validator",
            "--template",
            "@beam/scored-subnet@2.0.0",
        )
        == 0
    )
    assert "runs.observe,runs.score as validator" in capsys.readouterr().err
    assert run("invite", "owner", "--room", room, "--slot", "wrkr") == 2
    assert "no such slot in any builtin topology" in capsys.readouterr().err
    assert run("invite", "owner", "--room", room, "--slot", "worker", "--name", "bob") == 0
    assert run("join", "bob", "--invite", capsys.readouterr().out.strip().splitlines()[-1]) == 0
    assert run("admit", "owner", "--room", room) == 0
    assert f"admitted alice {hk['alice']}" in capsys.readouterr().out
    assert (
        run(
            "run",
            "owner",
            "--room",
            room,
            "--run",
            "ring",
            "--template",
            "@beam/gossip-ring@1.0.0",
            "--param",
            "rounds=3",
            "--param",
            "bogus=1",
        )
        == 2
    )
    assert "takes no such parameter; it takes" in capsys.readouterr().err
    assert (
        run(
            "run",
            "owner",
            "--room",
            room,
            "--run",
            "ring",
            "--template",
            "@beam/gossip-ring@1.0.0",
            "--param",
            "rounds=3,workers=2",
            "--param",
            "mix=0.25",
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "@beam/gossip-ring@1.0.0" in out and "mix=0.25, rounds=3, workers=2" in out
    assert f"worker     alice ({hk['alice'][:8]}…): python neurons/miner.py" in out
    assert run("status", "owner", "--room", room, "--run", "nope") == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: not_found: room 'ring' has no run 'nope'; its runs: ring; check --room "
        "(the address `create` printed)"
    )


def test_help_says_what_each_verb_does(capsys) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for verb in (
        "create",
        "invite",
        "join",
        "admit",
        "members",
        "revoke",
        "leave",
        "run",
        "pace",
        "status",
    ):
        assert f"\n  {verb} " in out
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "start a run" in out and "--param" in out and "--protocol.window.blocks" in out
    with pytest.raises(SystemExit):
        main(["members", "--help"])
    out = capsys.readouterr().out
    assert "--room" in out and "--protocol." not in out and "--invite" not in out


def test_a_verb_loads_no_torch(env) -> None:
    """What made each verb take seconds was importing torch; ``members`` needs none."""
    import subprocess
    import sys

    run, room, _ = env
    room = room.replace("/lab", "/solo")
    assert run("create", "owner", "--room", room) == 0
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['subnet.room', 'members', '--room', {room!r}]\n"
        "try:\n    runpy.run_module('subnet.room', run_name='__main__')\nexcept SystemExit:\n"
        "    pass\nprint('LOADED', 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "room solo, manifest version 0" in out and "LOADED False" in out
