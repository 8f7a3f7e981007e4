// gradflow explorer: shows what Python computed (gradflow/tools/explore.py); computes nothing itself.
// Data: #gf-data (views' titles, attention maps, training), #gf-view-N (one view: svg, nodes, edges,
// steps), parsed when the view is first opened.
"use strict";

const DATA = JSON.parse(document.getElementById("gf-data").textContent);
const views = {};
const state = { view: null, index: -1, step: -1, selected: null, box: null, tour: null };

function view(i) {
  if (!(i in views)) views[i] = JSON.parse(document.getElementById("gf-view-" + i).textContent);
  return views[i];
}

function numbers(info, id) {
  // a tensor's values, gradient and arrivals, written once in the page, read on its first click
  if (!("data" in info)) Object.assign(info, JSON.parse(document.getElementById("gf-numbers-" + id).textContent));
  return info;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c != null) e.append(c);
  return e;
}

// --- numbers --------------------------------------------------------------------------------------

function fmt(v) {
  if (typeof v === "string") return v;
  if (v === 0) return "0";
  const a = Math.abs(v);
  return a >= 1e4 || a < 1e-3 ? v.toExponential(3) : Number(v.toPrecision(4)).toString();
}

function colour(v, scale, signed) {
  if (typeof v === "string") return "#000";
  const x = Math.max(-1, Math.min(1, scale ? v / scale : 0));
  if (!signed) return `rgb(${Math.round(255 - 218 * x)},${Math.round(255 - 156 * x)},${Math.round(255 - 20 * x)})`;
  const w = Math.round(255 * (1 - 0.6 * Math.abs(x)));  // light enough for the number on it
  return x >= 0 ? `rgb(255,${w},${w})` : `rgb(${w},${w},255)`;
}

function maxAbs(values) {
  let m = 0;
  for (const v of values) if (typeof v === "number" && Math.abs(v) > m) m = Math.abs(v);
  return m;
}

function statsLine(s, stacked) {
  if (!s) return null;
  const parts = ["min", "max", "mean", "std", "norm"].filter(k => k in s).map(k => `${k} ${fmt(s[k])}`);
  if (s.nan) parts.push(`NaN ×${s.nan}`);
  if (s.inf) parts.push(`inf ×${s.inf}`);
  return el("div", { class: "stats", text: parts.join(stacked ? "\n" : "   ") });
}

function flatIndex(shape, at) {
  return at ? at.reduce((i, k, n) => i * shape[n] + k, 0) : -1;
}

function valuesTable(shape, values, cls, mark) {
  // the last axis across, everything before it down; each cell tinted by its value, the worked one ringed
  const cols = shape.length ? shape[shape.length - 1] : 1;
  const scale = maxAbs(values);
  const table = el("table", { class: "values " + cls });
  const worked = flatIndex(shape, mark);
  for (let r = 0; r * cols < Math.max(values.length, 1) && values.length; r++) {
    const tr = el("tr");
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      const td = el("td", { "data-i": i, style: `background:${colour(values[i], scale, true)}`, text: fmt(values[i]) });
      if (i === worked) td.classList.add("worked");
      tr.append(td);
    }
    table.append(tr);
  }
  return table;
}

function heatCanvas(rows, cols, values, signed, cell, mark, tall, fixed) {
  // mark: [row, col] of the worked element, ringed; tall: the most pixels the map may take down; fixed:
  // the size that is full colour (else the largest of values), one for every map that is compared
  const scale = signed ? fixed || maxAbs(values) : 1;
  cell = cell || Math.max(2, Math.min(14, Math.floor((tall ? 180 : 320) / cols), Math.floor((tall || 320) / rows)));
  const c = el("canvas", { class: "heat", width: cols * cell, height: rows * cell });
  const g = c.getContext("2d");
  for (let r = 0; r < rows; r++)
    for (let k = 0; k < cols; k++) {
      g.fillStyle = colour(values[r * cols + k], scale, signed);
      g.fillRect(k * cell, r * cell, cell, cell);
    }
  if (mark) {
    c.dataset.mark = mark.join(",");
    g.strokeStyle = "#111827";
    g.lineWidth = 2;
    const [r, k] = mark, pad = Math.max(2, cell / 2);
    g.strokeRect(k * cell - pad + 1, r * cell - pad + 1, cell + 2 * pad - 2, cell + 2 * pad - 2);
  }
  return c;
}

function scaleBar(values, fixed) {
  // what the colours mean: blue at -max, white at 0, red at +max (fixed: that max)
  const m = fixed || maxAbs(values);
  return el("div", { class: "scale" }, el("span", { text: fmt(-m) }), el("i"), el("span", { text: "0" }), el("i", { class: "pos" }), el("span", { text: fmt(m) }));
}

function histogram(h) {
  const W = 300, H = 60, n = h.counts.length, top = Math.max(...h.counts, 1);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "hist");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H + 14);
  h.counts.forEach((count, i) => {
    const r = document.createElementNS(ns, "rect");
    const hgt = (H * count) / top;
    r.setAttribute("x", (i * W) / n);
    r.setAttribute("y", H - hgt);
    r.setAttribute("width", W / n - 1);
    r.setAttribute("height", hgt);
    svg.append(r);
  });
  for (const [x, text, anchor] of [[0, fmt(h.lo), "start"], [W, fmt(h.hi), "end"]]) {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", x);
    t.setAttribute("y", H + 12);
    t.setAttribute("font-size", "10");
    t.setAttribute("text-anchor", anchor);
    t.textContent = text;
    svg.append(t);
  }
  return svg;
}

const WIDEST = 8, NARROW = 6;  // columns the panel shows as numbers, and a step's column of the panel

