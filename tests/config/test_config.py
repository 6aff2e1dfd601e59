"""Config models: strictness, precedence (flags > env > file > defaults), hash stability."""

from __future__ import annotations

import subprocess
import sys

import pytest

from subnet.cli import build_parser, iter_flags, parse_config
from subnet.config import BeamConfig, ConfigError, ProtocolConfig


def write(tmp_path, text: str):
    path = tmp_path / "beam.toml"
    path.write_text(text)
    return str(path)


def test_defaults():
    cfg = parse_config([], env={})
    assert cfg == BeamConfig()
    assert cfg.node.netuid == 3 and cfg.node.subtensor.network == "finney"


def test_unknown_key_in_file_fails_and_names_it(tmp_path):
    path = write(tmp_path, '[wallet]\nnmae = "m1"\n')
    with pytest.raises(ConfigError, match="unknown setting 'wallet.nmae'"):
        parse_config(["--config", path], env={})


def test_unknown_protocol_key_fails(tmp_path):
    path = write(tmp_path, "[protocol]\nblocks_per_windw = 5\n")
    with pytest.raises(ConfigError, match="protocol.blocks_per_windw"):
        parse_config(["--config", path], env={})


def test_precedence_flags_over_env_over_file_over_defaults(tmp_path):
    path = write(
        tmp_path,
        'netuid = 7\n[wallet]\nname = "file"\nhotkey = "file-hk"\npath = "/file"\n'
        "[protocol]\nseed = 11\n",
    )
    env = {"BEAM_WALLET_NAME": "env", "BEAM_WALLET_HOTKEY": "env-hk"}
    cfg = parse_config(["--config", path, "--wallet.name", "flag"], env=env)
    assert cfg.node.wallet.name == "flag"  # flag beats env and file
    assert cfg.node.wallet.hotkey == "env-hk"  # env beats file
    assert cfg.node.wallet.path == "/file"  # file beats default
    assert cfg.node.netuid == 7 and cfg.protocol.seed == 11
    assert cfg.node.subtensor.network == "finney"  # default


def test_boolean_env_values():
    assert parse_config([], env={"BEAM_LOGGING_DEBUG": "yes"}).node.logging.debug is True
    assert parse_config([], env={"BEAM_LOGGING_DEBUG": "0"}).node.logging.debug is False
    with pytest.raises(ConfigError, match="BEAM_LOGGING_DEBUG"):
        parse_config([], env={"BEAM_LOGGING_DEBUG": "maybe"})


@pytest.mark.parametrize(
    "network",
    ["finney", "test", "local", "ws://127.0.0.1:9944", "wss://x.io", "sim://127.0.0.1:9945"],
)
def test_network_values_accepted(network):
    assert parse_config(["--subtensor.network", network], env={}).node.subtensor.network == network


@pytest.mark.parametrize("network", ["finny", "sim://", "http://127.0.0.1:9944", "sim://h"])
def test_wrong_network_is_one_clear_error(network):
    with pytest.raises(ConfigError) as info:
        parse_config(["--subtensor.network", network], env={})
    message = str(info.value)
    assert message.startswith("--subtensor.network:") and "\n" not in message
    assert "sim://HOST:PORT" in message


def test_bad_number_names_the_flag():
    with pytest.raises(ConfigError, match="^--netuid:"):
        parse_config(["--netuid", "three"], env={})


def test_protocol_hash_is_stable_and_sensitive():
    a = ProtocolConfig()
    assert a.config_hash() == ProtocolConfig().config_hash()
    assert a.config_hash() == ProtocolConfig.model_validate(a.model_dump()).config_hash()
    assert a.config_hash() != ProtocolConfig(seed=1).config_hash()
    assert len(a.config_hash()) == 16
    # node settings are not part of the network-wide hash
    assert parse_config(["--wallet.name", "x"], env={}).protocol.config_hash() == a.config_hash()


def test_protocol_hash_is_the_same_in_another_process():
    code = "from subnet.config import ProtocolConfig; print(ProtocolConfig().config_hash())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == ProtocolConfig().config_hash()


def test_help_lists_every_flag_with_its_default():
    text = build_parser("miner", "test").format_help()
    flags = list(iter_flags())
    for flag in flags:
        assert f"--{flag.name}" in text
    assert {"netuid", "wallet.name", "wallet.hotkey", "wallet.path", "subtensor.network",
            "logging.debug", "logging.trace"} <= {f.name for f in flags}  # fmt: skip
    assert text.count("(default:") == len(flags)
    assert "--config" in text


def test_no_flag_takes_a_secret():
    """A flag may say where a secret lives (an env var name, a file), never carry the secret."""
    for flag in iter_flags():
        if any(word in flag.name for word in ("password", "secret", "access_key", "mnemonic")):
            assert flag.name.endswith(("_env", "_file")), flag.name


def test_configuration_reference_is_up_to_date():
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "scripts" / "config_reference.py"), "--check"],
        capture_output=True, text=True, cwd=root,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
