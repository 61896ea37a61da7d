"""Bad input table: every entry gets its HTTP status and a JSON error naming the field.

Never a 500, never a traceback (nats' TestShouldFail style: input, status, Iggy id, field).
"""

from __future__ import annotations

import pytest
import trio

from http_helpers import TEST_LIMIT_S, b64, client, gateway, login, make_topic

M = "/streams/s1/topics/t1/messages"
HDR = {"kind": "string", "value": b64("v")}

# name -> (method, path, raw body or json, status, iggy id, field)
CASES = {
    "malformed_json": ("POST", "/streams", b"{not json", 400, 4, "body"),
    "empty_body": ("POST", "/streams", b"", 400, 4, "body"),
    "not_utf8": ("POST", "/streams", b"\xff\xfe", 400, 4, "body"),
    "body_not_object": ("POST", "/streams", [1, 2], 400, 4, "body"),
    "name_wrong_type": ("POST", "/streams", {"name": 5}, 400, 4, "name"),
    "int_past_digit_limit": ("POST", "/streams", b'{"name": ' + b"1" * 5000 + b"}", 400, 4, "body"),
    "deeply_nested": ("POST", "/streams", b"[" * 100_000 + b"]" * 100_000, 400, 4, "body"),
    "query_too_many_fields": ("GET", M + "?" + "&".join(f"f{i}=1" for i in range(101)), None, 400, 400, "query"),
    "query_bad_percent": ("GET", M + "?count=%ff", None, 400, 400, "query"),
    "query_huge_number": ("GET", M + "?value=" + "9" * 5000, None, 400, 4, "value"),
    "consumer_huge_number": ("GET", M + "?id=" + "9" * 5000, None, 400, 4, "id"),
    "permission_key_huge": ("POST", "/users", {"username": "joe", "password": "secret", "permissions": {
        "global": {}, "streams": {"9" * 5000: {}}}}, 400, 4, "permissions.streams"),
    "name_missing": ("POST", "/streams", {}, 400, 4, "name"),
    "name_too_long": ("POST", "/streams", {"name": "x" * 256}, 400, 1013, "name"),
    "stream_id_negative": ("POST", "/streams", {"name": "a", "stream_id": -1}, 400, 4, "stream_id"),
    "stream_id_float": ("POST", "/streams", {"name": "a", "stream_id": 1.5}, 400, 4, "stream_id"),
    "partitions_bool": ("POST", "/streams/s1/topics", {"name": "t", "partitions_count": True,
                                                       "compression_algorithm": "none", "message_expiry": 0,
                                                       "max_topic_size": 0}, 400, 4, "partitions_count"),
    "compression_unknown": ("POST", "/streams/s1/topics", {"name": "t", "partitions_count": 1,
                                                           "compression_algorithm": "lz4", "message_expiry": 0,
                                                           "max_topic_size": 0}, 400, 4, "compression_algorithm"),
    "too_many_partitions": ("POST", "/streams/s1/topics", {"name": "t", "partitions_count": 1001,
                                                           "compression_algorithm": "none", "message_expiry": 0,
                                                           "max_topic_size": 0}, 400, 2015, None),
    "messages_missing": ("POST", M, {}, 400, 4, "messages"),
    "messages_not_array": ("POST", M, {"messages": {}}, 400, 4, "messages"),
    "messages_empty": ("POST", M, {"messages": []}, 400, 4009, "messages"),
    "payload_bad_base64": ("POST", M, {"messages": [{"payload": "%%%"}]}, 400, 4, "messages[0].payload"),
    "payload_no_padding": ("POST", M, {"messages": [{"payload": "eA"}]}, 400, 4, "messages[0].payload"),
    "payload_empty": ("POST", M, {"messages": [{"payload": ""}]}, 400, 4024, "messages[0].payload"),
    "payload_number": ("POST", M, {"messages": [{"payload": 7}]}, 400, 4, "messages[0].payload"),
    "message_not_object": ("POST", M, {"messages": ["eA=="]}, 400, 4, "messages[0]"),
    "id_negative": ("POST", M, {"messages": [{"payload": "eA==", "id": -1}]}, 400, 4, "messages[0].id"),
    "id_too_big": ("POST", M, {"messages": [{"payload": "eA==", "id": 2**128}]}, 400, 4, "messages[0].id"),
    "header_unknown_kind": ("POST", M, {"messages": [{"payload": "eA==", "headers": {
        "k": {"kind": "uint256", "value": "AA=="}}}]}, 400, 209, "messages[0].headers.k.kind"),
    "header_bad_base64": ("POST", M, {"messages": [{"payload": "eA==", "headers": {
        "k": {"kind": "raw", "value": "!"}}}]}, 400, 4, "messages[0].headers.k.value"),
    "header_wrong_width": ("POST", M, {"messages": [{"payload": "eA==", "headers": {
        "k": {"kind": "uint32", "value": "AA=="}}}]}, 400, 4019, "messages[0].headers.k.value"),
    "header_bad_bool": ("POST", M, {"messages": [{"payload": "eA==", "headers": {
        "k": {"kind": "bool", "value": b64(b"\x02")}}}]}, 400, 4019, "messages[0].headers.k.value"),
    "header_empty_value": ("POST", M, {"messages": [{"payload": "eA==", "headers": {
        "k": {"kind": "raw", "value": ""}}}]}, 400, 4019, "messages[0].headers.k.value"),
    "header_empty_key": ("POST", M, {"messages": [{"payload": "eA==", "headers": {"": HDR}}]},
                         400, 4018, "messages[0].headers."),
    "header_not_object": ("POST", M, {"messages": [{"payload": "eA==", "headers": ["x"]}]},
                          400, 4, "messages[0].headers"),
    "header_kind_missing": ("POST", M, {"messages": [{"payload": "eA==", "headers": {"k": {"value": "AA=="}}}]},
                            400, 4, "messages[0].headers.k.kind"),
    "partitioning_unknown": ("POST", M, {"partitioning": {"kind": "sticky", "value": ""},
                                         "messages": [{"payload": "eA=="}]}, 400, 4, "partitioning.kind"),
    "partition_value_size": ("POST", M, {"partitioning": {"kind": "partition_id", "value": "AQ=="},
                                         "messages": [{"payload": "eA=="}]}, 400, 82, "partitioning.value"),
    "partition_missing": ("POST", M, {"partitioning": {"kind": "partition_id", "value": "CQAAAA=="},
                                      "messages": [{"payload": "eA=="}]}, 404, 3007, "partition_id"),
    "key_too_long": ("POST", M, {"partitioning": {"kind": "messages_key", "value": b64("k" * 256)},
                                 "messages": [{"payload": "eA=="}]}, 400, 4028, "partitioning.value"),
    "poll_count_zero": ("GET", M + "?count=0", None, 400, 4009, "count"),
    "poll_count_text": ("GET", M + "?count=ten", None, 400, 4, "count"),
    "poll_kind_unknown": ("GET", M + "?kind=middle", None, 400, 4, "kind"),
    "poll_partition_negative": ("GET", M + "?partition_id=-1", None, 400, 4, "partition_id"),
    "poll_partition_missing": ("GET", M + "?partition_id=1", None, 404, 3007, "partition_id"),
    "poll_auto_commit_text": ("GET", M + "?auto_commit=maybe", None, 400, 4, "auto_commit"),
    "poll_wait_too_long": ("GET", M + "?wait_ms=99999999", None, 400, 4, "wait_ms"),
    "poll_missing_topic": ("GET", "/streams/s1/topics/99/messages", None, 404, 2010, "topic_id"),
    "ident_too_long": ("GET", "/streams/" + "x" * 256, None, 400, 6, "stream_id"),
    "ident_unknown": ("GET", "/streams/7/topics", None, 404, 1009, "stream_id"),
    "ident_past_u32_is_a_name": ("GET", "/streams/4294967296/topics", None, 400, 1010, None),
    "path_bad_utf8": ("GET", "/streams/%ff", None, 400, 400, "path"),
    "unknown_path": ("GET", "/nowhere", None, 404, 404, "path"),
    "wrong_method": ("PATCH", "/streams", None, 405, 405, "method"),
    "delete_partitions_no_count": ("DELETE", "/streams/s1/topics/t1/partitions", None, 400, 4, "partitions_count"),
    "permissions_bad": ("POST", "/users", {"username": "joe", "password": "secret",
                                          "permissions": {"global": {"read_streams": "yes"}}}, 400, 4, "permissions"),
    "offset_past_end": ("PUT", "/streams/s1/topics/t1/consumer-offsets", {"offset": 5}, 400, 4100, "offset"),
    # the current server's forms: typed header entries, topic options
    "user_headers_not_list": ("POST", M, {"messages": [{"payload": "eA==", "user_headers": {"k": HDR}}]},
                              400, 4, "messages[0].user_headers"),
    "user_headers_bad_base64": ("POST", M, {"messages": [{"payload": "eA==", "user_headers": "!"}]},
                                400, 4, "messages[0].user_headers"),
    "user_headers_key_kind": ("POST", M, {"messages": [{"payload": "eA==", "user_headers": [
        {"key": {"kind": "uint256", "value": "AA=="}, "value": HDR}]}]}, 400, 209, "messages[0].user_headers[0].key.kind"),
    "user_headers_value_missing": ("POST", M, {"messages": [{"payload": "eA==", "user_headers": [{"key": HDR}]}]},
                                   400, 4, "messages[0].user_headers[0].value"),
    "user_headers_wrong_width": ("POST", M, {"messages": [{"payload": "eA==", "user_headers": [
        {"key": HDR, "value": {"kind": "uint32", "value": "AA=="}}]}]}, 400, 4019,
        "messages[0].user_headers[0].value.value"),
    "both_header_forms": ("POST", M, {"messages": [{"payload": "eA==", "headers": {"k": HDR},
                                                    "user_headers": [{"key": HDR, "value": HDR}]}]},
                          400, 4, "messages[0].user_headers"),
    "topic_option_unknown": ("PUT", "/streams/s1/topics/t1", {"name": "t1", "options": {"bogus": "1"}},
                             400, 4041, "options"),
    "topic_option_create_only": ("PUT", "/streams/s1/topics/t1", {"name": "t1", "options": {"segment_size": "1MiB"}},
                                 400, 4041, "options"),
    "topic_option_not_text": ("PUT", "/streams/s1/topics/t1", {"name": "t1", "options": {"message_expiry": 5}},
                              400, 4, "options.message_expiry"),
    "topic_option_bad_value": ("PUT", "/streams/s1/topics/t1", {"name": "t1", "options": {"max_topic_size": "lots"}},
                               400, 4042, "options"),
    "topic_size_below_segment": ("PUT", "/streams/s1/topics/t1", {"name": "t1", "max_topic_size": 1000},
                                 400, 1019, None),
    "topic_update_expiry_text": ("PUT", "/streams/s1/topics/t1", {"name": "t1", "message_expiry": "1h"},
                                 400, 4, "message_expiry"),
}


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
async def test_malformed_table(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port, http2=http2) as c:
            await login(c)
            await make_topic(c)
            failures = []
            for name, (method, path, body, status, iggy_id, field) in CASES.items():
                kw = {}
                if isinstance(body, bytes):
                    kw["content"] = body
                elif body is not None:
                    kw["json"] = body
                r = await c.request(method, path, **kw)
                got = (r.status_code, r.headers.get("content-type"))
                try:
                    err = r.json()
                except ValueError:
                    failures.append((name, got, r.text))
                    continue
                if (r.status_code, err.get("id"), err.get("field")) != (status, iggy_id, field):
                    failures.append((name, r.status_code, err))
                elif set(err) != {"id", "code", "reason", "field"} or not isinstance(err["reason"], str):
                    failures.append((name, "shape", err))
            assert failures == []


@pytest.mark.parametrize("http2", [False, True], ids=["h1", "h2"])
async def test_oversized_body_gets_413_json(tmp_path, http2):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path, FERRY_HTTP_MAX_BODY_BYTES="1000") as port, client(port, http2=http2) as c:
            await login(c)
            await make_topic(c)
            r = await c.post(M, json={"messages": [{"payload": b64(b"x" * 2000)}]})
            assert r.status_code == 413
            assert r.json() == {"id": 413, "code": "payload_too_large",
                                "reason": "request body exceeds 1000 bytes", "field": "body"}
            # the server stays usable (HTTP/1.1: on a new connection; HTTP/2: same connection)
            assert (await c.get("/ping")).status_code == 200


async def test_wrong_method_lists_allowed(tmp_path):
    with trio.fail_after(TEST_LIMIT_S):
        async with gateway(tmp_path) as port, client(port) as c:
            r = await c.request("PATCH", "/streams")
            assert r.status_code == 405 and r.headers["allow"] == "GET, POST"