function arrayView(s, cls, compact, mark) {
  // every number of a small array; a heat map (with its scale), a histogram and statistics of a large
  // one. compact: for a step's panel, so that its three stages fit one screen: a heat map of anything
  // more than a few rows, beside its statistics, no histogram. mark: the worked element, ringed.
  if (!s) return el("p", { class: "hint", text: "none (no gradient reached it, or backward has not run)" });
  const box = el("div", { class: "array " + cls + (compact ? " compact" : "") });
  if (s.note) box.append(el("p", { class: "hint", text: s.note }));
  const cols = s.shape.length ? s.shape[s.shape.length - 1] : 1;
  const tall = compact ? 96 : 320;
  const side = el("div", { class: "side" });
  const widest = compact ? NARROW : WIDEST;
  if (s.values && (cols > widest || (compact && s.values.length > 4 * widest))) {  // too wide for numbers in the panel: a heat map of every one
    const rows = s.values.length / cols, at = mark ? flatIndex(s.shape, mark) : -1;
    side.append(el("div", { class: "hint", text: `all ${s.values.length} numbers, rows of ${cols}` }));
    box.append(el("div", { class: "map" }, heatCanvas(rows, cols, s.values, true, 0, at >= 0 ? [Math.floor(at / cols), at % cols] : null, tall), scaleBar(s.values)), side);
  } else if (s.values) box.append(valuesTable(s.shape, s.values, cls, mark));
  if (s.heat) {
    const shape = s.shape, h = s.heat;
    const lead = shape.length > 2 ? `[${(h.lead || shape.slice(0, -2).map(() => 0)).join(", ")}, :, :]` : "the matrix";
    const every = shape.length >= 2 && h.rows.length < shape[shape.length - 2] ? `, every ${Math.round(shape[shape.length - 2] / h.rows.length)}th row` : "";
    side.append(el("div", { class: "hint", text: `heat map of ${lead}${every}` }));
    box.append(el("div", { class: "map" }, heatCanvas(h.rows.length, h.cols.length, h.values, true, 0, h.mark, tall), scaleBar(h.values)), side);
  }
  if (s.marked) side.append(el("div", { class: "marked", text: `ringed: [${s.marked.at.join(", ")}] = ${fmt(s.marked.value)}` }));
  if (s.hist && !compact) box.append(histogram(s.hist));
  (side.childNodes.length ? side : box).append(statsLine(s.stats, compact));
  return box;
}

// --- the graph: showing a view, pan and zoom --------------------------------------------------------

const canvas = document.getElementById("canvas");
const pane = document.getElementById("graph-pane");

function svgElement() { return canvas.querySelector("svg"); }

function setBox(b) {
  state.box = b;
  svgElement().setAttribute("viewBox", `${b.x} ${b.y} ${b.w} ${b.h}`);
}

// px on screen per SVG unit; a node's name is FONT units (explore_page.py), so READABLE keeps it >= 12 px
const READABLE = 0.86, LARGEST = 1.5, PAD = 16;

function zoomNow() {
  const r = canvas.getBoundingClientRect(), b = state.box;
  return Math.min(r.width / b.w, r.height / b.h);
}

function frame(cx, top, z) {
  // a box of the canvas's shape at zoom z, centred across on cx, its top edge at `top` (SVG units)
  const r = canvas.getBoundingClientRect();
  setBox({ x: cx - r.width / z / 2, y: top, w: r.width / z, h: r.height / z });
}

function fit() {
  // the whole drawing if it is readable so; else as much as is, from its top, where the inputs are
  const [x, y, w, h] = state.drawn;
  const r = canvas.getBoundingClientRect();
  const whole = Math.min(r.width / (w + 2 * PAD), r.height / (h + 2 * PAD));
  const z = Math.max(READABLE, Math.min(LARGEST, whole));
  const top = z === whole ? y - PAD - (r.height / z - h - 2 * PAD) / 2 : y - PAD;
  frame(x + w / 2, top, z);
}

function zoom(factor, cx, cy) {
  const b = state.box;
  const r = canvas.getBoundingClientRect();
  const svg = svgElement();
  // the point under the cursor stays put: map it through the current viewBox (preserveAspectRatio meet)
  const s = Math.max(b.w / r.width, b.h / r.height);
  const ox = b.x - (r.width * s - b.w) / 2, oy = b.y - (r.height * s - b.h) / 2;
  const px = ox + (cx - r.left) * s, py = oy + (cy - r.top) * s;
  setBox({ x: px - (px - b.x) * factor, y: py - (py - b.y) * factor, w: b.w * factor, h: b.h * factor });
  void svg;
}

pane.addEventListener("wheel", e => {
  // the wheel scrolls a tall graph like a page; with Ctrl (or a trackpad's pinch) it zooms
  e.preventDefault();
  if (e.ctrlKey || e.metaKey) zoom(e.deltaY > 0 ? 1.15 : 1 / 1.15, e.clientX, e.clientY);
  else {
    const b = state.box, z = zoomNow();
    setBox({ x: b.x + e.deltaX / z, y: b.y + e.deltaY / z, w: b.w, h: b.h });
  }
}, { passive: false });

let drag = null;
pane.addEventListener("mousedown", e => {
  if (e.target.closest("#bar")) return;
  drag = { x: e.clientX, y: e.clientY, box: state.box, moved: false };
});
window.addEventListener("mousemove", e => {
  if (!drag) return;
  const r = canvas.getBoundingClientRect();
  const s = Math.max(drag.box.w / r.width, drag.box.h / r.height);
  const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
  if (Math.abs(dx) + Math.abs(dy) > 3) { drag.moved = true; pane.classList.add("dragging"); }
  if (drag.moved) setBox({ x: drag.box.x - dx * s, y: drag.box.y - dy * s, w: drag.box.w, h: drag.box.h });
});
window.addEventListener("mouseup", () => {
  pane.classList.remove("dragging");
  setTimeout(() => { drag = null; }, 0);
});
document.getElementById("zoom-in").onclick = () => { const r = canvas.getBoundingClientRect(); zoom(1 / 1.3, r.left + r.width / 2, r.top + r.height / 2); };
document.getElementById("zoom-out").onclick = () => { const r = canvas.getBoundingClientRect(); zoom(1.3, r.left + r.width / 2, r.top + r.height / 2); };
document.getElementById("zoom-fit").onclick = fit;

