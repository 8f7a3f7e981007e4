"""The explorer's page: every view laid out by Graphviz as SVG, the data as JSON, and the page's own
script and style (gradflow/tools/explorer/), all in one HTML file that needs no network.

The views are laid out in one run of `dot` (it reads several graphs from one input and writes one
SVG after another). Each view's SVG and details sit in their own <script type="application/json">
block, parsed only when the view is opened, so a large model's page opens as fast as a small one's.
"""

import html
import json
import re
import subprocess
from pathlib import Path

from gradflow.tools.graph import KINDS, MODULE, OP, layout_program

ASSETS = Path(__file__).parent / "explorer"
FONT = 14  # points of a node's name, one SVG unit each: at zoom 1 it is 14 px on screen
SMALL = FONT - 1  # a tensor's shape and an op's constants: at the page's least zoom (0.86) still 11 px
INSTALL = "install Graphviz (apt-get install graphviz, brew install graphviz, or pip install graphviz-pure)"


def _dot_string(text):
    """A DOT quoted string: only `"` and `\\` are special inside one."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tensor_label(info):
    """Its readable name over its shape: the numbers are in the panel, so that every box stays narrow."""
    shape = "(" + ", ".join(map(str, info["shape"])) + ("," if len(info["shape"]) == 1 else "") + ")"
    small = f'<font point-size="{SMALL}" color="#4b5563">{shape}</font>'
    return f"<<b>{html.escape(info['title'])}</b><br/>{small}>"


def _dot_text(index, view):
    """One view as a DOT graph: node and edge ids are the page's, so a click finds its details."""
    lines = [
        f"digraph view{index} {{",
        '  graph [rankdir=TB fontname="Helvetica" nodesep=0.25 ranksep=0.3 bgcolor="transparent"]',
        f'  node [fontname="Helvetica" fontsize={FONT} style=filled]',
        "  edge [arrowsize=0.7 penwidth=1.2]",
    ]
    for nid, info in view["nodes"].items():
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
        lines.append(f'  {tail} -> {head} [id="{eid}"]')
    lines.append("}")
    return "\n".join(lines)


def _clean_svg(svg):
    """Only the <svg> element: no XML prologue, comments or tooltips (node names), to keep the page small."""
    return re.sub(r"<!--.*?-->\n?|<title>.*?</title>\n?", "", svg[svg.index("<svg") :], flags=re.S).strip()


def lay_out(views):
    """The SVG of each view, laid out by Graphviz's dot in one run."""
    try:
        program = layout_program()
    except RuntimeError:
        raise OSError(f"explore: laying out the graph needs Graphviz's `dot`, which was not found: {INSTALL}") from None
    source = "\n".join(_dot_text(i, v) for i, v in enumerate(views))
    done = subprocess.run([program, "-Tsvg"], input=source.encode("utf-8"), capture_output=True)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        raise OSError(f"explore: {Path(program).name} could not lay out the graph: {message}")
    svgs = done.stdout.decode("utf-8").split("<?xml")
    svgs = [s for s in svgs if "<svg" in s]
    if len(svgs) != len(views):
        raise OSError(f"explore: {Path(program).name} wrote {len(svgs)} drawings for {len(views)} views")
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
