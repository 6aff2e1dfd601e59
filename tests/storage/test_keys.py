"""Key naming: one layout, invertible, numerically ordered, isolated by protocol version."""

from __future__ import annotations

import pytest

from subnet.storage.keys import (
    DEFAULT_LANES,
    PROTOCOL_VERSION,
    KeyParts,
    ObjectKind,
    kind_prefix,
    latest_key,
    object_key,
    parse_key,
    window_prefix,
)
from subnet.storage.memory import MemoryStore

ALICE = "5GrwvaEF5zXb26Fz9rcQpDWS57CtERHpNehXCPcNoHGKutQY"
BOB = "5FHneW46xGXgs5mUiveU4sbTyGBzmstUspZC92UhjJM694ty"


def test_layout() -> None:
    key = object_key("run-1", ObjectKind.GRADIENT, 42, ALICE)
    assert key == f"beam/v{PROTOCOL_VERSION}/run-1/grads/gradient/000000000042/{ALICE}"
    assert key.startswith(window_prefix("run-1", ObjectKind.GRADIENT, 42))
    assert key.startswith(kind_prefix("run-1", ObjectKind.GRADIENT))


@pytest.mark.parametrize("kind", list(ObjectKind))
def test_parse_inverts_every_kind(kind: ObjectKind) -> None:
    key = object_key("r", kind, 7, BOB, version=3)
    lane = DEFAULT_LANES[kind]
    assert parse_key(key) == KeyParts(3, "r", kind, 7, BOB, lane)
    latest = KeyParts(PROTOCOL_VERSION, "r", kind, None, BOB, lane)
    assert parse_key(latest_key("r", kind, BOB)) == latest


def test_two_lanes_of_one_kind_never_collide() -> None:
    a = object_key("r", ObjectKind.GRADIENT, 3, ALICE, lane="grads")
    b = object_key("r", ObjectKind.GRADIENT, 3, ALICE, lane="grads-b")
    assert a != b and not b.startswith(window_prefix("r", ObjectKind.GRADIENT, 3))
    assert parse_key(b).lane == "grads-b"


def test_key_order_is_window_order() -> None:
    keys = [object_key("r", ObjectKind.SCORES, w, ALICE) for w in (1, 9, 10, 100, 12345)]
    assert sorted(keys) == keys


def test_versions_never_see_each_other() -> None:
    store = MemoryStore()
    store.put(object_key("r", ObjectKind.GRADIENT, 1, ALICE, version=1), b"v1")
    store.put(object_key("r", ObjectKind.GRADIENT, 1, ALICE, version=2), b"v2")
    listed = list(store.list(window_prefix("r", ObjectKind.GRADIENT, 1, version=1)))
    assert [store.get(i.key, 10) for i in listed] == [b"v1"]


@pytest.mark.parametrize(
    "call",
    [
        lambda: object_key("Bad Run", ObjectKind.GRADIENT, 1, ALICE),
        lambda: object_key("r", ObjectKind.GRADIENT, -1, ALICE),
        lambda: object_key("r", ObjectKind.GRADIENT, 1, "../../etc"),
        lambda: object_key("r", "no-such-kind", 1, ALICE),  # type: ignore[arg-type]
        lambda: object_key("r", ObjectKind.GRADIENT, 1, ALICE, lane="Bad/Lane"),
        lambda: parse_key("beam/v1/r/grads/gradient/42/" + ALICE),
        lambda: parse_key("beam/v1/r/gradient/000000000042/" + ALICE),  # the v1 layout
        lambda: parse_key("beam/v2/r/No_Lane/gradient/000000000042/" + ALICE),
        lambda: parse_key("beam/v1/r/gradient/000000000042/" + ALICE + "/extra"),
        lambda: parse_key("other/v1/r/gradient/000000000042/" + ALICE),
    ],
)
def test_invalid_parts_are_refused(call) -> None:
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("lane", ["grads_a", "model_b", "model.p1", "model-x.p12"])
def test_plan_lanes_and_a_models_sub_stream_are_keys(lane: str) -> None:
    key = object_key("r", ObjectKind.MODEL_MANIFEST, 3, ALICE, lane=lane)
    assert parse_key(key).lane == lane


@pytest.mark.parametrize("lane", ["model..p1", "model.p1.p2", "Model_a", "_a", "model.", "a" * 49])
def test_other_lane_names_are_refused(lane: str) -> None:
    with pytest.raises(ValueError):
        object_key("r", ObjectKind.GRADIENT, 3, ALICE, lane=lane)
