"""No secret reaches a log line, a metrics record, an error message or a repr."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from loguru import logger

from subnet.storage.base import StorageError
from subnet.storage.commitment import ReadSettings
from subnet.storage.config import CredentialSource
from subnet.storage.credentials import Credentials, CredentialsError, load_credentials
from subnet.storage.local_server import free_port
from subnet.storage.s3 import S3Store

KEY_ID = "AKIAKNOWNKEYID123456"
SECRET = "known/Secret+Value0123456789abcdefghijkl"


def test_no_secret_in_logs_metrics_or_errors(
    moto_server, fault_proxy, config_for, tmp_path: Path
) -> None:
    log_file = tmp_path / "beam.log"
    sink = logger.add(log_file, level="TRACE")
    stdlib = logging.FileHandler(tmp_path / "stdlib.log")
    logging.getLogger().addHandler(stdlib)
    logging.getLogger().setLevel(logging.DEBUG)  # botocore's own debug output, headers included
    metrics = (tmp_path / "metrics.jsonl").open("w")
    env = {"BEAM_S3_ACCESS_KEY_ID": KEY_ID, "BEAM_S3_SECRET_ACCESS_KEY": SECRET}
    try:
        for endpoint, bucket in [
            (moto_server.endpoint_url, "secret-test"),
            (fault_proxy.endpoint_url, "secret-test"),
            (moto_server.endpoint_url, "missing-bucket"),
            (f"http://127.0.0.1:{free_port()}", "unreachable"),
        ]:
            config = config_for(endpoint, bucket, max_attempts=2)
            store = S3Store.from_config(config, env)
            logger.info("store {} config {}", store.location, config)
            fault_proxy.inject("500")
            try:
                if bucket == "secret-test":
                    store.ensure_bucket()
                store.put("k", b"v")
                store.get("k", 0)
            except StorageError as exc:
                logger.warning("storage failed: {}", exc)
                record = {"reason": exc.reason, "error": str(exc), "where": store.location}
                metrics.write(json.dumps(record) + "\n")
            metrics.write(json.dumps({"config": config.model_dump(mode="json")}) + "\n")
        logger.info("credentials {}", load_credentials(CredentialSource(), env))
        logger.info("read settings {}", ReadSettings("bucket-x", None, "auto", "", KEY_ID, SECRET))
    finally:
        metrics.close()
        logger.remove(sink)
        logging.getLogger().removeHandler(stdlib)
        stdlib.close()
        logging.getLogger().setLevel(logging.WARNING)

    files = list(tmp_path.iterdir())
    assert {f.name for f in files} == {"beam.log", "stdlib.log", "metrics.jsonl"}
    assert "missing-bucket" in log_file.read_text()  # the logs did capture the failures
    for path in files:
        assert SECRET not in path.read_text(), path.name
    for path in (log_file, tmp_path / "metrics.jsonl"):  # Beam's own output: not even the key id
        assert KEY_ID not in path.read_text(), path.name


def test_credentials_repr_is_redacted() -> None:
    creds = Credentials(KEY_ID, SECRET)
    assert SECRET not in repr(creds) and SECRET not in str(creds)
    assert KEY_ID not in repr(creds)


def test_credentials_from_files_win_over_env(tmp_path: Path) -> None:
    (tmp_path / "id").write_text(KEY_ID + "\n")
    (tmp_path / "secret").write_text(SECRET + "\n")
    source = CredentialSource(
        access_key_id_file=tmp_path / "id", secret_access_key_file=tmp_path / "secret"
    )
    env = {"BEAM_S3_ACCESS_KEY_ID": "other", "BEAM_S3_SECRET_ACCESS_KEY": "other"}
    assert load_credentials(source, env) == Credentials(KEY_ID, SECRET)


def test_missing_credentials_name_the_source_not_a_value(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="BEAM_S3_SECRET_ACCESS_KEY"):
        load_credentials(CredentialSource(), {"BEAM_S3_ACCESS_KEY_ID": KEY_ID})
    source = CredentialSource(secret_access_key_file=tmp_path / "absent")
    with pytest.raises(CredentialsError, match="absent") as caught:
        load_credentials(source, {"BEAM_S3_ACCESS_KEY_ID": KEY_ID})
    assert KEY_ID not in str(caught.value)


def test_anonymous_needs_no_credentials() -> None:
    assert load_credentials(CredentialSource(anonymous=True), {}) is None


def test_config_rejects_unknown_keys_and_embedded_credentials(config_for) -> None:
    with pytest.raises(ValueError):
        config_for("http://127.0.0.1:1", "bucket", secret_access_key=SECRET)
    with pytest.raises(ValueError):
        config_for(f"http://{KEY_ID}:{SECRET}@127.0.0.1:1", "bucket")