canvas.addEventListener("click", e => {
  if (drag && drag.moved) return;
  const g = e.target.closest("g.node");
  if (!g) return;
  const info = state.view.nodes[g.id];
  if (info.kind === "module") openView(info.view);
  else select(g.id);
});

function units(rect) {
  // a screen rectangle in the drawing's units
  const r = canvas.getBoundingClientRect(), b = state.box, z = zoomNow();
  const ox = b.x - (r.width / z - b.w) / 2, oy = b.y - (r.height / z - b.h) / 2;
  return { left: ox + (rect.left - r.left) / z, right: ox + (rect.right - r.left) / z, top: oy + (rect.top - r.top) / z, bottom: oy + (rect.bottom - r.top) / z };
}

function centreOn(ids) {
  // these nodes (an op, its inputs and output) in the middle, zoomed out only as far as they need
  const rs = ids.map(id => document.getElementById(id)).filter(Boolean).map(e => units(e.getBoundingClientRect()));
  if (!rs.length) return;
  const left = Math.min(...rs.map(q => q.left)), right = Math.max(...rs.map(q => q.right));
  const top = Math.min(...rs.map(q => q.top)), bottom = Math.max(...rs.map(q => q.bottom));
  const r = canvas.getBoundingClientRect();
  const need = Math.min(r.width / (right - left + 2 * PAD), r.height / (bottom - top + 2 * PAD));
  const z = Math.min(Math.max(zoomNow(), READABLE), need);
  frame((left + right) / 2, (top + bottom) / 2 - r.height / z / 2, z);
}

function bringIntoView(g) { centreOn([g.id]); }

function openView(i) {
  state.index = i;
  state.view = view(i);
  state.step = -1;
  state.selected = null;
  canvas.innerHTML = state.view.svg;
  const svg = svgElement();
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  state.drawn = svg.getAttribute("viewBox").trim().split(/[\s,]+/).map(Number);
  crumbs();  // first: the bar takes its height from the canvas that fit() measures
  fit();
  showStep();
  const p = document.getElementById("panel");
  p.innerHTML = "";
  const title = DATA.views[i].title;
  p.append(el("h2", { text: title }));
  p.append(el("p", { class: "hint", text: "Click a tensor (box) for its values and gradient, an op (oval) for its formula, a module (3-D box) to open it; a double-bordered op is fused and opens into its primitive ops. Drag or scroll to move, Ctrl+scroll to zoom; → and ← step through forward and backward, b jumps to the backward pass, Esc goes up." }));
}

function crumbs() {
  const chain = [];
  for (let i = state.index; i != null; i = DATA.views[i].parent) chain.unshift(i);
  const box = document.getElementById("crumbs");
  box.innerHTML = "";
  chain.forEach((i, n) => {
    if (n) box.append(el("span", { class: "sep", text: "›" }));
    box.append(el("a", { "data-view": i, text: DATA.views[i].title, onclick: () => openView(i) }));
  });
}

function legend() {
  const box = document.getElementById("legend");
  for (const [kind, [fill, text]] of Object.entries(DATA.kinds)) {
    const cls = kind === "op" ? "op" : "";
    box.append(el("div", {}, el("i", { class: cls, style: `background:${fill}` }), text));
  }
  box.append(el("div", {}, el("i", { class: "fused", style: `background:${DATA.kinds.op[0]}` }), "fused op: click, then open it"));
  box.append(el("div", {}, el("i", { class: "flow" }), "forward step: data flows in"));
  box.append(el("div", {}, el("i", { class: "grad" }), "backward step: gradient flows back"));
}

// --- the panel: what a click shows ------------------------------------------------------------------

function nodeLink(id) {
  const info = state.view.nodes[id];
  const text = info ? (info.kind === "op" ? info.name : info.kind === "tensor" ? info.title + " " + JSON.stringify(info.shape) : info.name) : id;
  return info ? el("a", { class: "node", "data-node": id, text, onclick: () => select(id) }) : el("span", { text: id + " (in another view)" });
}

function select(id) {
  state.selected = id;
  for (const g of canvas.querySelectorAll("g.node.selected")) g.classList.remove("selected");
  const g = document.getElementById(id);
  if (g) g.classList.add("selected");
  const info = state.view.nodes[id];
  const p = document.getElementById("panel");
  p.innerHTML = "";
  const note = stepNote(id);
  p.classList.toggle("stepping", note != null || info.kind === "op");
  if (note) p.append(note);
  if (info.kind === "tensor") tensorPanel(p, id, numbers(info, id));
  else opPanel(p, id, info);
}

function tensorPanel(p, id, info) {
  p.append(el("h2", { text: info.title }));
  p.append(el("div", { class: "meta" }, "shape ", el("code", { text: "(" + info.shape.join(", ") + (info.shape.length === 1 ? ",)" : ")") }), " · dtype ", el("code", { text: info.dtype }), " · " + DATA.kinds[info.tkind][1] + (info.module ? " · in " : ""), info.module ? el("code", { text: info.module }) : null));
  p.append(el("h3", { text: "value" }));
  p.append(arrayView(info.data, "data"));
  p.append(el("h3", { text: "gradient dL/d(" + info.title + ")" }));
  p.append(arrayView(info.grad, "grad"));
  if (info.arrivals) p.append(el("h3", { text: `its gradient arrives in ${info.arrivals.length} shares, one per use` }), sharesOf(info));
  const made = info.made_by ? el("div", {}, "made by ", nodeLink(info.made_by)) : el("div", { text: "a leaf: no op made it" });
  p.append(el("h3", { text: "in the graph" }), made);
  if (info.used_by.length) p.append(el("div", {}, "read by ", ...info.used_by.flatMap((o, n) => (n ? [", ", nodeLink(o)] : [nodeLink(o)]))));
}

