"""The options of the "rocketq" format, validated once on the driver at load()/start().

Spark hands options over as a case-insensitive map of strings; every key is checked against the
list below (an unknown key is an error that names it, never silence) and parsed into frozen
values that travel to the executors.

Offsets JSON (startingOffsets / endingOffsets), per topic, broker and queue::

    {"TopicA": {"broker-a": {"0": 23, "1": -2}}, "TopicB": {"broker-a": {"0": -1}}}

with -2 meaning earliest and -1 latest (Spark's Kafka source uses the same two numbers).
Queues left out start at earliest and end at latest.

Timestamps JSON (startingOffsetsByTimestamp / endingOffsetsByTimestamp) has the same shape with
ms since epoch in place of offsets. Kafka keys partitions by number alone; a RocketMQ queue id is
only unique within one broker, so the broker level stays, as in the offsets JSON. Queues left out
take their offset from startingOffsets / endingOffsets.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from rocketq.acl.signature import SessionCredentials
from rocketq.spark.errors import SparkOptionError

EARLIEST: Final = -2
LATEST: Final = -1

# Spark itself adds these (load(path), writeStream's checkpoint); they are not ours to reject.
_SPARK_KEYS: Final = frozenset({"path", "checkpointlocation", "__checkpointlocation"})

# ACL signing and TLS: the same for reads and writes (Security below).
SECURITY_KEYS: Final = {
    "accesskey": "ACL: access key the requests are signed with (with secretKey)",
    "secretkey": "ACL: secret key of accessKey (never logged nor shown in plans)",
    "securitytoken": "ACL: STS security token sent with the signature (optional)",
    "tls": "true | false: connect to the name server and brokers over TLS",
    "tlscafile": "PEM file of the CA that signed the servers' certificates (with tls=true)",
    "tlsverify": "true | false: verify the servers' certificates (default true)",
}

READ_KEYS: Final = {
    "namesrv": "name server list host:port[;host:port] (or option path)",
    "path": "a broker's data/store directory, read without a broker",
    "topic": "topic name, or a comma-separated list",
    "topicpattern": "regular expression over all topic names",
    "subexpression": "tag filter, '*' or 'TagA || TagB'",
    "startingoffsets": "earliest | latest | offsets JSON",
    "endingoffsets": "latest | offsets JSON (batch only)",
    "startingtimestamp": "ms since epoch; start at the first message stored at or after it",
    "endingtimestamp": "ms since epoch; stop before the first message stored at or after it",
    "startingoffsetsbytimestamp": "timestamps JSON: per queue, start at the first message stored at or "
                                  "after it",
    "endingoffsetsbytimestamp": "timestamps JSON (batch only): per queue, stop before the first message "
                                "stored at or after it",
    "startingoffsetsbytimestampstrategy": "error | latest: when no message is stored at or after a starting "
                                          "timestamp",
    "failondataloss": "true | false",
    "minpartitions": "split queue ranges until there are at least this many partitions",
    "maxrecordsperpartition": "split queue ranges larger than this",
    "maxoffsetspertrigger": "streaming: messages per micro-batch over all queues",
    "minoffsetspertrigger": "streaming: skip a trigger while fewer new messages are available",
    "maxtriggerdelay": "streaming: with minOffsetsPerTrigger, run a batch anyway after this "
                       "long (15m, 30s, 500ms)",
    "consumergroup": "group name used in pulls; streaming commits its offsets to the broker",
    "groupidprefix": "pulls use a group named <prefix>-<random id> per query (instead of rocketq-spark)",
    "brokername": "path reads: the broker column (default: the host name)",
    "pullbatchsize": "messages asked per pull request",
    "pullwindow": "pull requests in flight per queue",
    "timeoutms": "deadline of each broker / name server call",
    **SECURITY_KEYS,
}

WRITE_KEYS: Final = {
    "namesrv": "name server list host:port[;host:port]",
    "topic": "destination topic when the data has no topic column",
    "producergroup": "producer group of the sends",
    "queuekeycolumn": "column whose value picks the queue (same value -> same queue)",
    "batchsize": "messages per SEND_BATCH_MESSAGE request",
    "sendwindow": "batch requests in flight per task",
    "timeoutms": "deadline of each send",
    **SECURITY_KEYS,
}

_TAG_RE: Final = re.compile(r"\s*\|\|\s*")
_CANONICAL: Final = {k.lower(): k for k in (
    "namesrv", "path", "topic", "topicPattern", "subExpression", "startingOffsets", "endingOffsets",
    "startingTimestamp", "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "minOffsetsPerTrigger", "maxTriggerDelay", "groupIdPrefix",
    "failOnDataLoss", "minPartitions", "maxRecordsPerPartition",
    "maxOffsetsPerTrigger", "consumerGroup", "brokerName", "pullBatchSize", "pullWindow", "timeoutMs",
    "producerGroup", "queueKeyColumn", "batchSize", "sendWindow",
    "accessKey", "secretKey", "securityToken", "tls", "tlsCaFile", "tlsVerify")}


def _name(key: str) -> str:
    return _CANONICAL.get(key, key)


def _check_keys(options: Mapping[str, str], known: Mapping[str, str]) -> None:
    for key in options:
        k = key.lower()
        if k not in known and k not in _SPARK_KEYS:
            raise SparkOptionError(key, f"unknown option; known options are {', '.join(sorted(known))}")


def _int(options: Mapping[str, str], key: str, default: int | None, minimum: int = 0) -> int | None:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SparkOptionError(_name(key), f"expected an integer, got {raw!r}") from None
    if value < minimum:
        raise SparkOptionError(_name(key), f"must be >= {minimum}, got {value}")
    return value


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise SparkOptionError(_name(key), f"expected true or false, got {raw!r}")
    return text == "true"


@dataclass(frozen=True, slots=True)
class Security:
    """ACL credentials and TLS of the connector's connections. The secret and the token stay
    out of ``repr`` (SessionCredentials hides them), so no plan, log line or traceback shows them."""

    credentials: SessionCredentials | None = None
    tls: bool = False
    tls_ca_file: str | None = None
    tls_verify: bool = True

    @classmethod
    def parse(cls, opts: Mapping[str, str]) -> Security:
        access = (opts.get("accesskey") or "").strip()
        secret = opts.get("secretkey") or ""
        token = opts.get("securitytoken") or None
        if bool(access) != bool(secret):
            missing = "secretKey" if access else "accessKey"
            raise SparkOptionError(missing, "set accessKey and secretKey together (ACL signs with both)")
        if token and not access:
            raise SparkOptionError("securityToken", "needs accessKey and secretKey")
        ca = (opts.get("tlscafile") or "").strip() or None
        tls = _bool(opts, "tls", False)
        if ca is not None and not tls:
            raise SparkOptionError("tlsCaFile", "has an effect only with tls=true")
        return cls(credentials=SessionCredentials(access, secret, token) if access else None,
                   tls=tls, tls_ca_file=ca, tls_verify=_bool(opts, "tlsverify", True))


OffsetMap = dict[tuple[str, str, int], int]


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """earliest, latest, or explicit offsets per (topic, broker, queue) with defaults for others."""

    default: int  # EARLIEST or LATEST
    explicit: tuple[tuple[tuple[str, str, int], int], ...] = ()

    def get(self, key: tuple[str, str, int]) -> int:
        return dict(self.explicit).get(key, self.default)


def parse_offsets(option: str, raw: str | None, default: int, *, allow_earliest: bool = True) -> OffsetSpec:
    if raw is None or raw.strip() == "":
        return OffsetSpec(default)
    text = raw.strip()
    if text.lower() == "earliest":
        if not allow_earliest:
            raise SparkOptionError(option, "earliest is not allowed here")
        return OffsetSpec(EARLIEST)
    if text.lower() == "latest":
        return OffsetSpec(LATEST)
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise SparkOptionError(option, f"expected earliest, latest or offsets JSON; bad JSON: {e}") from None
    return OffsetSpec(default, tuple(sorted(offsets_from_json(option, doc).items())))


def offsets_from_json(option: str, doc: object, *, what: str = "offset",
                      minimum: int = EARLIEST) -> OffsetMap:
    """{"topic": {"broker": {"qid": offset}}} -> {(topic, broker, qid): offset}."""
    shape = f'expected {{"topic": {{"broker": {{"queueId": {what}, ...}}}}}}'
    if not isinstance(doc, dict):
        raise SparkOptionError(option, shape)
    out: OffsetMap = {}
    for topic, brokers in doc.items():
        if not isinstance(brokers, dict):
            raise SparkOptionError(option, f"{shape}; topic {topic!r} maps to {brokers!r}")
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise SparkOptionError(option, f"{shape}; broker {broker!r} maps to {queues!r}")
            for qid, off in queues.items():
                try:
                    q = int(qid)
                except (TypeError, ValueError):
                    raise SparkOptionError(option, f"queue id {qid!r} is not an integer") from None
                if isinstance(off, bool) or not isinstance(off, int) or off < minimum:
                    raise SparkOptionError(option, f"{what} of {topic}/{broker}/{qid} must be an integer "
                                                   f">= {minimum}, got {off!r}")
                out[(str(topic), str(broker), q)] = off
    return out


TimestampMap = tuple[tuple[tuple[str, str, int], int], ...]


def parse_timestamps(option: str, raw: str | None) -> TimestampMap | None:
    """Timestamps JSON -> sorted ((topic, broker, qid), ms) pairs; None when the option is unset."""
    if raw is None or raw.strip() == "":
        return None
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise SparkOptionError(option, f"expected timestamps JSON; bad JSON: {e}") from None
    out = offsets_from_json(option, doc, what="timestamp", minimum=0)
    if not out:
        raise SparkOptionError(option, "names no queue")
    return tuple(sorted(out.items()))


_DURATION_RE: Final = re.compile(r"(\d+)\s*(ms|s|m|min|h|d)?")
_UNIT_MS: Final = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(option: str, raw: str) -> int:
    """Spark's time strings: '15m', '30s', '500ms', '1h'; a bare number is milliseconds."""
    m = _DURATION_RE.fullmatch(raw.strip().lower())
    if m is None:
        raise SparkOptionError(option, f"expected a duration such as 15m, 30s, 500ms, got {raw!r}")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


