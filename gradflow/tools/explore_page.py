"""The explorer's page: every view laid out by Graphviz as SVG, the data as JSON, and the page's own
script and style (gradflow/tools/explorer/), all in one HTML file that needs no network.

The views are laid out in one run of `dot` (it reads several graphs from one input and writes one
SVG after another). Each view's SVG and details sit in their own <script type="application/json">
block, parsed only when the view is opened, so a large model's page opens as fast as a small one's.
"""

import html
import json
import math
import re
import subprocess
from pathlib import Path

from gradflow.tools.graph import KINDS, MODULE, OP, layout_program

ASSETS = Path(__file__).parent / "explorer"
FONT = 14  # points of a node's name, one SVG unit each: at zoom 1 it is 14 px on screen
SMALL = FONT - 1  # a tensor's shape and an op's constants: at the page's least zoom (0.86) still 11 px
# A drawing taller than this (SVG units, px at zoom 1) is laid out in columns, at most MOST_COLUMNS, if
# they stay narrower than WIDEST: at the page's least zoom a laptop's 1366x768 shows about 700 x 650
TALLEST, MOST_COLUMNS, WIDEST = 700, 3, 1200
INSTALL = "install Graphviz (apt-get install graphviz, brew install graphviz, or pip install graphviz-pure)"


def _dot_string(text):
    """A DOT quoted string: only `"` and `\\` are special inside one."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tensor_label(info):
    """Its readable name over its shape: the numbers are in the panel, so that every box stays narrow."""
    shape = "(" + ", ".join(map(str, info["shape"])) + ("," if len(info["shape"]) == 1 else "") + ")"
    small = f'<font point-size="{SMALL}" color="#4b5563">{shape}</font>'
    return f"<<b>{html.escape(info['title'])}</b><br/>{small}>"


def _columns(view, k):
    """Each node's column when a tall view is drawn in k columns side by side: the ops in data-flow order
    cut into k runs, a tensor in the column of the op that makes it (else of its first reader)."""
    units = view["steps"]
    column = {u: n * k // len(units) for n, u in enumerate(units)}
    for _, tail, head in view["edges"]:
        if tail in column:
            column.setdefault(head, column[tail])
    for _, tail, head in view["edges"]:
        if head in column:
            column[tail] = min(column.get(tail, k), column[head])
    return column


def _dot_text(index, view, k=1):
    """One view as a DOT graph: node and edge ids are the page's, so a click finds its details. k > 1:
    in k columns, read top to bottom and then the next (an arrow into a later column does not rank it)."""
    column = _columns(view, k) if k > 1 and view["steps"] else {}
    lines = [
        f"digraph view{index} {{",
        '  graph [rankdir=TB fontname="Helvetica" nodesep=0.25 ranksep=0.3 bgcolor="transparent"]',
        f'  node [fontname="Helvetica" fontsize={FONT} style=filled]',
        "  edge [arrowsize=0.7 penwidth=1.2]",
    ]
    # (dot places the columns right to left in the order their nodes are written: the last column first)
    for nid, info in sorted(view["nodes"].items(), key=lambda item: -column.get(item[0], 0)):
        if info["kind"] == "tensor":
            attrs = (
                f'label={_tensor_label(info)} shape=box style="rounded,filled" fillcolor="{KINDS[info["tkind"]][0]}"'
            )
        elif info["kind"] == "op":
            extra = " peripheries=2" if info.get("view") is not None else ""
            attrs = f'label={info["label"]} shape=ellipse fillcolor="{OP}"{extra}'
        else:
            label = _dot_string(f"{info['name']} ({info['cls']})")
            attrs = f'label={label} shape=box3d fillcolor="{MODULE}"'
        lines.append(f'  {nid} [id="{nid}" {attrs}]')
    for eid, tail, head in view["edges"]:
        free = " constraint=false" if column.get(tail, 0) != column.get(head, 0) else ""
        lines.append(f'  {tail} -> {head} [id="{eid}"{free}]')
    lines.append("}")
    return "\n".join(lines)


def _clean_svg(svg):
    """Only the <svg> element: no XML prologue, comments or tooltips (node names), to keep the page small."""
    return re.sub(r"<!--.*?-->\n?|<title>.*?</title>\n?", "", svg[svg.index("<svg") :], flags=re.S).strip()


def _size(svg):
    """(width, height) of a drawing, from its viewBox."""
    return [float(v) for v in re.search(r'viewBox="([^"]*)"', svg).group(1).split()[2:]]


def lay_out(views):
    """The SVG of each view, laid out by Graphviz's dot in one run; a view too tall to read whole on a
    laptop's screen and narrow enough is laid out again in columns (_dot_text)."""
    svgs = _run_dot([_dot_text(i, v) for i, v in enumerate(views)], len(views))
    tall = {}
    for i, svg in enumerate(svgs):
        width, height = _size(svg)
        k = min(math.ceil(height / TALLEST), MOST_COLUMNS)
        if k > 1 and width * k < WIDEST:
            tall[i] = _dot_text(i, views[i], k)
    for i, svg in zip(tall, _run_dot(list(tall.values()), len(tall)) if tall else []):
        svgs[i] = svg
    return svgs