function tensorAt(id) {
  // a tensor's title and numbers, whether or not the view draws it
  const info = state.view.nodes[id];
  if (info) return numbers(info, id);
  const block = document.getElementById("gf-numbers-" + id);
  return block ? Object.assign({ title: "a tensor of another view" }, JSON.parse(block.textContent)) : null;
}

function named(id, prefix) {
  const info = state.view.nodes[id];
  return el("div", { class: "named" }, prefix || "", info ? nodeLink(id) : el("span", { text: "(in another view)" }));
}

function opPanel(p, id, info) {
  // what the op does on this step: forward, the values in, its formula, the value out; backward, the
  // gradient in, the local rule worked through on one element, the gradient out to each input
  const n = steps().length, k = state.step;
  const back = !(k >= 0 && k < n && currentOp() === id);
  const out = tensorAt(info.output);
  const head = el("h2", { text: info.name + (out ? " → " + out.title : "") }, info.module ? el("span", { class: "meta" }, " in ", el("code", { text: info.module })) : null);
  p.append(head);
  if (info.view != null) {
    const c = info.check || {};
    head.append(" ", el("button", { id: "decompose", class: "primary", text: "open as primitive ops ⊕", onclick: () => openView(info.view),
      title: `the same numbers: largest difference ${fmt(c.value)} in value` + ("grad" in c ? `, ${fmt(c.grad)} in gradient` : "") }));
  } else if (info.fused) {
    p.append(el("div", { class: "hint", text: "fused; only the first ones of a large graph are opened (explore's max_decompositions)" }));
  }
  const inputs = info.inputs.map((t, i) => [t, i]).filter(([t]) => t != null);
  const left = el("div", { class: "column" }), right = el("div", { class: "column" });  // ① ② | ③
  p.append(el("div", { class: "columns" }, left, right));
  if (!back) {
    const box = el("section", { class: "stage stage-in" }, el("h3", { text: "① values in" }));
    for (const [t, i] of inputs) {
      const x = tensorAt(t);
      box.append(named(t, info.input_names[i] + " = "), x ? arrayView(x.data, "data in-" + i, true) : null);
    }
    left.append(box);
    left.append(el("section", { class: "stage stage-rule" }, el("h3", { text: "② the formula" }), ...formula(info.doc)));
    right.append(el("section", { class: "stage stage-out" }, el("h3", { text: "③ value out" }), named(info.output), out ? arrayView(out.data, "data out", true) : null));
  } else {
    const title = out ? out.title : "out";
    left.append(el("section", { class: "stage stage-in" }, el("h3", { text: `① gradient in: g = dL/d(${title})` }), out ? arrayView(out.grad, "grad in", true) : null));
    const worked = info.worked && info.worked.length;
    const rule = el("section", { class: "stage stage-rule" }, el("h3", { text: "② the local rule" + (worked ? ", on one element of each gradient out (ringed in ③)" : "") }));
    const [text, whole] = formula(info.doc, true);
    rule.append(text);
    if (worked) rule.append(el("pre", { class: "worked", text: info.worked.map(w => w.lines.join("\n")).join("\n") }));
    if (whole) rule.append(whole);
    left.append(rule);
    const marks = Object.fromEntries((info.worked || []).map(w => [w.input, w.at]));
    const box = el("section", { class: "stage stage-out" }, el("h3", { text: "③ gradient out, to each input" }));
    for (const [t, i] of inputs) {
      const x = tensorAt(t);
      box.append(named(t, `${info.input_names[i]}: to `));
      if (info.shares[i]) box.append(arrayView(info.shares[i], "share share-" + i, true, marks[i]));
      else box.append(el("div", { class: "hint", text: "no gradient sent (a constant, or backward has not run)" }));
      if (x && x.arrivals && inputs.filter(([u]) => u === t).pop()[1] === i) box.append(sharesOf(x, true));  // once, for x * x
    }
    right.append(box);
  }
  if (info.fast) left.append(el("div", { class: "note", text: "run by the fast tier's kernel: " + info.fast }));
  if (info.params.length) left.append(el("div", { class: "stats constants", text: "constants: " + info.params.join(", ") }));
}

// a docstring's line that states a gradient: it starts dL/dx =, dx =, dy_i/dx_j =, d loss_n / d z_nc =
const RULE = /^\s*(d[\w/]*|d loss\w*\s*\/\s*d\s?\w+)\s*=/;

function formula(doc, backward) {
  // forward: the docstring's first paragraph (the formula); backward: its lines that state a gradient
  // (the first paragraph if none does); and the whole docstring, folded, so that the step fits one screen
  const first = doc.split("\n\n")[0];
  const lines = doc.split("\n");
  const stated = lines.filter(line => RULE.test(line));
  const rule = !backward ? "" : (stated.length ? stated : lines.filter(line => line.includes("dL/d")))
    .map(line => line.trim().split(/\s{4,}/)[0]).join("\n");  // a column of remarks after the formula left out
  const whole = doc !== (rule || first) ? el("details", {}, el("summary", { text: "the whole docstring" }), el("pre", { text: doc })) : null;
  return [el("pre", { text: rule || first }), whole];
}

