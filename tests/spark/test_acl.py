"""The connector against a broker and name server with aclEnable=true: accessKey/secretKey sign
the batch read, the streaming read and the write; an unsigned or wrongly signed query is refused
and writes nothing; half a key pair fails at load() in one line; no plan, progress or error
shows the secret."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812 - PySpark's usual alias
from tests.harness import Cluster, start_acl_cluster, unique_name
from tests.spark.conftest import wait_route
from tests.wire import create_topic, get_max_offset, signed_client

from rocketq.acl import SessionCredentials

pytestmark = pytest.mark.timeout(300)

ADMIN = SessionCredentials("sparkAdmin", "sparkAdminSecret")
APP = SessionCredentials("sparkApp", "sparkAppSecret9")
SECRET_MARK = "sparkAppSecret9"

PLAIN_ACL = f"""\
globalWhiteRemoteAddresses: []
accounts:
- accessKey: {ADMIN.access_key}
  secretKey: {ADMIN.secret_key}
  admin: true
- accessKey: {APP.access_key}
  secretKey: {APP.secret_key}
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: SUB
"""


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_acl_cluster(tmp_path_factory.mktemp("spark-acl"), PLAIN_ACL)
    try:
        yield c
    finally:
        c.stop()


def _topic(cluster: Cluster) -> str:
    topic = unique_name("SparkAcl")

    async def go() -> None:
        async with signed_client(ADMIN) as rc:
            r = await create_topic(rc, cluster.broker, topic, read=2, write=2)
            assert r.code == 0, r
    asyncio.run(go())
    return topic


def _stored(cluster: Cluster, topic: str) -> int:
    async def go() -> int:
        async with signed_client(ADMIN) as rc:
            return sum([await get_max_offset(rc, cluster.broker, topic, q) for q in range(2)])
    return asyncio.run(go())


def _signed(reader, creds: SessionCredentials = APP):  # type: ignore[no-untyped-def]
    return reader.option("accessKey", creds.access_key).option("secretKey", creds.secret_key)


def test_signed_write_batch_read_and_stream(spark: SparkSession, acl_cluster: Cluster,
                                            tmp_path: Path) -> None:
    topic = _topic(acl_cluster)
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    df = spark.createDataFrame(rows, "keys string, body string")
    # The route is there once the broker registered the topic; the write retries nothing, so wait.
    wait_route(acl_cluster, topic, timeout=30)
    _signed(df.write.format("rocketq").option("namesrv", acl_cluster.namesrv).option("topic", topic)).mode(
        "append").save()
    assert _stored(acl_cluster, topic) == 50

    back = _signed(spark.read.format("rocketq").option("namesrv", acl_cluster.namesrv)
                   .option("topic", topic)).load()
    plan = back._jdf.queryExecution().toString()
    assert SECRET_MARK not in plan
    got = sorted((r.keys, r.body.decode()) for r in back.select("keys", "body").collect())
    assert got == sorted(rows)

    stream = (_signed(spark.readStream.format("rocketq").option("namesrv", acl_cluster.namesrv)
                      .option("topic", topic).option("startingOffsets", "earliest")).load()
              .select(F.col("body").cast("string").alias("b")))
    q = (stream.writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    assert SECRET_MARK not in str(q.recentProgress) and SECRET_MARK not in q._jsq.toString()
    streamed = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.b for r in streamed) == sorted(b for _, b in rows)


def test_unsigned_and_wrong_secret_are_refused(spark: SparkSession, acl_cluster: Cluster) -> None:
    topic = _topic(acl_cluster)
    wait_route(acl_cluster, topic, timeout=30)
    unsigned_read = spark.read.format("rocketq").option("namesrv", acl_cluster.namesrv).option("topic", topic)
    with pytest.raises(Exception, match=r"No accessKey is configured") as unsigned:
        unsigned_read.load().collect()
    wrong = SessionCredentials(APP.access_key, "notTheSecret42")
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match=r"Check signature failed for accessKey=sparkApp") as refused:
        _signed(df.write.format("rocketq").option("namesrv", acl_cluster.namesrv).option("topic", topic),
                wrong).mode("append").save()
    assert "notTheSecret42" not in str(refused.value) and SECRET_MARK not in str(unsigned.value)
    assert _stored(acl_cluster, topic) == 0


def test_half_a_key_pair_fails_at_load_in_one_line(spark: SparkSession, acl_cluster: Cluster) -> None:
    def base():  # type: ignore[no-untyped-def]  # option() changes the reader it is called on
        return spark.read.format("rocketq").option("namesrv", acl_cluster.namesrv).option("topic", "AnyTopic")

    with pytest.raises(Exception, match="option 'secretKey': set accessKey and secretKey together"):
        base().option("accessKey", APP.access_key).load()
    with pytest.raises(Exception, match="option 'accessKey': set accessKey and secretKey together") as e:
        base().option("secretKey", APP.secret_key).load()
    assert SECRET_MARK not in str(e.value)


def test_security_options_parse_and_hide_the_secret() -> None:
    from rocketq.spark.errors import SparkOptionError
    from rocketq.spark.options import ReadOptions, Security, WriteOptions

    base = {"namesrv": "127.0.0.1:9876", "topic": "T"}
    opts = ReadOptions.parse({**base, "AccessKey": "ak1234567", "SECRETKEY": SECRET_MARK,
                              "securityToken": "tok-77", "tls": "true", "tlsCaFile": "/ca.pem"})
    assert opts.security.credentials == SessionCredentials("ak1234567", SECRET_MARK, "tok-77")
    assert (opts.security.tls, opts.security.tls_ca_file, opts.security.tls_verify) == (True, "/ca.pem", True)
    assert SECRET_MARK not in repr(opts) and "tok-77" not in repr(opts)
    assert WriteOptions.parse({**base, "accessKey": "a", "secretKey": "s"}).security.credentials is not None
    assert ReadOptions.parse(base).security == Security()
    for bad, option in (({"securityToken": "t"}, "securityToken"), ({"tlsCaFile": "/ca.pem"}, "tlsCaFile"),
                        ({"tls": "yes"}, "tls")):
        with pytest.raises(SparkOptionError) as e:
            ReadOptions.parse({**base, **bad})
        assert e.value.option == option
    with pytest.raises(SparkOptionError, match="a path read talks to no server"):
        ReadOptions.parse({"path": "/store", "topic": "T", "accessKey": "a", "secretKey": "s"})
