"""What a newcomer sees on ``dir(rocketq)``: the client API, not the facade's plumbing."""

from __future__ import annotations

import rocketq
import rocketq.aio


def test_dir_of_the_facades_is_their_public_api() -> None:
    for facade in (rocketq, rocketq.aio):
        names = dir(facade)
        assert names == sorted(facade.__all__), facade.__name__
        for plumbing in ("_EXPORTS", "lazy_getattr", "COMMON", "Any", "annotations", "_exports"):
            assert plumbing not in names, (facade.__name__, plumbing)
        assert {"Producer", "PushConsumer", "LitePullConsumer", "Message"} <= set(names)
    assert "__version__" in dir(rocketq)


def test_every_listed_name_resolves() -> None:
    for facade in (rocketq, rocketq.aio):
        for name in facade.__all__:
            assert getattr(facade, name) is not None, (facade.__name__, name)