function sharesOf(x, compact) {
  // a tensor read by several ops: each one's share of its gradient, summed in the order backward adds them
  // (compact, in a step's panel: a share and the running sum on one line, a large one by its norm)
  const box = el("div", { class: "arrivals-box" }, el("div", { class: "hint", text: `${x.title} is read by ${x.arrivals.length} ops: its gradient is the sum of their shares` }));
  const ul = el("ul", { class: "arrivals" + (compact ? " compact" : "") });
  x.arrivals.forEach(([op, share, sum], n) => {
    const li = el("li", { "data-op": op }, `share ${n + 1} from `, nodeLink(op), ": ", brief(share, compact));
    li.append(compact ? " ⇒ sum " : el("br"), compact ? "" : "sum so far: ", brief(sum, compact));
    if (currentOp() === op) li.classList.add("now");
    ul.append(li);
  });
  box.append(ul);
  return box;
}

function brief(s, compact) {
  const shown = compact ? 3 : 6;
  if (s.values) return el("code", { text: s.values.slice(0, shown).map(fmt).join(", ") + (s.values.length > shown ? ", …" : "") });
  return compact ? el("code", { text: "norm " + fmt(s.stats.norm) }) : statsLine(s.stats);
}

// --- step mode: forward in data-flow order, then backward in reverse -------------------------------

function steps() { return state.view.steps; }
function currentOp() {
  const n = steps().length, k = state.step;
  if (k < 0) return null;
  return k < n ? steps()[k] : steps()[2 * n - 1 - k];
}

function stepNote(id) {
  const n = steps().length, k = state.step;
  if (k < 0 || currentOp() !== id) return null;
  const back = k >= n;
  const text = back ? `backward step ${k - n + 1} of ${n}: the gradient flows back along the red arrows`
    : `forward step ${k + 1} of ${n}: the inputs flow in along the blue arrows`;
  return el("div", { class: "step" + (back ? "" : " forward"), text });
}

function showStep() {
  const svg = svgElement();
  for (const c of ["current", "forward", "flow", "grad", "future", "arrived"])
    for (const e of svg.querySelectorAll("." + c)) e.classList.remove(c);
  const n = steps().length, k = state.step;
  const status = document.getElementById("status");
  document.getElementById("panel").classList.toggle("stepping", k >= 0);  // before centring: it narrows the graph
  if (k < 0) { status.textContent = `step mode: ${n} step${n === 1 ? "" : "s"} each way, press →`; return; }
  const back = k >= n;
  const unit = currentOp();
  const pos = back ? 2 * n - 1 - k : k;
  const order = new Map(steps().map((u, i) => [u, i]));
  const producer = {};
  for (const [, tail, head] of state.view.edges) if (order.has(tail)) producer[head] = tail;
  for (const [eid, tail, head] of state.view.edges) {
    const e = document.getElementById(eid);
    if (!back && head === unit) e.classList.add("flow");
    if (!back && tail === unit) e.classList.add("flow");
    if (back && head === unit) e.classList.add("grad");
    const u = order.has(tail) ? tail : head;
    if (!back && order.get(u) > pos) e.classList.add("future");
    if (back && order.get(u) < pos) e.classList.add("future");
  }
  for (const [id] of Object.entries(state.view.nodes)) {
    const g = document.getElementById(id);
    if (!g) continue;
    const i = order.has(id) ? order.get(id) : producer[id] != null ? order.get(producer[id]) : -1;
    if (!back && i > pos) g.classList.add("future");
    if (back && order.has(id) && i < pos) g.classList.add("future");
  }
  const g = document.getElementById(unit);
  g.classList.add("current");
  const near = state.view.edges.filter(([, t, h]) => t === unit || h === unit).map(([, t, h]) => (t === unit ? h : t));
  centreOn([unit, ...near]);
  if (!back) g.classList.add("forward");
  const info = state.view.nodes[unit];
  const made = info.kind === "op" && state.view.nodes[info.output];
  const name = info.kind === "op" ? info.name + (made ? " → " + made.title : "") : info.name + " (module)";
  status.textContent = (back ? "backward " + (k - n + 1) : "forward " + (k + 1)) + " / " + n + ": " + name;
  status.dataset.unit = unit;
  if (info.kind === "op") select(unit);
  else modulePanel(unit, info, back);
}

function modulePanel(unit, info, back) {
  // a collapsed module's step: on backward, the gradient its output brings and the gradient it sends to
  // each input and each of its parameters (its ops' shares, summed)
  const p = document.getElementById("panel");
  p.innerHTML = "";
  p.classList.add("stepping");
  p.append(stepNote(unit), el("h2", { text: info.name + " (" + info.cls + ")" }), el("p", { class: "hint", text: "a module: click it to open its own view and step through its ops" }));
  if (!back || !info.sends) return;
  const left = el("div", { class: "column" }), right = el("div", { class: "column" });
  const outs = state.view.edges.filter(([, t]) => t === unit).map(([, , h]) => h);
  const stageIn = el("section", { class: "stage stage-in" }, el("h3", { text: "① gradient in, to its output" }));
  for (const o of outs) { const x = tensorAt(o); stageIn.append(named(o, "g = dL/d "), x ? arrayView(x.grad, "grad in", true) : null); }
  const stageOut = el("section", { class: "stage stage-out" }, el("h3", { text: "③ gradient out, to its inputs and its parameters" }));
  const params = el("table", { class: "params" }, el("tr", {}, el("th", { text: "parameter" }), el("th", { text: "shape" }), el("th", { text: "‖dL/dw‖" }), el("th", { text: "max |dL/dw|" })));
  for (const s of info.sends) {
    if (s.id) stageOut.append(named(s.id, "to "), arrayView(s.share, "share", true));
    else {
      const st = s.share.stats, big = Math.max(Math.abs(st.min), Math.abs(st.max));
      params.append(el("tr", {}, el("td", { text: s.to.startsWith(info.name + ".") ? s.to.slice(info.name.length + 1) : s.to, title: s.to }), el("td", { text: s.share.shape.join("×") }), el("td", { text: fmt(st.norm) }), el("td", { text: fmt(big) })));
    }
  }
  if (params.rows.length > 1) stageOut.append(params);
  left.append(stageIn, el("section", { class: "stage stage-rule" }, el("h3", { text: "② inside" }), el("p", { class: "hint", text: "the chain rule through each of its ops in turn: open it (click) to step through them" })));
  right.append(stageOut);
  p.append(el("div", { class: "columns" }, left, right));
}

