"""The 4.x HA stream: golden bytes of a report and a transfer header, and decoders that take any
cut of the stream."""

from __future__ import annotations

import pytest

from rocketq.codec.ha import SlaveReportDecoder, TransferDecoder, encode_report, encode_transfer_header
from rocketq.errors import ProtocolError


def test_golden_bytes() -> None:
    # Java: ByteBuffer.putLong(offset) / putLong(offset).putInt(size), big-endian
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_transfer_header(1 << 30, 32768) == bytes.fromhex("0000000040000000" "00008000")


def test_report_decoder_keeps_the_newest_whole_report() -> None:
    d = SlaveReportDecoder()
    stream = encode_report(5) + encode_report(9) + encode_report(42)
    assert d.feed(stream[:3]) is None
    assert d.feed(stream[3:12]) == 5  # the first report completed, the second not yet
    assert d.feed(stream[12:]) == 42
    with pytest.raises(ProtocolError):
        d.feed(encode_report(-1))


@pytest.mark.parametrize("step", [1, 5, 13, 1000])
def test_transfer_decoder_any_cut(step: int) -> None:
    transfers = [(0, b"abc"), (3, b""), (3, bytes(range(200))), (203, b"z")]
    stream = b"".join(encode_transfer_header(o, len(b)) + b for o, b in transfers)
    d = TransferDecoder()
    got = []
    for i in range(0, len(stream), step):
        got += [(o, bytes(b)) for o, b in d.feed(stream[i : i + step])]
    assert got == transfers
    assert d.buffered == 0


def test_transfer_decoder_refuses_a_lost_framing() -> None:
    with pytest.raises(ProtocolError):
        TransferDecoder().feed(encode_transfer_header(0, -5))
