"""``--help`` is complete and true: every flag described, effective defaults, booleans both ways."""

from __future__ import annotations

import pytest

from subnet.cli import ROLE_SETTINGS, build_parser, iter_flags, parse_config
from subnet.config import BeamConfig, ConfigError


def help_text(role: str | None = None, epilog: bool = True) -> str:
    parser = build_parser("beam", "test", role=role)
    parser.epilog = parser.epilog if epilog else None
    return parser.format_help()


def protocol_help(role: str, capsys) -> str:
    """What ``--help-protocol`` prints for ``role`` (it exits 0)."""
    with pytest.raises(SystemExit) as info:
        build_parser("beam", "test", role=role).parse_args(["--help-protocol"])
    assert info.value.code == 0
    return capsys.readouterr().out


def test_every_flag_has_a_description():
    assert [f.name for f in iter_flags() if not f.help.strip()] == []


def test_defaults_shown_are_the_effective_ones():
    shown = {f.name: f.default for f in iter_flags()}
    effective = BeamConfig()
    assert shown["protocol.outer.name"] == effective.protocol.outer.name == "sgd"
    assert shown["protocol.outer.lr"] == effective.protocol.outer.lr == 2.0
    # every default shown is what an empty command line actually yields
    tree = effective.model_dump()
    for flag in iter_flags():
        if flag.default == "required":
            continue
        node = tree
        for part in flag.path:
            node = node[part] if node is not None else None
        if node is None and flag.path[:2] == ("node", "storage"):
            continue  # no bucket configured: the storage section is absent
        assert node == flag.default, flag.name
    text = " ".join(help_text().split())
    assert "(default: sgd; one of nesterov, sgd, fedavg" in text


BOOLS = [f for f in iter_flags() if f.kind is bool and f.path[:2] != ("node", "storage")]


@pytest.mark.parametrize("flag", BOOLS, ids=lambda f: f.name)
def test_every_boolean_can_be_switched_off_and_on(flag):
    def value(cfg):
        for part in flag.path:
            cfg = getattr(cfg, part)
        return cfg

    # bf16 autocast cannot be checked across machines: it needs checks of training off
    extra = (
        ["--protocol.scoring.checks", "0"] if flag.name == "protocol.inner.bf16_autocast" else []
    )
    assert value(parse_config([*extra, f"--no-{flag.name}"], env={flag.env: "1"})) is False
    assert value(parse_config([*extra, f"--{flag.name}"], env={flag.env: "0"})) is True


def test_bf16_with_checks_on_is_a_replay_class_not_an_error():
    # bf16 is checked inside its replay class (subnet.verify.classes), so it is allowed; a
    # node may choose its own precision, and a bad choice is one config error
    cfg = parse_config(["--protocol.inner.bf16_autocast", "--neuron.precision", "fp32"], env={})
    assert cfg.protocol.inner.bf16_autocast and cfg.protocol.scoring.checks > 0
    assert cfg.node.neuron.precision == "fp32"
    with pytest.raises(ConfigError, match="precision"):
        parse_config(["--neuron.precision", "fp16"], env={})


def test_the_broadcast_codec_as_an_upload_codec_is_one_config_error():
    with pytest.raises(ConfigError, match="codes sparse broadcast deltas, not uploads"):
        parse_config(["--protocol.compression.name", "sparse-global-rice"], env={})


def test_boolean_off_with_a_bucket():
    cfg = parse_config(["--storage.bucket", "abc", "--no-storage.credentials.anonymous"], env={})
    assert cfg.node.storage.credentials.anonymous is False
    cfg = parse_config(["--storage.bucket", "abc", "--storage.credentials.anonymous"], env={})
    assert cfg.node.storage.credentials.anonymous is True


def test_help_says_where_secrets_come_from():
    text = " ".join(help_text("miner").split())
    for name in ("BT_WALLET_PASSWORD", "BT_WALLET_PASSWORD_FILE", "BEAM_S3_ACCESS_KEY_ID",
                 "BEAM_S3_SECRET_ACCESS_KEY", "BEAM_S3_READ_ACCESS_KEY_ID",
                 "--storage.credentials.access_key_id_file", "docs/storage.md"):  # fmt: skip
        assert name in text


def test_each_role_lists_the_settings_it_uses(capsys):
    # --help: the node's own settings; --help-protocol: the protocol's (the subnet's file)
    names = {f.name for f in iter_flags()}
    for role, prefixes in ROLE_SETTINGS.items():
        text = help_text(role, epilog=False)
        shared = protocol_help(role, capsys) if "protocol." in prefixes else ""
        for name in names:
            listed = f"--{name} " in text or f"--{name}\n" in text or f"--{name}," in text
            apart = any(f"--{name}{end}" in shared for end in (" ", "\n", ","))
            own = name.startswith(prefixes) and not name.startswith("protocol.")
            assert listed == own, (role, name)
            assert apart == (name.startswith("protocol.") and "protocol." in prefixes), (role, name)
        assert ("--help-protocol" in text) == ("protocol." in prefixes), role
    assert "--data.dir" in help_text("holder") and "--data.dir" not in help_text("miner")
    # a setting left out of a role's help is still accepted
    parse_config(["--data.dir", "x"], env={}, role="miner")


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        build_parser("beam", "test").parse_args(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("beam 0.")


def test_bad_flag_is_one_line_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"did you mean --subtensor.network\?"):
        parse_config(["--subtensor.netwrk", "finney"], env={})
    with pytest.raises(ConfigError, match="--neuron.dev"):
        parse_config(["--neuron.dev", "cpu"], env={})  # no abbreviations


def test_node_flags_in_order_and_the_protocol_apart_under_its_own_heading(capsys):
    text = help_text("miner", epilog=False)
    sections = ("wallet:", "subtensor:", "storage:", "neuron:", "logging:", "parallel:")
    at = {name: text.index(f"\n{name}") for name in sections}
    assert list(at) == sorted(at, key=at.get), at
    assert "--protocol." not in text and len(text.splitlines()) < 200
    shared = protocol_help("miner", capsys)
    assert "\nprotocol settings (shared by every participant" in shared
    assert "--protocol.window.blocks" in shared and "--wallet.name" not in shared
    # the --parallel.* flags docs/miner.md uses with torchrun are listed for the miner
    assert "--parallel.mode" in text and "--parallel.mode" not in help_text("validator")


ENTRY_POINTS = [
    ("miner", "neurons/miner.py"),
    ("validator", "neurons/validator.py"),
    ("model_holder", "neurons/model_holder.py"),
]


@pytest.mark.parametrize(("script", "usage"), ENTRY_POINTS)
def test_help_names_the_script_and_loads_no_torch_or_chain_sdk(script, usage):
    """What makes --help slow is importing torch and bittensor (seconds); it needs neither."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        f"import runpy, sys\nsys.argv = ['{usage}', '--help']\n"
        f"try:\n    runpy.run_path('{usage}', run_name='__main__')\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('torch', 'bittensor') if m in sys.modules))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    out = run.stdout
    assert out.startswith(f"usage: {usage} ")
    assert "LOADED []" in out