function step(d) {
  const n = steps().length;
  if (!n) return;
  state.step = Math.max(-1, Math.min(2 * n - 1, state.step + d));
  showStep();
}

document.getElementById("step-next").onclick = () => step(1);
document.getElementById("step-prev").onclick = () => step(-1);
document.getElementById("step-reset").onclick = () => { state.step = -1; showStep(); };
document.getElementById("to-backward").onclick = () => { state.step = steps().length; showStep(); };
document.addEventListener("keydown", e => {
  if (e.target.closest && e.target.closest("input")) return;
  if (e.key === "ArrowRight") step(1);
  else if (e.key === "ArrowLeft") step(-1);
  else if (e.key === "Home") { state.step = -1; showStep(); }
  else if (e.key === "b") { state.step = steps().length; showStep(); }
  else if (e.key === "Escape" && state.tour != null) leaveTour();
  else if (e.key === "Escape" && DATA.views[state.index].parent != null) openView(DATA.views[state.index].parent);
  else return;
  e.preventDefault();
});

// --- the guided tour: captioned stops (explore_tour.py), each opening a view at a node -----------------

function tourAt(k) {
  const stops = DATA.tour;
  state.tour = k;
  const s = stops[k];
  document.getElementById("tour").hidden = false;  // first: the strip takes height from the graph
  if (state.index !== s.view) openView(s.view);
  const i = steps().indexOf(s.node), n = steps().length;
  state.step = s.step && i >= 0 ? (s.step === "forward" ? i : 2 * n - 1 - i) : -1;
  showStep();
  if (state.step < 0) { select(s.node); centreOn([s.node]); }
  for (const g of canvas.querySelectorAll("g.node.toured")) g.classList.remove("toured");
  const g = document.getElementById(s.node);
  if (g) g.classList.add("toured");
  document.getElementById("tour-count").textContent = `${k + 1} / ${stops.length}`;
  document.getElementById("tour-caption").textContent = s.caption;
  document.getElementById("tour-prev").disabled = k === 0;
  document.getElementById("tour-next").disabled = k === stops.length - 1;
}

function leaveTour() {
  state.tour = null;
  document.getElementById("tour").hidden = true;
  for (const g of canvas.querySelectorAll("g.node.toured")) g.classList.remove("toured");
}

document.getElementById("tour-start").onclick = () => tourAt(0);
document.getElementById("tour-next").onclick = () => tourAt(Math.min(state.tour + 1, DATA.tour.length - 1));
document.getElementById("tour-prev").onclick = () => tourAt(Math.max(state.tour - 1, 0));
document.getElementById("tour-leave").onclick = leaveTour;
if (!DATA.tour.length) document.getElementById("tour-start").hidden = true;

// --- tabs ---------------------------------------------------------------------------------------------

for (const b of document.querySelectorAll("#tabs button")) {
  b.onclick = () => {
    for (const o of document.querySelectorAll("#tabs button")) o.classList.toggle("active", o === b);
    for (const t of ["graph", "attention", "training"]) document.getElementById(t + "-tab").hidden = t !== b.dataset.tab;
    for (const id of ["stepper", "tour-start"]) document.getElementById(id).style.visibility = b.dataset.tab === "graph" ? "visible" : "hidden";
    document.getElementById("crumbs").hidden = b.dataset.tab !== "graph";  // the graph's path, of no other tab
    if (b.dataset.tab === "graph") fit();
  };
}

// --- attention: a layer x head grid of the weights, one enlarged with the tokens -------------------

function attention() {
  const box = document.getElementById("attention");
  const a = DATA.attention;
  if (!a.layers.length) { box.append(el("p", { class: "hint", text: "This computation has no attention op." })); return; }
  const heads = a.layers[0].heads.length;
  const first = a.layers[0].heads[0].length;
  const tk = a.tokens && a.tokens.length ? a.tokens.length : Math.round(Math.sqrt(first));
  const tq = first / tk;
  box.append(el("p", { class: "hint", text: `Attention weights of every layer (rows) and head (columns), first sequence of the batch: row i of a map is how query i spreads over the keys. Click one to enlarge it.` }));
  // each map about 96 px across (a cell of at least 2 px), its layer's name right beside its row
  const grid = el("div", { class: "grid", style: `grid-template-columns: auto repeat(${heads}, auto)` });
  grid.append(el("div"));
  for (let h = 0; h < heads; h++) grid.append(el("div", { class: "label head", text: "head " + h }));
  const cell = Math.max(2, Math.min(16, Math.floor(96 / Math.max(tq, tk))));
  a.layers.forEach((layer, l) => {
    grid.append(el("div", { class: "label", text: layer.module || "layer " + l }));
    layer.heads.forEach((w, h) => {
      const c = heatCanvas(tq, tk, w.map(v => v / 1000), false, cell);
      c.title = `${layer.module || "layer " + l}, head ${h}`;
      c.onclick = () => enlarge(l, h, tq, tk);
      grid.append(c);
    });
  });
  box.append(grid, el("div", { id: "enlarged" }));
}

function tokenText(t) {
  // a token as a label that is never blank: escapes for what does not print (\n), ␣ for a space, ∅ for none
  return JSON.stringify(t).slice(1, -1).replace(/ /g, "\u2423") || "\u2205";
}