def _run_dot(sources, count):
    """Graphviz's dot on several DOT graphs at once: one cleaned SVG each."""
    try:
        program = layout_program()
    except RuntimeError:
        raise OSError(f"explore: laying out the graph needs Graphviz's `dot`, which was not found: {INSTALL}") from None
    source = "\n".join(sources)
    done = subprocess.run([program, "-Tsvg"], input=source.encode("utf-8"), capture_output=True)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise OSError(f"explore: {Path(program).name} could not lay out the graph: {message}")
    svgs = done.stdout.decode("utf-8").split("<?xml")
    svgs = [s for s in svgs if "<svg" in s]
    if len(svgs) != count:
        raise OSError(f"explore: {Path(program).name} wrote {len(svgs)} drawings for {count} views")
    return [_clean_svg(s) for s in svgs]


# Inside <script> the HTML parser ends the block at `</script` and enters an "escaped" state at
# `<!--`; JSON may write any character as \uXXXX, so these never appear in the page's text.
SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def _json(value):
    """JSON that can sit inside a <script> element, whatever its strings hold: no `<`, `>` or `&`."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).translate(SCRIPT_SAFE)


DETAILS = ("data", "grad", "arrivals")  # a tensor's numbers: written once, however many views show it


def page_html(data, views):
    """The whole page: data, one JSON block per view (with its SVG) and per tensor's numbers, script
    and style inlined."""
    svgs = lay_out(views)
    data = dict(data, views=[{"title": v["title"], "parent": v["parent"]} for v in views])
    blocks = [f'<script type="application/json" id="gf-data">{_json(data)}</script>']
    numbers = {}
    for i, (view, svg) in enumerate(zip(views, svgs)):
        nodes = {}
        for nid, info in view["nodes"].items():
            if info["kind"] == "tensor":
                numbers.setdefault(nid, {k: info[k] for k in DETAILS})
                info = {k: v for k, v in info.items() if k not in DETAILS and k != "label"}
            nodes[nid] = {k: v for k, v in info.items() if k != "label"}
        body = {"svg": svg, "nodes": nodes, "edges": view["edges"], "steps": view["steps"]}
        blocks.append(f'<script type="application/json" id="gf-view-{i}">{_json(body)}</script>')
    for nid, details in numbers.items():
        blocks.append(f'<script type="application/json" id="gf-numbers-{nid}">{_json(details)}</script>')
    page = (ASSETS / "page.html").read_text(encoding="utf-8")
    style = (ASSETS / "explorer.css").read_text(encoding="utf-8")
    script = (ASSETS / "explorer.js").read_text(encoding="utf-8")
    parts = {
        "{{title}}": html.escape(data["title"]),
        "/*{{style}}*/": style,
        "<!--{{data}}-->": "\n".join(blocks),
        "/*{{script}}*/": script,
    }
    # one pass, so that nothing inserted (a title, a name in the data) is read as a placeholder
    return re.sub("|".join(re.escape(k) for k in parts), lambda m: parts[m.group(0)], page)
