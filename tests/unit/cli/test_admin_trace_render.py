"""queryMsgTraceById's printout: mqadmin's printf columns, Pub blocks, then one block per group."""

from __future__ import annotations

from datetime import datetime

from rocketq.admin.trace import TraceView
from rocketq.cli.admin.trace import render

T = 1_700_000_000_000


def _view(kind: str, group: str, cost: int, status: str = "success") -> TraceView:
    return TraceView(msg_type=kind, msg_id="M", group_name=group, client_host="10.0.0.1:5000", timestamp=T,
                     cost_time=cost, status=status)


def test_render_matches_mqadmin_layout() -> None:
    views = [_view("Pub", "PG", 3), _view("SubBefore", "CG", 0), _view("SubAfter", "CG", 12, "failed"),
             _view("SubAfter", "CG", 5), _view("SubAfter", "OtherGroup", 1)]
    lines = render(views).split("\n")
    when = datetime.fromtimestamp(T / 1000).strftime("%Y-%m-%d %H:%M:%S")
    assert lines[0] == ("#Type      #ProducerGroup       #ClientHost          #SendTime            "
                        "#CostTimes #Status   ")
    assert lines[1] == (f"Pub        PG                   10.0.0.1:5000        {when:<20} "
                        "3ms        success   ")
    assert lines[2] == ""
    assert lines[3].split() == ["#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes",
                                "#Status"]
    assert [line.split()[-2:] for line in lines[4:6]] == [["12ms", "failed"], ["5ms", "success"]]
    assert lines[6] == "" and "OtherGroup" in lines[8]
    assert render([]) == ""
