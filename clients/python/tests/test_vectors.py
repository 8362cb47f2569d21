"""The shared protocol vectors (schemas/vectors/protocol_vectors.json), seen from the client:
replies and events decode to the documented maps and are handled as the protocol says; the
client's own request maps and id check agree with what the server's decoder accepts."""
import json
import pathlib

import msgpack
import pytest

from conveyor_client import ConveyorError, JobSequencer, build_submit, topic_for, valid_id
from conveyor_client.protocol import (ERROR_CODES, SUBMIT_DEFAULTS, check_reply, raise_for_event,
                                      unpack)

VECTORS = pathlib.Path(__file__).resolve().parents[3] / "schemas" / "vectors" / "protocol_vectors.json"
DOC = json.loads(VECTORS.read_text(encoding="utf-8"))


def by_section(section):
    return [pytest.param(v, id=v["name"]) for v in DOC[section]]


def decodable(v):
    try:
        return unpack(bytes.fromhex(v["hex"]))
    except Exception:
        return None


def test_vector_file_is_protocol_1_and_complete():
    assert DOC["protocol"] == 1
    assert len(DOC["requests"]) > 80 and len(DOC["replies"]) >= 10 and len(DOC["events"]) >= 5
    codes = {v["expect"] for v in DOC["requests"]}
    assert codes <= {"ok"} | set(ERROR_CODES)


@pytest.mark.parametrize("v", by_section("replies"))
def test_reply_decodes_and_is_handled(v):
    reply = unpack(bytes.fromhex(v["hex"]))
    assert reply == v["value"]
    if reply["ok"]:
        assert check_reply(reply) is reply
    else:
        with pytest.raises(ConveyorError) as err:
            check_reply(reply)
        assert err.value.code == reply["error"]["code"] in ERROR_CODES
        assert err.value.message == reply["error"]["message"]
        assert err.value.field == reply["error"].get("field")
        assert err.value.id == reply.get("id")


def as_json(v):
    if isinstance(v, bytes):
        return list(v)
    if isinstance(v, dict):
        return {k: as_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_json(x) for x in v]
    return v


@pytest.mark.parametrize("v", by_section("events"))
def test_event_decodes_with_its_topic(v):
    event = unpack(bytes.fromhex(v["hex"]))
    assert as_json(event) == v["value"]  # (bin values, token bytes, are lists of byte values there)
    if event["kind"] == "heartbeat":
        assert v["topic"] == "sys/"
        assert event["protocol"] == 1
        return
    assert v["topic"] == topic_for(event["id"])
    seq = JobSequencer(event["id"], event["seq"])
    assert seq.add(event)
    assert seq.take() == [event]
    assert seq.finished == (event["kind"] in ("done", "error"))
    if event["kind"] == "error":
        with pytest.raises(ConveyorError) as err:
            raise_for_event(event)
        assert err.value.code == event["code"]
    else:
        assert raise_for_event(event) is event


def test_done_events_carry_floats_for_timings():
    for v in DOC["events"]:
        e = v["value"]
        if e["kind"] == "done":
            raw = msgpack.unpackb(bytes.fromhex(v["hex"]), raw=False)
            for k in ("queue_ms", "e2e_ms"):
                assert isinstance(raw["timing"][k], float), (v["name"], k)


def test_fetch_reply_events_feed_a_sequencer():
    reply = unpack(bytes.fromhex(next(v for v in DOC["replies"] if v["name"] == "reply_fetch")["hex"]))
    seq = JobSequencer("job-1", reply["events"][0]["seq"])
    assert seq.add_all(reply["events"]) == 2
    assert seq.finished and reply["complete"]


KNOWN_SUBMIT_KEYS = set(SUBMIT_DEFAULTS) | {"op", "id", "prompt", "messages", "prompt_tokens"}
BUILDABLE = [v for v in DOC["requests"] if v["expect"] == "ok" and isinstance(decodable(v), dict)
             and decodable(v)["op"] == "submit" and set(decodable(v)) <= KNOWN_SUBMIT_KEYS]
WITH_STRING_IDS = [v for v in DOC["requests"] if isinstance(decodable(v), dict)
                   and isinstance(decodable(v).get("id"), str)
                   and (v["expect"] == "ok" and decodable(v)["op"] != "health" or v.get("field") == "id")]


def test_there_are_enough_cross_checks():
    assert len(BUILDABLE) >= 10
    assert sum(v["expect"] != "ok" for v in WITH_STRING_IDS) >= 5


@pytest.mark.parametrize("v", [pytest.param(v, id=v["name"]) for v in BUILDABLE])
def test_client_builds_the_same_submit_maps(v):
    m = decodable(v)
    params = {k: val for k, val in m.items() if k != "op"}
    assert build_submit(**params) == {k: val for k, val in m.items() if val is not None}


@pytest.mark.parametrize("v", [pytest.param(v, id=v["name"]) for v in WITH_STRING_IDS])
def test_client_id_check_agrees_with_the_server(v):
    assert valid_id(decodable(v)["id"]) == (v["expect"] == "ok")