def offsets_to_json(offsets: Mapping[tuple[str, str, int], int]) -> dict[str, dict[str, dict[str, int]]]:
    doc: dict[str, dict[str, dict[str, int]]] = {}
    for (topic, broker, qid), off in sorted(offsets.items()):
        doc.setdefault(topic, {}).setdefault(broker, {})[str(qid)] = int(off)
    return doc


def parse_tags(expression: str) -> tuple[str, ...] | None:
    """None for '*' (everything), else the tags of 'A || B'."""
    text = expression.strip()
    if text in ("", "*"):
        return None
    tags = tuple(t for t in _TAG_RE.split(text) if t)
    if not tags or any(not t.strip() or "|" in t for t in tags):
        raise SparkOptionError("subExpression", f"bad tag expression {expression!r}; use '*' or 'A || B'")
    return tuple(t.strip() for t in tags)


@dataclass(frozen=True, slots=True)
class ReadOptions:
    namesrv: str | None
    path: str | None
    topics: tuple[str, ...]
    topic_pattern: str | None
    sub_expression: str
    tags: tuple[str, ...] | None
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None
    ending_timestamp: int | None
    fail_on_data_loss: bool
    min_partitions: int | None
    max_records_per_partition: int
    max_offsets_per_trigger: int | None
    consumer_group: str | None
    broker_name: str | None
    pull_batch_size: int
    pull_window: int
    timeout_ms: int
    starting_by_timestamp: TimestampMap | None = None
    ending_by_timestamp: TimestampMap | None = None
    no_match_latest: bool = False  # startingOffsetsByTimestampStrategy=latest
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    generated_group: str | None = None  # groupIdPrefix-<random id>, drawn once per parse
    security: Security = Security()

    @property
    def group(self) -> str:
        return self.consumer_group or self.generated_group or "rocketq-spark"

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool | None = False) -> ReadOptions:
        """``streaming=None`` at load(), where Spark does not yet say whether the query streams:
        the rules of one kind of query only are checked again when the reader is built."""
        opts = {k.lower(): v for k, v in options.items()}
        _check_keys(opts, READ_KEYS)
        namesrv = (opts.get("namesrv") or "").strip() or None
        path = (opts.get("path") or "").strip() or None
        if namesrv is None and path is None:
            raise SparkOptionError("namesrv", "set namesrv (host:port) or path (a store directory)")
        if namesrv is not None and path is not None:
            raise SparkOptionError("path", "set either namesrv or path, not both")
        topic_raw = (opts.get("topic") or "").strip()
        pattern = (opts.get("topicpattern") or "").strip() or None
        if bool(topic_raw) == bool(pattern):
            raise SparkOptionError("topic", "set exactly one of topic (name or comma-separated list) "
                                            "and topicPattern")
        topics = tuple(t.strip() for t in topic_raw.split(",") if t.strip())
        if topic_raw and not topics:
            raise SparkOptionError("topic", f"no topic in {topic_raw!r}")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as e:
                raise SparkOptionError("topicPattern", f"bad regular expression: {e}") from None
        sub = opts.get("subexpression") or "*"
        if streaming and opts.get("endingoffsets"):
            raise SparkOptionError("endingOffsets", "not supported by a streaming query")
        if streaming and opts.get("endingtimestamp"):
            raise SparkOptionError("endingTimestamp", "not supported by a streaming query")
        starting = parse_offsets("startingOffsets", opts.get("startingoffsets"),
                                 LATEST if streaming else EARLIEST)
        ending = parse_offsets("endingOffsets", opts.get("endingoffsets"), LATEST, allow_earliest=False)
        if streaming is False and starting.default == LATEST and not starting.explicit:
            raise SparkOptionError("startingOffsets", "latest is not allowed for a batch query")
        # A key accepted is a key honoured: these would mean nothing for this kind of read.
        if streaming is False and opts.get("maxoffsetspertrigger") is not None:
            raise SparkOptionError("maxOffsetsPerTrigger", "only a streaming query has triggers")
        if path is not None and (opts.get("consumergroup") or "").strip():
            raise SparkOptionError("consumerGroup", "a path read pulls from no broker, so it uses no group")
        if namesrv is not None and (opts.get("brokername") or "").strip():
            raise SparkOptionError("brokerName", "only a path read names its broker; with namesrv the "
                                                 "broker names come from the route")
        return cls(
            namesrv=namesrv,
            path=path,
            topics=topics,
            topic_pattern=pattern,
            sub_expression=sub,
            tags=parse_tags(sub),
            starting=starting,
            ending=ending,
            starting_timestamp=_int(opts, "startingtimestamp", None),
            ending_timestamp=_int(opts, "endingtimestamp", None),
            fail_on_data_loss=_bool(opts, "failondataloss", True),
            min_partitions=_int(opts, "minpartitions", None, 1),
            max_records_per_partition=_int(opts, "maxrecordsperpartition", 2_000_000, 1) or 2_000_000,
            max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", None, 1),
            consumer_group=(opts.get("consumergroup") or "").strip() or None,
            broker_name=(opts.get("brokername") or "").strip() or None,
            pull_batch_size=_int(opts, "pullbatchsize", 1024, 1) or 1024,
            pull_window=_int(opts, "pullwindow", 8, 1) or 8,
            timeout_ms=_int(opts, "timeoutms", 5000, 100) or 5000,
            security=_security(opts, path),
            **_kafka_extras(opts, streaming),
        )


