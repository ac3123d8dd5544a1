"""ConditionLog: once per key and state; again after a change or after the condition ended."""

from __future__ import annotations

import logging

import pytest

from rocketq.client.condition_log import ConditionLog


def test_said_once_per_key_then_again_only_after_a_change(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("rocketq.test.condition")
    conditions = ConditionLog(log)
    with caplog.at_level(logging.INFO, logger=log.name):
        for _ in range(3):
            conditions.report("T1", "missing", "topic %s missing", "T1")
            conditions.report("T2", "missing", "topic %s missing", "T2")
        conditions.report("T1", "denied", "topic %s denied", "T1")  # state changed
        conditions.clear("T2")
        assert not conditions.active("T2") and conditions.active("T1")
        conditions.report("T2", "missing", "topic %s missing", "T2")  # came back after it ended
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "topic T1 missing"),
        (logging.INFO, "topic T2 missing"),
        (logging.INFO, "topic T1 denied"),
        (logging.INFO, "topic T2 missing"),
    ]


def test_level_is_the_callers(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("rocketq.test.condition")
    with caplog.at_level(logging.INFO, logger=log.name):
        ConditionLog(log, logging.WARNING).report("a", 1, "down")
    assert caplog.records[0].levelno == logging.WARNING
