"""An in-process model of the DynamoDB and S3 calls the small tier makes, to measure it at 20,000 memories.

moto answers every call faithfully but was too slow to hold 2,000 memories of
1,024-d vectors (killed after 20 minutes). This model answers the same calls
from plain dicts, at botocore's ``before-send`` event: the adapter's boto3
client builds and signs each request, and parses the answer, exactly as it
would against AWS (so botocore's work counts as the function's), and only
the service's own work is replaced. Each call is recorded with what AWS would
bill and return:

- DynamoDB read request units as AWS counts strongly consistent reads: 4 KB
  of the *whole* item (projection does not reduce it); ``GetItem`` and each
  ``BatchGetItem`` item rounded up per item (1 for a key not found), a
  ``Query`` page on the sum of the items it read, at least 1. Item size is
  the attribute names plus values (binary decoded, numbers as their digits).
- ``Query`` pages of at most 1 MB read (DynamoDB's limit), with
  ``LastEvaluatedKey``; the bytes each call returns.
- S3 ``GetObject`` ranges and their bytes.

Only the expressions the adapters write are understood (conditions with
AND/OR/NOT, comparisons, BETWEEN, attribute_exists / attribute_not_exists /
begins_with; SET (with if_not_exists) and ADD updates; projections); anything
else raises, so the model never answers a call it does not model.
``tests/bench/test_aws_model.py`` runs one scenario on moto and on this model
and checks both see the same calls and give the same answers. Item sizes and
the expressions are read in ``bench.aws_expressions``.
"""

from __future__ import annotations

import bisect
import io
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse
from xml.etree import ElementTree

from botocore.awsrequest import AWSResponse

from memstack.bench.aws_expressions import (
    Expression,
    ModelError,
    apply_update,
    item_size,
    plain_value,
    project,
)
from memstack.bench.aws_expressions import (
    value_size as value_size,  # re-exported (item sizes were defined here)
)

RRU_BYTES = 4096
WRU_BYTES = 1024
PAGE_BYTES = 1024 * 1024


@dataclass
class Call:
    """One request the model answered."""

    service: str
    operation: str
    params: dict[str, Any]
    thread: str
    rru: float = 0.0
    wru: float = 0.0
    bytes_out: int = 0
    bytes_in: int = 0  # an object written
    items: int = 0
    model_s: float = 0.0  # the model's own time answering it (not the function's)


class _Raw(io.RawIOBase):
    """A response body read as from a socket: each ``read`` copies what it returns out of the
    stored bytes (as a receive does), and nothing is copied up front (the service's side)."""

    def __init__(self, body: bytes | memoryview) -> None:
        self._view, self._at = memoryview(body), 0

    def readable(self) -> bool:
        return True

    def read(self, amt: int | None = -1) -> bytes:
        end = len(self._view) if amt is None or amt < 0 else min(len(self._view), self._at + amt)
        chunk = bytes(self._view[self._at : end])
        self._at = end
        return chunk

    def stream(self, **_: Any) -> Iterator[bytes]:
        chunk = self.read()
        while chunk:
            yield chunk
            chunk = self.read()


def _response(
    url: str, status: int, body: bytes | memoryview, headers: dict[str, str] | None = None
) -> AWSResponse:
    head = {"Content-Length": str(len(body)), **(headers or {})}
    return AWSResponse(url, status, head, _Raw(body))


class ServiceError(Exception):
    def __init__(self, code: str, message: str, status: int = 400, **fields: Any) -> None:
        super().__init__(message)
        self.code, self.message, self.status, self.fields = code, message, status, fields