function enlarge(l, h, tq, tk) {
  const a = DATA.attention, w = a.layers[l].heads[h];
  const tokens = a.tokens && a.tokens.length === tk ? a.tokens : [...Array(tk).keys()].map(String);
  const qtokens = tokens.slice(tk - tq);
  const box = document.getElementById("enlarged");
  box.innerHTML = "";
  box.append(el("h3", { text: `${a.layers[l].module || "layer " + l}, head ${h}: query (row) attends to key (column)` }));
  const table = el("table", { class: "attn" });
  const head = el("tr", {}, el("th"));
  for (const t of tokens) head.append(el("th", { text: tokenText(t) }));
  table.append(el("thead", {}, head));
  for (let i = 0; i < tq; i++) {
    const tr = el("tr", {}, el("th", { text: tokenText(qtokens[i]) }));
    for (let j = 0; j < tk; j++) tr.append(el("td", { style: `background:${colour(w[i * tk + j] / 1000, 1, false)}`, title: (w[i * tk + j] / 1000).toFixed(3), text: (w[i * tk + j] / 1000).toFixed(2) }));
    table.append(tr);
  }
  box.append(table);
}

// --- training: a slider over the run's steps --------------------------------------------------------

function training() {
  const box = document.getElementById("training");
  const t = DATA.training;
  if (!t) { box.append(el("p", { class: "hint", text: "No training run given: gradflow explore --checkpoint DIR shows one (its metrics.jsonl and checkpoints)." })); return; }
  const steps = [...new Set([...t.losses.map(p => p[0]), ...t.evals.map(e => e.step), ...t.snapshots.map(s => s.step)])].sort((a, b) => a - b);
  if (!steps.length) { box.append(el("p", { class: "hint", text: "The run has no metrics yet." })); return; }
  // one screen at 1366x768: the slider, then the cards in columns (the loss, the weight, the health)
  const slider = el("input", { type: "range", min: 0, max: steps.length - 1, value: steps.length - 1, id: "scrub" });
  const label = el("b");
  box.append(el("div", { class: "scrubber" }, t.run ? el("h2", { id: "run", text: t.run }) : null, el("label", {}, "step ", label), slider));
  if (t.notes.length) box.append(el("p", { class: "hint", text: "not finite, drawn as gaps: " + t.notes.join("; ") }));
  const out = el("div", { class: "cards" });
  box.append(out);
  const show = () => {
    const s = steps[slider.value];
    label.textContent = s;
    out.innerHTML = "";
    out.append(lossCard(t, s), weightCard(t, s), healthCard(t, s), blocksCard(t, s));
  };
  slider.oninput = show;
  show();
}

function atOrBefore(list, s) {
  let found = null;
  for (const x of list) if (x.step <= s) found = x;
  return found;
}

const PALETTE = ["#6366f1", "#dc2626", "#059669", "#d97706", "#0891b2", "#9333ea", "#4b5563", "#db2777"];

function runSteps(t) {
  return extent([...t.losses.map(p => p[0]), ...t.evals.map(e => e.step)]);
}

function extent(values) {
  // [lowest, highest] of the numbers among values, in a loop: spread into Math.min's arguments, a long
  // run's steps would overflow the call stack
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (v != null) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  return [lo, hi];
}

function segments(points) {
  // the runs of points between gaps (null: a NaN or inf in the metrics), each drawn as one line
  const runs = [[]];
  for (const p of points) if (p[1] == null) runs.push([]); else runs[runs.length - 1].push(p);
  return runs.filter(r => r.length);
}

const shown = v => (v == null ? "not finite" : fmt(v));

function plot(series, s, log, span) {
  // lines of (step, value) points, the step s marked; axes labelled inside the drawing (left margin
  // wide enough for "0.0001", the right label anchored at its end so that no digit is cut)
  const W = 400, H = 200, L = 52, R = 12, T = 10, B = 22, ns = "http://www.w3.org/2000/svg";
  const f = v => (log ? Math.log10(Math.max(v, 1e-30)) : v);
  const pts = series.flatMap(x => x.points).filter(p => p[1] != null);
  const [x0, xs] = extent([...span, ...pts.map(p => p[0])]), [y0, ys] = pts.length ? extent(pts.map(p => f(p[1]))) : [0, 1];
  const x1 = Math.max(xs, x0 + 1), y1 = Math.max(ys, y0 + 1e-9);
  const X = x => L + ((x - x0) / (x1 - x0)) * (W - L - R), Y = y => T + (1 - (f(y) - y0) / (y1 - y0)) * (H - T - B);
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W);
  svg.setAttribute("height", H);
  svg.setAttribute("class", "plot");
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text != null) e.textContent = text;
    svg.append(e);
  };
  add("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#e5e7eb" });
  series.forEach((x, i) => {
    // x.colour, x.width: a series that should stand out (validation over the batches' noisy loss); x.dots:
    // a circle at each of its points (an evaluation), where they are few enough to tell apart
    const colour = x.colour || PALETTE[i % PALETTE.length], dots = x.points.length < 4 || (x.dots && x.points.length <= 60);
    for (const run of segments(x.points)) add("polyline", { points: run.map(p => `${X(p[0])},${Y(p[1])}`).join(" "), fill: "none", stroke: colour, "stroke-width": x.width || 1, class: x.name || "" });
    for (const p of dots ? x.points.filter(p => p[1] != null) : []) add("circle", { cx: X(p[0]), cy: Y(p[1]), r: 3, fill: colour, class: x.name || "" });
  });
  add("line", { x1: X(s), x2: X(s), y1: T, y2: H - B, stroke: "#dc2626" });
  const top = log ? 10 ** y1 : y1, bottom = log ? 10 ** y0 : y0;
  add("text", { x: L - 4, y: T + 10, "font-size": 11, "text-anchor": "end" }, fmt(top));
  add("text", { x: L - 4, y: H - B, "font-size": 11, "text-anchor": "end" }, fmt(bottom));
  add("text", { x: L, y: H - 6, "font-size": 11, "text-anchor": "start" }, "step " + x0);
  add("text", { x: W - R, y: H - 6, "font-size": 11, "text-anchor": "end" }, String(x1));
  return svg;
}

