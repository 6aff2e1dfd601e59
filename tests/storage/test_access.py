"""Against a moto server that enforces IAM: wrong keys and read-only keys fail clearly."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from subnet.storage.base import ObjectNotFound, StorageError
from subnet.storage.commitment import ReadSettings, encode_commitment
from subnet.storage.credentials import Credentials
from subnet.storage.local_server import MotoServer
from subnet.storage.readers import build_readers
from subnet.storage.s3 import S3Store

BUCKET = "guarded"
READ_ONLY = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"}
    ],
}


@pytest.fixture(scope="module")
def guarded() -> Iterator[tuple[MotoServer, Credentials]]:
    """A moto server that checks credentials after 4 setup calls, and a read-only key pair."""
    with MotoServer(env={"INITIAL_NO_AUTH_ACTION_COUNT": "4"}) as server:
        kwargs = {
            "endpoint_url": server.endpoint_url,
            "region_name": "us-east-1",
            "aws_access_key_id": "setup",
            "aws_secret_access_key": "setup",
        }
        iam = boto3.client("iam", **kwargs)
        boto3.client("s3", **kwargs).create_bucket(Bucket=BUCKET)
        iam.create_user(UserName="reader")
        iam.put_user_policy(
            UserName="reader", PolicyName="ro", PolicyDocument=json.dumps(READ_ONLY)
        )
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        yield server, Credentials(key["AccessKeyId"], key["SecretAccessKey"])


def test_wrong_credentials_are_one_clear_error(guarded, config_for) -> None:
    server, _ = guarded
    wrong = Credentials("AKIAWRONGWRONGWRONG1", "not-the-secret")
    store = S3Store(config_for(server.endpoint_url, BUCKET), wrong)
    for call in (store.check, lambda: store.get("k", 10), lambda: store.put("k", b"v")):
        with pytest.raises(StorageError) as caught:
            call()
        assert caught.value.reason == "access_denied"
        message = str(caught.value)
        assert server.endpoint_url in message and BUCKET in message
        assert "not-the-secret" not in message


def test_read_only_key_from_a_commitment_reads_but_cannot_write(guarded) -> None:
    server, creds = guarded
    commitment = encode_commitment(
        ReadSettings(
            BUCKET,
            server.endpoint_url,
            "us-east-1",
            "",
            creds.access_key_id,
            creds.secret_access_key,
        )
    )
    reader = build_readers({"hk": commitment}, allow_private_endpoints=True).get("hk")
    assert list(reader.list()) == []
    with pytest.raises(ObjectNotFound):
        reader.get("absent", 10)
    with pytest.raises(StorageError) as caught:
        reader.put("k", b"v")
    assert caught.value.reason == "access_denied"
