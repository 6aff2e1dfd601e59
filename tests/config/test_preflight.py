"""Preflight: local settings are checked before any network call, each with its fix."""

from __future__ import annotations

import pytest

from subnet.config import BeamConfig, ConfigError, ProtocolConfig
from subnet.preflight import bucket_hint, check_device, preflight
from subnet.storage.base import StorageError
from subnet.storage.config import StorageConfig
from subnet.storage.s3 import S3Store
from subnet.wire.schema import MAX_THREADS

HOLDER = "5EZuTYXEpRNmj2SXy84QgFQRyAgusTJaTVtVgb1ex42dqz3p"
KEYS = {"BEAM_S3_ACCESS_KEY_ID": "k", "BEAM_S3_SECRET_ACCESS_KEY": "s"}


def config(**node) -> BeamConfig:
    return BeamConfig.model_validate({"protocol": {"holder_hotkey": HOLDER},
                                      "node": {"storage": {"bucket": "beam-m1"}, **node}})  # fmt: skip


def test_good_settings_pass():
    preflight(config(), "miner", KEYS)
    check_device("cpu")


def test_room_mode_needs_no_holder_hotkey():
    cfg = BeamConfig.model_validate({"node": {"room": "s3://beam-room@http://127.0.0.1:1"}})
    preflight(cfg, "miner", {})
    with pytest.raises(ConfigError, match="not a torch device"):
        preflight(cfg.model_copy(update={"node": cfg.node.model_copy(
            update={"neuron": cfg.node.neuron.model_copy(update={"device": "x"})})}), "miner", {})  # fmt: skip


def test_ddp_and_fsdp_miners_start_with_checks_on_and_in_rooms():
    # Both replay bit for bit on 2 ranks (tests/training/test_training_distributed.py).
    for mode in ("ddp", "fsdp"):
        preflight(config(parallel={"mode": mode}), "miner", {**KEYS, "WORLD_SIZE": "2"})


def test_a_cpu_miner_on_more_than_two_ranks_is_refused_while_checks_replay_it():
    four = {**KEYS, "WORLD_SIZE": "4"}
    with pytest.raises(ConfigError, match="nproc_per_node 4: validators' checks replay a CPU"):
        preflight(config(), "miner", four)
    preflight(config(), "validator", four)
    unchecked = config().model_dump()
    unchecked["protocol"]["scoring"]["checks"] = 0
    preflight(BeamConfig.model_validate(unchecked), "miner", four)
    room = {"room": "s3://beam-room@http://127.0.0.1:1", "parallel": {"mode": "fsdp"}}
    preflight(BeamConfig.model_validate({"node": room}), "miner", {})  # rooms check nothing


def test_a_checked_miner_on_more_threads_than_a_replay_runs_on_is_refused():
    many = {"threads": MAX_THREADS + 1}
    cfg = config(neuron=many)
    with pytest.raises(ConfigError, match=f"--neuron.threads {MAX_THREADS + 1}: validators rep"):
        preflight(cfg, "miner", KEYS)
    preflight(config(neuron={"threads": MAX_THREADS}), "miner", KEYS)
    preflight(cfg, "validator", KEYS)  # a validator's own threads are its business
    unchecked = cfg.model_dump()
    unchecked["protocol"]["scoring"]["checks"] = 0
    preflight(BeamConfig.model_validate(unchecked), "miner", KEYS)
    room = {"room": "s3://beam-room@http://127.0.0.1:1", "neuron": many}
    preflight(BeamConfig.model_validate({"node": room}), "miner", {})  # rooms check nothing


def test_key_files_instead_of_variables(tmp_path):
    (tmp_path / "id").write_text("k")
    (tmp_path / "secret").write_text("s")
    cfg = config(storage={"bucket": "beam-m1", "credentials": {
        "access_key_id_file": str(tmp_path / "id"),
        "secret_access_key_file": str(tmp_path / "secret")}})  # fmt: skip
    preflight(cfg, "miner", {})


@pytest.mark.parametrize(
    "cfg, env, needle",
    [
        (config(), {}, "BEAM_S3_ACCESS_KEY_ID"),
        (config(neuron={"device": "quantum"}), KEYS, "not a torch device"),
        (BeamConfig(protocol=ProtocolConfig(holder_hotkey=HOLDER, model="gigantic")), KEYS,
         "unknown model preset"),
        (BeamConfig(protocol=ProtocolConfig(holder_hotkey="5abc")), KEYS, "not a valid ss58"),
        (BeamConfig(protocol=ProtocolConfig(holder_hotkey=HOLDER)), KEYS, "--storage.bucket"),
        (config(), {**KEYS, "BEAM_S3_READ_SECRET_ACCESS_KEY": "x"}, "or neither"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_line(cfg, env, needle):
    with pytest.raises(ConfigError) as info:
        preflight(cfg, "miner", env)
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_a_missing_bucket_says_how_to_create_it(moto_server):
    storage = StorageConfig(bucket="beam-does-not-exist", endpoint_url=moto_server.endpoint_url,
                            max_attempts=1)  # fmt: skip
    store = S3Store.from_config(storage, moto_server.environ())
    with pytest.raises(StorageError) as info:
        store.check()
    assert info.value.reason == "bucket_not_found"
    hint = bucket_hint(storage, info.value.reason)
    assert "aws s3 mb s3://beam-does-not-exist" in hint and moto_server.endpoint_url in hint
    assert "docs/storage.md" in hint