const VAL = "#d97706";  // the validation curve's colour, apart from the step's red line

function lossCard(t, s) {
  // the training loss (each step's batch, or the evaluations' estimate) and the validation loss of each
  // evaluation, one curve each; a NaN or inf is a gap in its curve
  const card = el("div", { class: "card loss" }, el("h3", { text: "loss" }));
  const series = [];
  if (t.losses.length) series.push({ name: "train", points: t.losses, label: "training: each step's batch" });
  else series.push({ name: "train", points: t.evals.filter(e => "train_loss" in e).map(e => [e.step, e.train_loss]), label: "training (estimated at each evaluation)" });
  series.push({ name: "val", points: t.evals.filter(e => "val_loss" in e).map(e => [e.step, e.val_loss]), label: "validation (estimated at each evaluation)", colour: VAL, width: 2, dots: true });
  const drawn = series.filter(x => x.points.length);
  if (!drawn.length) return card;
  card.append(plot(drawn, s, false, runSteps(t)));
  card.append(el("div", { class: "keys" }, ...drawn.map(x => el("span", { style: `color:${x.colour || PALETTE[drawn.indexOf(x) % PALETTE.length]}`, text: "— " + x.label }))));
  const e = atOrBefore(t.evals, s);
  if (e) card.append(el("div", { class: "stats", text: `evaluation at step ${e.step}: train ${shown(e.train_loss)}, val ${shown(e.val_loss)}` + ("grad_norm" in e ? `, gradient norm ${shown(e.grad_norm)}` : "") }));
  return card;
}

function healthCard(t, s) {
  // each block's gradient norm over the run's evaluations, where the trainer measures it
  const card = el("div", { class: "card health" }, el("h3", { text: "gradient norm per block, at each evaluation" }));
  const measured = t.evals.filter(x => x.blocks);
  if (measured.length) {
    const names = Object.keys(measured[measured.length - 1].blocks);
    const series = names.map(n => ({ points: measured.filter(x => n in x.blocks).map(x => [x.step, x.blocks[n].grad_norm]) }));
    card.append(plot(series, s, true, runSteps(t)));
    card.append(el("div", { class: "keys" }, ...names.map((n, i) => el("span", { style: `color:${PALETTE[i % PALETTE.length]}`, text: "— " + n }))));
  }
  if (measured.length < 3) {
    card.append(el("p", { class: "hint why", text: `${measured.length} point${measured.length === 1 ? "" : "s"}: the trainer measures these at each evaluation (every --eval-interval steps, and at the last step). Train with a smaller --eval-interval for a curve.` }));
  }
  return card;
}

function blocksCard(t, s) {
  const card = el("div", { class: "card" }, el("h3", { text: "per block: gradient norm and update size ||Δw||/||w||" }));
  const e = atOrBefore(t.evals.filter(x => x.blocks), s);
  if (!e) { card.append(el("p", { class: "hint", text: "measured at each evaluation after the first" })); return card; }
  card.append(el("div", { class: "hint", text: "measured at step " + e.step }));
  const names = Object.keys(e.blocks);
  const top = Math.max(extent(names.map(n => e.blocks[n].grad_norm))[1], 1e-12);
  for (const n of names) {
    const b = e.blocks[n];
    card.append(el("div", { class: "bar" }, el("code", { style: "width:140px;display:inline-block", text: n }), el("span", { class: "fill", style: `width:${Math.round(160 * (b.grad_norm ?? 0) / top)}px` }), `${shown(b.grad_norm)}  (update ${shown(b.update_ratio)})`));
  }
  return card;
}

function weightCard(t, s) {
  // the weight in the snapshot at or before the step, coloured on one scale for every snapshot (so that
  // scrubbing shows it change), and its change since the snapshot before, on a scale of its own
  const card = el("div", { class: "card weight" }, el("h3", { text: "weight " + (t.weight || "") }));
  const shot = atOrBefore(t.snapshots, s);
  if (t.held) card.append(el("p", { class: "hint", text: t.held + ": " + t.weight + " is the checkpoint's alone" }));
  const alone = "one snapshot only, the checkpoint's: a run trained by gradflow train keeps snapshots at its evaluations (in its folder's snapshots/)";
  if (!shot) {
    const first = t.snapshots.length ? `no snapshot yet: the first is at step ${t.snapshots[0].step}` : "no snapshot of this weight";
    card.append(el("p", { class: "hint", text: t.snapshots.length === 1 ? first + "; " + alone : first }));
    return card;
  }
  const k = t.snapshots.indexOf(shot), top = Math.max(...t.snapshots.map(x => maxAbs(x.heat.values)));
  card.append(el("div", { class: "hint", text: `snapshot ${k + 1} of ${t.snapshots.length}, at step ${shot.step}` }));
  const map = (h, fixed, said) => el("div", { class: "map" }, el("div", { class: "hint", text: said }), heatCanvas(h.rows.length, h.cols.length, h.values, true, 0, null, 180, fixed), scaleBar(h.values, fixed));
  const maps = el("div", { class: "maps" }, map(shot.heat, top, `w at step ${shot.step}`));
  card.append(maps);
  if (shot.change) {
    maps.append(map(shot.change, 0, `Δw since step ${t.snapshots[k - 1].step}`));
    card.append(el("div", { class: "stats", text: `||Δw|| / ||w|| = ${shown(shot.moved)}` }));
  } else card.append(el("div", { class: "hint", text: t.snapshots.length > 1 ? "the first snapshot: scrub on to see the weights change" : alone }));
  card.append(statsLine(shot.stats));
  return card;
}

legend();
openView(DATA.main);
attention();
training();