# ------------------------------------------------------------------ DynamoDB
@dataclass
class _Partition:
    keys: list[str] = field(default_factory=list)  # sort keys, ascending
    items: dict[str, dict[str, Any]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


class _Table:
    def __init__(self, hash_key: str, range_key: str) -> None:
        self.hash_key, self.range_key = hash_key, range_key
        self.partitions: dict[str, _Partition] = {}

    def key_of(self, key: dict[str, Any]) -> tuple[str, str]:
        return key[self.hash_key]["S"], key[self.range_key]["S"]

    def get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        pk, sk = self.key_of(key)
        part = self.partitions.get(pk)
        return None if part is None else part.items.get(sk)

    def put(self, item: dict[str, Any]) -> None:
        pk, sk = self.key_of(item)
        part = self.partitions.setdefault(pk, _Partition())
        if sk not in part.items:
            bisect.insort(part.keys, sk)
        part.items[sk], part.sizes[sk] = item, item_size(item)

    def delete(self, key: dict[str, Any]) -> None:
        pk, sk = self.key_of(key)
        part = self.partitions.get(pk)
        if part is not None and sk in part.items:
            del part.items[sk], part.sizes[sk]
            part.keys.pop(bisect.bisect_left(part.keys, sk))


class AwsModel:
    """DynamoDB tables and S3 buckets in memory, answering the adapters' boto3 clients."""

    def __init__(self) -> None:
        self.tables: dict[str, _Table] = {}
        self.buckets: dict[str, dict[str, bytes]] = {}
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def mark(self, name: str) -> None:
        """A point in the record of calls (a harness's own, not a call: ``service`` "mark")."""
        with self._lock:
            self.calls.append(Call("mark", name, {}, threading.current_thread().name))

    def create_table(self, name: str, hash_key: str = "pk", range_key: str = "sk") -> None:
        self.tables[name] = _Table(hash_key, range_key)

    def create_bucket(self, name: str) -> None:
        self.buckets[name] = {}

    def install(self, client: Any) -> Any:
        """Answer ``client``'s calls from the model (DynamoDB or S3, by the client's service)."""
        service = client.meta.service_model.service_name
        handler = {"dynamodb": self._dynamodb, "s3": self._s3}[service]
        client.meta.events.register_first(f"before-send.{service}", handler)
        return client

    # ------------------------------------------------------------ dispatch
    def _record(self, call: Call, started: float) -> None:
        call.model_s = time.perf_counter() - started
        with self._lock:
            self.calls.append(call)

    def _dynamodb(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        started = time.perf_counter()
        operation = event_name.rsplit(".", 1)[-1]
        params = json.loads(request.body or b"{}")
        call = Call("dynamodb", operation, params, threading.current_thread().name)
        try:
            answer = getattr(self, f"_ddb_{operation}")(params, call)
            body, status = json.dumps(answer).encode(), 200
        except ServiceError as exc:
            error = {
                "__type": f"com.amazonaws.dynamodb.v20120810#{exc.code}",
                "message": exc.message,
                **exc.fields,
            }
            body, status = json.dumps(error).encode(), exc.status
        call.bytes_out = len(body)
        self._record(call, started)
        return _response(request.url, status, body, {"Content-Type": "application/x-amz-json-1.0"})

    def _table(self, name: str) -> _Table:
        if name not in self.tables:
            raise ServiceError("ResourceNotFoundException", f"table {name} not found")
        return self.tables[name]

    @staticmethod
    def _condition(spec: dict[str, Any]) -> Expression | None:
        text = spec.get("ConditionExpression")
        if not text:
            return None
        return Expression(
            text, spec.get("ExpressionAttributeNames", {}), spec.get("ExpressionAttributeValues", {})
        )

    def _ddb_GetItem(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        item = self._table(p["TableName"]).get(p["Key"])
        call.rru = math.ceil(item_size(item) / RRU_BYTES) if item else 1
        call.items = int(item is not None)
        if item is None:
            return {}
        return {"Item": project(item, p.get("ProjectionExpression"), p.get("ExpressionAttributeNames", {}))}

    def _ddb_PutItem(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        table = self._table(p["TableName"])
        condition = self._condition(p)
        if condition is not None and not condition.evaluate(table.get(p["Item"])):
            raise ServiceError("ConditionalCheckFailedException", "The conditional request failed")
        table.put(p["Item"])
        call.wru = math.ceil(item_size(p["Item"]) / WRU_BYTES)
        return {}

    def _ddb_DeleteItem(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        table = self._table(p["TableName"])
        if self._condition(p) is not None:
            raise ModelError("conditional DeleteItem")
        item = table.get(p["Key"])
        table.delete(p["Key"])
        call.wru = math.ceil(item_size(item) / WRU_BYTES) if item else 1
        return {}

    def _ddb_UpdateItem(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        table = self._table(p["TableName"])
        current = table.get(p["Key"])
        condition = self._condition(p)
        if condition is not None and not condition.evaluate(current):
            raise ServiceError("ConditionalCheckFailedException", "The conditional request failed")
        names, values = p.get("ExpressionAttributeNames", {}), p.get("ExpressionAttributeValues", {})
        updated = apply_update({**(current or {}), **p["Key"]}, p["UpdateExpression"], names, values)
        table.put(updated)
        call.wru = math.ceil(item_size(updated) / WRU_BYTES)
        return {}

    def _ddb_Query(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        table = self._table(p["TableName"])
        names, values = p.get("ExpressionAttributeNames", {}), p.get("ExpressionAttributeValues", {})
        key = Expression(p["KeyConditionExpression"], names, values)
        hash_value, sort_condition = self._key_condition(key.tree, table)
        if p.get("FilterExpression"):
            raise ModelError("Query with a FilterExpression")
        part = table.partitions.get(hash_value, _Partition())
        keys = part.keys
        start = 0 if sort_condition is None else bisect.bisect_left(keys, self._lower(sort_condition, key))
        if p.get("ExclusiveStartKey"):
            start = max(start, bisect.bisect_right(keys, p["ExclusiveStartKey"][table.range_key]["S"]))
        limit = p.get("Limit")
        page: list[str] = []
        read = 0
        last = None
        for sk in keys[start:]:
            if sort_condition is not None and not key.evaluate({table.range_key: {"S": sk}}, sort_condition):
                if page or self._past(sort_condition, sk, key):
                    break
                continue
            size = part.sizes[sk]
            if page and read + size > PAGE_BYTES:
                last = page[-1]
                break
            page.append(sk)
            read += size
            if limit is not None and len(page) >= limit:
                last = sk
                break
        items = [project(part.items[sk], p.get("ProjectionExpression"), names) for sk in page]
        call.rru = max(1, math.ceil(read / RRU_BYTES))
        call.items = len(items)
        answer: dict[str, Any] = {"Items": items, "Count": len(items), "ScannedCount": len(items)}
        if last is not None and last != keys[-1]:
            answer["LastEvaluatedKey"] = {table.hash_key: {"S": hash_value}, table.range_key: {"S": last}}
        return answer

    @staticmethod
    def _lower(condition: Any, key: Expression) -> str:
        """Where a sort key condition's range begins (the scan starts there, as an index seek does)."""
        op = condition[0]
        bound = condition[2] if op in ("begins_with", "between", "=", ">", ">=") else None
        return "" if bound is None else str(plain_value(key._get(bound, None) or {"S": ""}))

    @staticmethod
    def _past(condition: Any, sk: str, key: Expression) -> bool:
        """Whether ``sk`` is already beyond a range condition's upper end (the scan can stop)."""
        op = condition[0]
        if op == "between":
            return sk > str(plain_value(key._get(condition[3], None) or {"S": ""}))
        if op == "begins_with":
            prefix = str(plain_value(key._get(condition[2], None) or {"S": ""}))
            return sk > prefix and not sk.startswith(prefix)
        return False

    @staticmethod
    def _key_condition(tree: Any, table: _Table) -> tuple[str, Any]:
        """(the hash key's value, the sort key's condition node or None) of a KeyConditionExpression."""
        parts = [tree[1], tree[2]] if tree[0] == "and" else [tree]
        hash_value, sort = None, None
        for node in parts:
            if node[0] == "=" and node[1] == ("path", table.hash_key):
                hash_value = node[2][1]["S"]
            elif node[0] in ("begins_with", "between", "=", "<", "<=", ">", ">=") and node[1] == (
                "path",
                table.range_key,
            ):
                sort = node
            else:
                raise ModelError(f"key condition {node}")
        if hash_value is None:
            raise ModelError("a Query needs the hash key")
        return hash_value, sort

    def _ddb_BatchGetItem(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        responses: dict[str, list[dict[str, Any]]] = {}
        for name, spec in p["RequestItems"].items():
            table = self._table(name)
            found = responses.setdefault(name, [])
            for key in spec["Keys"]:
                item = table.get(key)
                call.rru += math.ceil(item_size(item) / RRU_BYTES) if item else 1
                if item is not None:
                    found.append(
                        project(
                            item, spec.get("ProjectionExpression"), spec.get("ExpressionAttributeNames", {})
                        )
                    )
        call.items = sum(map(len, responses.values()))
        return {"Responses": responses, "UnprocessedKeys": {}}

    def _ddb_BatchWriteItem(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        for name, requests in p["RequestItems"].items():
            table = self._table(name)
            for request in requests:
                if "DeleteRequest" in request:
                    table.delete(request["DeleteRequest"]["Key"])
                    call.wru += 1
                else:
                    table.put(request["PutRequest"]["Item"])
                    call.wru += math.ceil(item_size(request["PutRequest"]["Item"]) / WRU_BYTES)
        return {"UnprocessedItems": {}}

    def _ddb_TransactWriteItems(self, p: dict[str, Any], call: Call) -> dict[str, Any]:
        actions = p["TransactItems"]
        reasons, failed = [], False
        for action in actions:
            ((kind, spec),) = action.items()
            table = self._table(spec["TableName"])
            current = table.get(spec["Item"] if kind == "Put" else spec["Key"])
            condition = self._condition(spec)
            ok = condition is None or condition.evaluate(current)
            reasons.append({"Code": "None"} if ok else {"Code": "ConditionalCheckFailed"})
            failed |= not ok
        if failed:
            raise ServiceError(
                "TransactionCanceledException", "Transaction cancelled", CancellationReasons=reasons
            )
        for action in actions:
            ((kind, spec),) = action.items()
            table = self._table(spec["TableName"])
            if kind == "Put":
                table.put(spec["Item"])
                call.wru += 2 * math.ceil(item_size(spec["Item"]) / WRU_BYTES)
            elif kind == "Update":
                names, values = (
                    spec.get("ExpressionAttributeNames", {}),
                    spec.get("ExpressionAttributeValues", {}),
                )
                current = table.get(spec["Key"]) or {}
                updated = apply_update({**current, **spec["Key"]}, spec["UpdateExpression"], names, values)
                table.put(updated)
                call.wru += 2 * math.ceil(item_size(updated) / WRU_BYTES)
            elif kind == "Delete":
                table.delete(spec["Key"])
                call.wru += 2
            elif kind != "ConditionCheck":
                raise ModelError(f"transaction action {kind}")
        return {}

    # ------------------------------------------------------------ S3 (path-style addressing)
    def _s3(self, request: Any, event_name: str, **_: Any) -> AWSResponse:
        started = time.perf_counter()
        operation = event_name.rsplit(".", 1)[-1]
        url = urlparse(request.url)
        bucket, _slash, key = unquote(url.path).lstrip("/").partition("/")
        query = parse_qs(url.query)
        call = Call(
            "s3",
            operation,
            {"Bucket": bucket, "Key": key, **{k: v[0] for k, v in query.items()}},
            threading.current_thread().name,
        )
        objects = self.buckets.get(bucket)
        if objects is None:
            return self._s3_error(request, call, started, "NoSuchBucket", 404)
        headers: dict[str, str] = {}
        body: bytes | memoryview
        if operation == "GetObject":
            data = objects.get(key)
            if data is None:
                return self._s3_error(request, call, started, "NoSuchKey", 404)
            wanted = request.headers.get("Range")
            status, body = 200, memoryview(data)
            if wanted:
                match = re.fullmatch(
                    r"bytes=(\d+)-(\d+)", wanted.decode() if isinstance(wanted, bytes) else wanted
                )
                if match is None:
                    raise ModelError(f"range {wanted!r}")
                first, last = int(match.group(1)), min(int(match.group(2)), len(data) - 1)
                body, status = memoryview(data)[first : last + 1], 206
                headers["Content-Range"] = f"bytes {first}-{last}/{len(data)}"
                call.params["Range"] = f"bytes={first}-{last}"
            call.items = 1
        elif operation == "PutObject":
            raw = request.body
            data = raw if isinstance(raw, bytes) else raw.read() if raw is not None else b""
            objects[key] = bytes(data)
            call.bytes_in = len(data)
            status, body = 200, b""
        elif operation == "DeleteObject":
            objects.pop(key, None)
            status, body = 204, b""
        elif operation == "ListObjectsV2":
            prefix = call.params.get("prefix", "")
            found = sorted(k for k in objects if k.startswith(prefix))
            contents = "".join(
                f"<Contents><Key>{k}</Key><Size>{len(objects[k])}</Size></Contents>" for k in found
            )
            body = (
                '<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                f"<Name>{bucket}</Name><Prefix>{prefix}</Prefix><KeyCount>{len(found)}</KeyCount>"
                f"<MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated>{contents}</ListBucketResult>"
            ).encode()
            status = 200
            call.items = len(found)
        elif operation == "DeleteObjects":
            raw = request.body if isinstance(request.body, bytes) else request.body.read()
            tree = ElementTree.fromstring(raw)
            keys = [el.text or "" for el in tree.iter() if el.tag.endswith("Key")]
            for k in keys:
                objects.pop(k, None)
            call.params["Keys"] = keys
            body = b'<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"></DeleteResult>'
            status = 200
        else:
            raise ModelError(f"s3:{operation}")
        call.bytes_out = len(body)
        self._record(call, started)
        return _response(request.url, status, body, headers)

    def _s3_error(self, request: Any, call: Call, started: float, code: str, status: int) -> AWSResponse:
        body = f"<Error><Code>{code}</Code><Message>{code}</Message></Error>"
        self._record(call, started)
        return _response(request.url, status, body.encode(), {"Content-Type": "application/xml"})