def _security(opts: Mapping[str, str], path: str | None) -> Security:
    security = Security.parse(opts)
    if path is not None and security != Security():
        raise SparkOptionError("path", "a path read talks to no server: drop the ACL / TLS options")
    return security


def _kafka_extras(opts: Mapping[str, str], streaming: bool | None) -> dict[str, Any]:
    """The by-timestamp, trigger admission and group-prefix options, checked against each other."""
    if streaming and opts.get("endingoffsetsbytimestamp"):
        raise SparkOptionError("endingOffsetsByTimestamp", "not supported by a streaming query")
    strategy = str(opts.get("startingoffsetsbytimestampstrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SparkOptionError("startingOffsetsByTimestampStrategy",
                               f"expected error or latest, got {strategy!r}")
    min_rows = _int(opts, "minoffsetspertrigger", None, 1)
    delay_raw = opts.get("maxtriggerdelay")
    for key, value in (("minOffsetsPerTrigger", min_rows), ("maxTriggerDelay", delay_raw)):
        if value is not None and streaming is False:
            raise SparkOptionError(key, "only a streaming query has triggers")
    if delay_raw is not None and min_rows is None:
        raise SparkOptionError("maxTriggerDelay", "has an effect only together with minOffsetsPerTrigger")
    max_rows = _int(opts, "maxoffsetspertrigger", None, 1)
    if min_rows is not None and max_rows is not None and min_rows > max_rows:
        raise SparkOptionError("minOffsetsPerTrigger", f"{min_rows} is above maxOffsetsPerTrigger {max_rows}")
    prefix = opts.get("groupidprefix")
    generated = None
    if prefix is not None:
        if not prefix.strip():
            raise SparkOptionError("groupIdPrefix", "must not be empty")
        if (opts.get("consumergroup") or "").strip():
            raise SparkOptionError("groupIdPrefix", "set either consumerGroup or groupIdPrefix, not both")
        if (opts.get("path") or "").strip():
            raise SparkOptionError("groupIdPrefix", "a path read pulls from no broker, so it uses no group")
        generated = f"{prefix.strip()}-{uuid.uuid4().hex[:12]}"
    return {
        "starting_by_timestamp": parse_timestamps("startingOffsetsByTimestamp",
                                                  opts.get("startingoffsetsbytimestamp")),
        "ending_by_timestamp": parse_timestamps("endingOffsetsByTimestamp",
                                                opts.get("endingoffsetsbytimestamp")),
        "no_match_latest": strategy == "latest",
        "min_offsets_per_trigger": min_rows,
        "max_trigger_delay_ms": 15 * 60_000 if delay_raw is None
        else parse_duration_ms("maxTriggerDelay", str(delay_raw)),
        "generated_group": generated,
    }


@dataclass(frozen=True, slots=True)
class WriteOptions:
    namesrv: str
    topic: str | None
    producer_group: str
    queue_key_column: str | None
    batch_size: int
    send_window: int
    timeout_ms: int
    security: Security = Security()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        opts = {k.lower(): v for k, v in options.items()}
        _check_keys(opts, WRITE_KEYS)
        namesrv = (opts.get("namesrv") or "").strip()
        if not namesrv:
            raise SparkOptionError("namesrv", "the name server address is required (host:port)")
        return cls(
            namesrv=namesrv,
            topic=(opts.get("topic") or "").strip() or None,
            producer_group=(opts.get("producergroup") or "").strip() or "rocketq-spark-producer",
            queue_key_column=(opts.get("queuekeycolumn") or "").strip() or None,
            batch_size=_int(opts, "batchsize", 512, 1) or 512,
            send_window=_int(opts, "sendwindow", 8, 1) or 8,
            timeout_ms=_int(opts, "timeoutms", 5000, 100) or 5000,
            security=Security.parse(opts),
        )
