"""Python 3.11's asyncio.wait_for returns the inner result when a cancel arrives as the inner await
completes, so a service loop waiting on an Event (or a Lock) with it can swallow its own shutdown and
hang whoever awaits it (seen in test_lifecycle_and_bad_input_errors). asyncio.timeout() keeps the
cancel; this keeps the pattern from coming back."""

from __future__ import annotations

import re
from pathlib import Path

import rocketq

SRC = Path(rocketq.__file__).parent
PATTERN = re.compile(r"wait_for\([^\n]*\.(wait|acquire)\(\)")


def test_no_wait_for_around_event_wait_or_lock_acquire() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{n}"
        for path in SRC.rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if PATTERN.search(line)
    ]
    hint = "use `async with asyncio.timeout(t): await x.wait()` instead: "
    assert offenders == [], hint + ", ".join(offenders)
