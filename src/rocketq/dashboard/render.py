"""HTML for the dashboard pages: every value that came from the cluster goes through :func:`esc`.

Pages are built from strings rather than a template engine: there are few of them, and one escaping
function that every cell passes through is easier to audit than autoescape rules.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

__all__ = [
    "CHART_JS", "CHART_PATH", "TPS_CHART_PATH", "TPS_JS", "TPS_WINDOWS", "Raw", "esc", "fmt_ms", "link",
    "page", "parse_tps", "table", "tps_cell", "tps_chart", "url",
]


def esc(value: object) -> str:
    """Text for an HTML element or a quoted attribute (quotes escaped too)."""
    return html.escape(str(value), quote=True)


def fmt_ms(value: object, *, millis: bool = True) -> str:
    """An epoch-ms time as local time; "-" for none (0, negative or not a number)."""
    if not isinstance(value, int) or value <= 0:
        return "-"
    text = dt.datetime.fromtimestamp(value / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")
    return text[:-3] if millis else text[:-7]


def url(path: str, **params: object) -> str:
    # quote with safe="" because topics may hold '%' and '|': an unquoted '%3C' would come back
    # from the server's URL decoding as '<', i.e. as another topic.
    query = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in params.items() if v is not None)
    return f"{path}?{query}" if query else path


def link(text: object, path: str, **params: object) -> str:
    return f'<a href="{esc(url(path, **params))}">{esc(text)}</a>'


class Raw(str):
    """A cell that is already HTML (a link, a form): :func:`table` does not escape it again."""

    __slots__ = ()


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, table_id: str = "") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{c if isinstance(c, Raw) else esc(c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# RocketMQ's putTps / getTransferredTps are three averages in one string, over these windows
# (StoreStatsService: 10 s, 60 s, 600 s); rocketmq-dashboard shows the first as "TPS".
TPS_WINDOWS = ("10 s", "1 min", "10 min")


def parse_tps(raw: object) -> list[float] | None:
    """The three window averages of a putTps-style string, or None when it is not one."""
    try:
        values = [float(p) for p in str(raw).split()]
    except ValueError:
        return None
    return values if len(values) == len(TPS_WINDOWS) else None


def tps_cell(raw: object) -> Raw:
    """A broker's "12.30 11.00 10.50" as the 10-second TPS, with the longer windows labelled after it."""
    values = parse_tps(raw)
    if values is None:
        return Raw(esc(raw))  # not the triple (an older or foreign broker): shown as it came
    first, *rest = values
    longer = ", ".join(f"{w} {v:.1f}" for w, v in zip(TPS_WINDOWS[1:], rest, strict=True))
    return Raw(f'<span class="tps" title="average over the last 10 s">{first:.1f}</span>'
               f' <small class="tps-longer">({esc(longer)})</small>')


_NAV = (("/", "Cluster"), ("/topics", "Topics"), ("/groups", "Consumer groups"), ("/producers", "Producers"),
        ("/messages", "Messages"), ("/trace", "Trace"))

_CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
nav{background:#1f3a5f;padding:.6em 1em}nav a{color:#fff;margin-right:1.5em;text-decoration:none}
main{padding:1em 1.5em}table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f0f3f7}.error{background:#fde8e8;border:1px solid #e0a0a0;padding:.5em 1em}
.ok{background:#e8f6e8;border:1px solid #9c9;padding:.5em 1em}
form{margin:.5em 0 1.5em}input,textarea,select{margin:.2em .4em .2em 0}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap;word-break:break-all}
#chart,#tps-chart{border:1px solid #ccc;background:#fff}
"""


def page(
    title: str, body: str, *, error: str | None = None, script: str = "", back: tuple[str, str] | None = None
) -> str:
    """A whole page; ``script`` is the path of one of our own scripts (the CSP allows no inline one);
    ``back`` = (path, text) adds a link under the error."""
    nav = "".join(f'<a href="{href}">{esc(text)}</a>' for href, text in _NAV)
    err = f'<p class="error" id="error">{esc(error)}</p>' if error else ""
    if back:
        err += f'<p id="back">{link(back[1], back[0])}</p>'
    js = f'<script src="{esc(script)}"></script>' if script else ""
    return (
        "<!doctype html><html><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)} - rocketq dashboard</title><style>{_CSS}</style></head>"
        f"<body><nav>{nav}</nav><main><h1>{esc(title)}</h1>{err}{body}</main>{js}</body></html>"
    )


CHART_PATH = "/static/chart.js"

# The live chart: polls the group's JSON endpoint every 2 s and draws lag and TPS on a canvas.
# Values reach the page only as JSON numbers and as canvas text (never as HTML).
CHART_JS = """
(function(){
const cv=document.getElementById('chart'),ctx=cv.getContext('2d');
const src=cv.dataset.src,pts=[];let prev=null;
function draw(){
  const w=cv.width,h=cv.height,pad=40;ctx.clearRect(0,0,w,h);
  if(!pts.length)return;
  const maxLag=Math.max(1,...pts.map(p=>p.lag)),maxTps=Math.max(1,...pts.map(p=>p.tps));
  ctx.strokeStyle='#ddd';ctx.beginPath();ctx.moveTo(pad,10);ctx.lineTo(pad,h-20);ctx.lineTo(w-pad,h-20);ctx.stroke();
  function line(key,max,color){
    ctx.strokeStyle=color;ctx.lineWidth=2;ctx.beginPath();
    pts.forEach((p,i)=>{const x=pad+(w-2*pad)*i/Math.max(1,pts.length-1),y=h-20-(h-30)*p[key]/max;
      i?ctx.lineTo(x,y):ctx.moveTo(x,y);});ctx.stroke();}
  line('lag',maxLag,'#c0392b');line('tps',maxTps,'#2874a6');
  ctx.fillStyle='#c0392b';ctx.fillText('lag (max '+maxLag+')',pad+4,12);
  ctx.fillStyle='#2874a6';ctx.fillText('consume TPS (max '+maxTps.toFixed(1)+')',pad+160,12);
}
async function poll(){
  try{
    const r=await fetch(src,{cache:'no-store'});const d=await r.json();
    if(d.error){document.getElementById('live').textContent='error: '+d.error;return;}
    let tps=0;if(prev&&d.time>prev.time)tps=Math.max(0,(d.consumed-prev.consumed)*1000/(d.time-prev.time));
    prev=d;pts.push({lag:d.lag,tps:tps});if(pts.length>60)pts.shift();
    document.getElementById('live-lag').textContent=String(d.lag);
    document.getElementById('live-tps').textContent=tps.toFixed(1);
    document.getElementById('live-polls').textContent=String(Number(document.getElementById('live-polls').textContent)+1);
    draw();
  }catch(e){document.getElementById('live').textContent='poll failed: '+e;}
}
poll();setInterval(poll,Number(cv.dataset.interval||2000));
})();
"""

TPS_CHART_PATH = "/static/tps.js"

# TPS history since the page was opened: polls a JSON endpoint that answers {"time": ms, "tps": {name:
# value}} (rates the broker computed) and/or {"counters": {name: total}} (rates taken here, as the
# change between polls), and draws one line per name. Values reach the page only as numbers.
TPS_JS = """
(function(){
const cv=document.getElementById('tps-chart'),ctx=cv.getContext('2d');
const src=cv.dataset.src,colors=['#2874a6','#c0392b','#27ae60','#8e44ad','#d68910'],hist={};
let prev=null,n=0;
function draw(){
  const w=cv.width,h=cv.height,pad=40,names=Object.keys(hist);ctx.clearRect(0,0,w,h);
  const all=names.flatMap(k=>hist[k]),max=Math.max(1,...all);
  ctx.strokeStyle='#ddd';ctx.beginPath();ctx.moveTo(pad,10);ctx.lineTo(pad,h-20);
  ctx.lineTo(w-pad,h-20);ctx.stroke();
  names.forEach((k,j)=>{
    const pts=hist[k],c=colors[j%colors.length];ctx.strokeStyle=c;ctx.lineWidth=2;ctx.beginPath();
    pts.forEach((v,i)=>{const x=pad+(w-2*pad)*i/Math.max(1,pts.length-1),y=h-20-(h-30)*v/max;
      i?ctx.lineTo(x,y):ctx.moveTo(x,y);});
    ctx.stroke();ctx.fillStyle=c;ctx.fillText(k+' '+pts[pts.length-1].toFixed(1),pad+4+j*150,12);});
}
function show(name,v){
  if(!hist[name])hist[name]=[];hist[name].push(v);if(hist[name].length>120)hist[name].shift();
  const cell=document.querySelector('[data-series="'+CSS.escape(name)+'"]');
  if(cell)cell.textContent=v.toFixed(1);
}
async function poll(){
  try{
    const r=await fetch(src,{cache:'no-store'});const d=await r.json();
    if(d.error){document.getElementById('tps-live').textContent='error: '+d.error;return;}
    Object.entries(d.tps||{}).forEach(([k,v])=>show(k,Number(v)));
    if(prev&&d.time>prev.time)Object.entries(d.counters||{}).forEach(([k,v])=>
      show(k,Math.max(0,(v-(prev.counters[k]||0))*1000/(d.time-prev.time))));
    prev=d;n++;document.getElementById('tps-polls').textContent=String(n);draw();
  }catch(e){document.getElementById('tps-live').textContent='poll failed: '+e;}
}
poll();setInterval(poll,Number(cv.dataset.interval||2000));
})();
"""


def tps_chart(src: str, names: list[str]) -> str:
    """The canvas TPS_JS draws on, with one "now" cell per series."""
    cells = ", ".join(f'{esc(n)} <b data-series="{esc(n)}">-</b>' for n in names)
    return (
        f'<p id="tps-live">TPS now: {cells} '
        '(polls: <span id="tps-polls">0</span>, every 2 s; '
        "the history is kept by this page since it was opened)</p>"
        f'<canvas id="tps-chart" width="640" height="200" data-src="{esc(src)}" '
        'data-interval="2000"></canvas>'
    )
