"""The explorer's page in a real browser (headless Chromium, driven by Playwright's Python package): it
opens from disk with no network, a click shows the engine's numbers, step mode walks backward, and
a fused attention op opens into its scores. At laptop (1366x768) and desktop (1920x1080) sizes the
node text is readable, a step's op and its neighbours are on screen and its panel holds gradient in,
rule and gradient out; the tour runs; the Training tab scrubs a run's weight snapshots beside its
validation curve; hostile names cannot blank a page or run.

Skipped without Chromium (/usr/bin/chromium, Debian's package) or playwright, unless
GRADFLOW_REQUIRE_BROWSER=1, when they must be there. GRADFLOW_SCREENSHOTS=1 also saves the
pictures docs/explorer.md shows, as docs/explorer-*.png, and one of each tour stop in the temporary
folder's gradflow-explorer-screenshots/.
"""

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from helpers import views  # the page's views, each tensor with its numbers

import gradflow as gf
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.toy import ToyModel
from gradflow.tools.explore import explore
from gradflow.tools.graph import walk

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
ARGS += ["--disable-sync", "--no-first-run"]
DOCS = Path(__file__).resolve().parent.parent / "docs"
SHOTS = Path(tempfile.gettempdir()) / "gradflow-explorer-screenshots"
REQUIRED = os.environ.get("GRADFLOW_REQUIRE_BROWSER") == "1"

try:
    from playwright.sync_api import sync_playwright
except ImportError:
    sync_playwright = None

missing = "playwright is not installed" if sync_playwright is None else None
missing = missing or (None if Path(CHROMIUM).exists() else f"{CHROMIUM} is not installed")
if missing and not REQUIRED:
    pytest.skip(f"{missing} (GRADFLOW_REQUIRE_BROWSER=1 makes this a failure)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser():
    assert not missing, missing
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    model = ToyModel()
    out = model.walkthrough(model.encode("the cat sat"), target=model.config.vocab.index("on"))
    page = explore(out["loss"], model=model, names={t: n for n, t in out.items()}, title="toy model")
    path = page.write(tmp_path_factory.mktemp("pages") / "toy.html")
    return path, page, out


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8))
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6, 5]])
    _, loss = model(ids[:, :-1], ids[:, 1:])
    (attention,) = [op for op in walk(loss)[0] if op.name == "attention"]
    page = explore(loss, model=model, tokens=[str(i) for i in ids[0, :-1]], title="a 1-layer GPT: one training step")
    path = page.write(tmp_path_factory.mktemp("pages") / "gpt.html")
    return path, page, attention


class Opened:
    """A page opened from disk, recording console errors, uncaught exceptions and network requests."""

    def __init__(self, browser, path, size=(1400, 820)):
        self.tab = browser.new_page(viewport={"width": size[0], "height": size[1]})
        self.errors, self.requests = [], []
        self.tab.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.tab.on("pageerror", lambda e: self.errors.append(str(e)))
        self.tab.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else self.requests.append(r.url))
        self.tab.goto(path.as_uri())

    def click_node(self, node):
        """Pan the graph to the node (as step mode does), then click it as a user would."""
        self.tab.evaluate("id => bringIntoView(document.getElementById(id))", node)
        self.tab.click(f"#{node}")

    def numbers(self, selector):
        return [float(s) for s in self.tab.locator(selector).all_inner_texts()]

    def screenshot(self, name, docs=True):
        """docs/explorer-NAME.png, or, for a picture to look at but not to publish, one in SHOTS."""
        if os.environ.get("GRADFLOW_SCREENSHOTS") == "1":
            SHOTS.mkdir(exist_ok=True)
            self.tab.wait_for_timeout(300)  # the step's fade (explorer.css) has ended
            self.tab.screenshot(path=str((DOCS if docs else SHOTS) / f"explorer-{name}.png"))


def node_id(page, name, view=0):
    return next(i for i, n in views(page)[view]["nodes"].items() if n.get("name") == name)


def test_toy_page_opens_offline_and_a_click_shows_the_engines_numbers(browser, toy):
    path, page, out = toy
    opened = Opened(browser, path)
    opened.click_node(node_id(page, "h"))
    assert opened.tab.inner_text("#panel h2") == "h"
    np.testing.assert_allclose(opened.numbers("#panel table.data td"), out["h"].data, rtol=1e-3)
    np.testing.assert_allclose(opened.numbers("#panel table.grad td"), out["h"].grad, rtol=1e-3)
    opened.click_node(node_id(page, "W_1"))
    dw1 = np.outer(out["h"].grad, out["x"].data)  # dL/dW_1 = dL/dh x^T
    np.testing.assert_allclose(opened.numbers("#panel table.grad td"), dw1.ravel(), rtol=1e-3)
    opened.screenshot("toy")
    assert opened.errors == [] and opened.requests == []


def test_stepping_backward_lights_each_op_in_reverse(browser, toy):
    path, page, _ = toy
    steps = views(page)[0]["steps"]
    opened = Opened(browser, path)
    opened.tab.click("#to-backward")  # lands on backward step 1, not on the last forward step
    for n in range(1, 6):
        if n > 1:
            opened.tab.keyboard.press("ArrowRight")
        expected = steps[-n]
        assert opened.tab.get_attribute("#status", "data-unit") == expected
        assert opened.tab.locator("#canvas g.node.current").get_attribute("id") == expected
        assert opened.tab.inner_text("#status").startswith(f"backward {n} / {len(steps)}")
    op = views(page)[0]["nodes"][steps[-5]]
    shown = [t for t in op["inputs"] if t is not None and t in views(page)[0]["nodes"]]
    assert opened.tab.locator("#canvas g.edge.grad").count() == len(shown)  # the gradient's arrows, lit
    opened.screenshot("stepping", docs=False)
    opened.tab.keyboard.press("ArrowLeft")
    assert opened.tab.get_attribute("#status", "data-unit") == steps[-4]
    assert opened.errors == [] and opened.requests == []


def test_fused_attention_opens_into_the_engines_scores(browser, gpt):
    path, page, attention = gpt
    opened = Opened(browser, path)
    first = views(page)[0]
    block = node_id(page, "blocks.0")
    opened.click_node(block)
    attn = node_id(page, "blocks.0.attn", first["nodes"][block]["view"])
    opened.click_node(attn)
    inner = views(page)[views(page)[first["nodes"][block]["view"]]["nodes"][attn]["view"]]
    (op,) = [i for i, n in inner["nodes"].items() if n.get("name") == "attention"]
    opened.click_node(op)
    opened.tab.click("#decompose")
    assert "attention as primitive ops" in opened.tab.inner_text("#crumbs")
    chain = views(page)[inner["nodes"][op]["view"]]
    ops = [chain["nodes"][u]["name"] for u in chain["steps"]]
    assert ops == ["permute", "matmul", "mul", "masked_fill", "softmax", "matmul"]
    scores = chain["nodes"][chain["steps"][1]]["output"]
    opened.click_node(scores)
    q, k = attention.inputs[0].data, attention.inputs[1].data
    scores_engine = (q @ k.swapaxes(-1, -2)).ravel()
    np.testing.assert_allclose(opened.numbers("#panel table.data td"), scores_engine, rtol=1e-3, atol=1e-6)
    assert len(opened.numbers("#panel table.grad td")) == q.shape[-2] ** 2 * 2  # (1, 2, 8, 8): every score's gradient
    opened.screenshot("attention")
    opened.tab.click("#tabs button[data-tab=attention]")
    opened.tab.locator(".grid canvas").first.click()
    assert opened.tab.locator("table.attn td").count() == 64
    opened.screenshot("attention-maps")
    assert opened.errors == [] and opened.requests == []


# --- legible at laptop size, safe against any text -----------------------------------------------

LAPTOP, DESKTOP = (1366, 768), (1920, 1080)
READABLE = 11  # px: the smallest node text a learner reads without leaning in

NODE_TEXT = """() => {
  // each node on screen: its smallest text's rendered size (font-size times the zoom)
  const pane = document.getElementById("canvas").getBoundingClientRect();
  const sizes = [];
  for (const g of document.querySelectorAll("#canvas g.node")) {
    const r = g.getBoundingClientRect();
    if (r.right < pane.left || r.left > pane.right || r.bottom < pane.top || r.top > pane.bottom) continue;
    const px = [...g.querySelectorAll("text")].map(t => parseFloat(t.getAttribute("font-size")) * t.getScreenCTM().a);
    if (px.length) sizes.push(Math.min(...px));  // its smallest text: a shape, an op's constants
  }
  return sizes;
}"""

INSIDE = """ids => {
  // which of these nodes lie wholly inside the graph's pane, clear of the legend and the zoom buttons
  const pane = document.getElementById("canvas").getBoundingClientRect();
  const over = ["legend", "zoom"].map(i => document.getElementById(i).getBoundingClientRect());
  return ids.filter(id => {
    const r = document.getElementById(id).getBoundingClientRect();
    const hit = o => r.left < o.right && r.right > o.left && r.top < o.bottom && r.bottom > o.top;
    const inside = r.left >= pane.left && r.right <= pane.right && r.top >= pane.top && r.bottom <= pane.bottom;
    return inside && !over.some(hit);
  });
}"""

HOSTILE = [
    "</script><script>window.pwned = 1</script>",
    "<!--<script>",
    '<img src=x onerror="window.pwned = 1">',
    "\"quoted\" 'single' `back`",
    "line\u2028separator\u2029",
    "/*{{script}}*/ {{title}}",
]


@pytest.mark.parametrize("size", [LAPTOP, DESKTOP])
@pytest.mark.parametrize("which", ["toy", "gpt"])
def test_node_text_is_readable_at_first_and_after_fit(browser, toy, gpt, which, size):
    path = {"toy": toy, "gpt": gpt}[which][0]
    opened = Opened(browser, path, size)
    first = opened.tab.evaluate(NODE_TEXT)
    assert first and min(first) >= READABLE, f"initial zoom: node text {min(first or [0]):.1f} px"
    opened.tab.click("#zoom-fit")
    fitted = opened.tab.evaluate(NODE_TEXT)
    assert fitted and min(fitted) >= READABLE, f"fit: node text {min(fitted or [0]):.1f} px"
    every = list(views_of(path)[0]["nodes"])
    on_screen = opened.tab.evaluate(INSIDE, every)
    assert on_screen, "nothing to start from on screen"
    if which == "toy":  # laid out in columns: the whole graph, from the embedding to the loss, at first sight
        opened.tab.reload()
        assert opened.tab.evaluate(INSIDE, every) == every and min(opened.tab.evaluate(NODE_TEXT)) >= READABLE
    if which == "toy":
        opened.screenshot(f"toy-{size[0]}", docs=size == LAPTOP)
    assert opened.errors == [] and opened.requests == []


def views_of(path):
    return views(type("Page", (), {"html": Path(path).read_text(encoding="utf-8")}))


def test_step_mode_keeps_the_op_its_inputs_and_output_in_view(browser, toy):
    path, page, _ = toy
    v = views(page)[0]
    opened = Opened(browser, path, LAPTOP)
    for _ in range(2 * len(v["steps"])):
        opened.tab.keyboard.press("ArrowRight")
        unit = opened.tab.get_attribute("#status", "data-unit")
        op = v["nodes"][unit]
        wanted = [unit, op["output"]] + [t for t in op["inputs"] if t in v["nodes"]]
        assert opened.tab.evaluate(INSIDE, wanted) == wanted, opened.tab.inner_text("#status")
    assert opened.errors == []


def test_hostile_text_cannot_blank_the_page_or_run(browser, tmp_path):
    model = ToyModel()
    out = model.walkthrough(model.encode("the cat sat"), target=model.config.vocab.index("on"))
    names = {t: HOSTILE[i % len(HOSTILE)] + f" {n}" for i, (n, t) in enumerate(out.items())}
    toy_page = explore(out["loss"], model=model, names=names, title=HOSTILE[0] + HOSTILE[1])
    gf.manual_seed(0)
    gpt = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8))
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6, 5]])
    _, loss = gpt(ids[:, :-1], ids[:, 1:])
    tokens = [HOSTILE[i % len(HOSTILE)] for i in range(8)]
    gpt_page = explore(loss, model=gpt, tokens=tokens, title=HOSTILE[2])
    for name, page in [("toy", toy_page), ("gpt", gpt_page)]:
        opened = Opened(browser, page.write(tmp_path / f"{name}.html"))
        tab = opened.tab
        assert tab.locator("#canvas svg g.node").count() > 3, f"{name}: the graph was not drawn"
        assert tab.locator("#legend div").count() > 3 and tab.locator("#training").inner_text()
        assert tab.evaluate("window.pwned") is None and tab.locator("#canvas img, #panel img").count() == 0
        if name == "toy":
            assert tab.title() == HOSTILE[0] + HOSTILE[1]
            h = next(i for i, n in views(page)[0]["nodes"].items() if n.get("name", "").endswith(" h"))
            opened.click_node(h)
            assert tab.inner_text("#panel h2") == names[out["h"]]
        else:
            tab.click("#tabs button[data-tab=attention]")
            tab.locator(".grid canvas").first.click()
            assert tab.locator("table.attn td").count() == 64
            assert "</script>" in tab.inner_text("table.attn")
        assert tab.evaluate("window.pwned") is None
        assert opened.errors == [] and opened.requests == []


def test_each_step_shows_what_flows_in_the_rule_and_what_flows_out_on_one_screen(browser, toy):
    path, page, out = toy
    v = views(page)[0]
    n = len(v["steps"])
    opened = Opened(browser, path, LAPTOP)
    for k in range(2 * n):
        opened.tab.keyboard.press("ArrowRight")
        op = v["nodes"][opened.tab.get_attribute("#status", "data-unit")]
        result = v["nodes"][op["output"]]
        assert result["title"] in opened.tab.inner_text("#status")
        stages = [opened.tab.locator(f"#panel .stage-{s} h3") for s in ("in", "rule", "out")]
        bottoms = [s.bounding_box()["y"] + s.bounding_box()["height"] for s in stages]
        assert max(bottoms) <= LAPTOP[1], f"step {k + 1}: the panel's third stage is below the screen"
        inputs = [t for t in op["inputs"] if t is not None]
        if k < n:  # forward: the values in, the formula, the value out
            assert opened.tab.locator("#panel .stage-in table.data").count() == len(inputs)
            np.testing.assert_allclose(opened.numbers("#panel .stage-out td"), result["data"]["values"], rtol=1e-3)
        else:  # backward: g = dL/d(output), the rule, the gradient sent to each input
            assert stages[0].inner_text() == f"① gradient in: g = dL/d({result['title']})"
            np.testing.assert_allclose(opened.numbers("#panel .stage-in td"), result["grad"]["values"], rtol=1e-3)
            sent = [s for s in op["shares"] if s is not None]
            assert opened.tab.locator("#panel .stage-out table.share").count() == len(sent)
            if op["name"] == "relu":
                opened.screenshot("backward")
                worked = opened.tab.inner_text("#panel pre.worked")
                i = int(np.argmax(np.abs(out["relu_h"].grad)))
                assert f"dL/dh[{i}] = g[{i}] * [h[{i}] > 0]" in worked
    assert opened.errors == []


@pytest.mark.parametrize("which", ["toy", "gpt"])
def test_the_tour_runs_from_its_first_caption_to_its_last(browser, toy, gpt, which):
    path, page = {"toy": toy, "gpt": gpt}[which][:2]
    stops = json.loads(re.search(r'id="gf-data">(.*?)</script>', page.html, re.S).group(1))["tour"]
    assert 6 <= len(stops) <= 10
    opened = Opened(browser, path, LAPTOP)
    opened.tab.click("#tour-start")
    captions, heights = [], set()
    for k, stop in enumerate(stops):
        assert opened.tab.inner_text("#tour-count") == f"{k + 1} / {len(stops)}"
        heights.add(opened.tab.locator("#tour").bounding_box()["height"])  # the graph never jumps
        captions.append(opened.tab.inner_text("#tour-caption"))
        assert captions[-1] == stop["caption"]
        assert opened.tab.locator("#canvas g.node.toured").get_attribute("id") == stop["node"]
        assert opened.tab.evaluate(INSIDE, [stop["node"]]) == [stop["node"]], f"stop {k + 1} is off screen"
        if stop["step"]:
            assert opened.tab.get_attribute("#status", "data-unit") == stop["node"]
            assert opened.tab.inner_text("#status").startswith(stop["step"])
        opened.screenshot(f"tour-{which}-{k + 1}", docs=False)
        if which == "gpt" and stop["caption"].startswith("Backward through attention"):
            opened.screenshot("tour")
        if k < len(stops) - 1:
            opened.tab.click("#tour-next")
    assert opened.tab.is_disabled("#tour-next") and len(set(captions)) == len(captions) and len(heights) == 1
    colour = "el => getComputedStyle(el).backgroundColor"
    assert opened.tab.eval_on_selector("#tour-next", colour) != opened.tab.eval_on_selector("#tour-start", colour)
    assert not any(re.search(r"\bloss loss\b", c) for c in captions)
    assert "backward" in " ".join(captions).lower() and "gradient of the weight" in captions[-1]
    opened.tab.keyboard.press("Escape")  # leave the tour, explore freely from here
    assert opened.tab.locator("#tour").is_hidden() and opened.tab.locator("#canvas g.node.toured").count() == 0
    opened.tab.keyboard.press("ArrowRight")
    assert opened.errors == []


def test_the_training_tab_shows_whole_axis_labels_and_a_health_curve(browser, tmp_path):
    model = ToyModel()
    out = model.walkthrough(model.encode("the cat sat"), target=model.config.vocab.index("on"))
    losses = [{"step": s, "loss": 4.5 * 0.99**s} for s in range(211)]
    evals = [{"step": s, "train_loss": 4.5 * 0.99**s, "val_loss": 4.6 * 0.99**s} for s in (0, 50, 100, 150, 200, 210)]
    for n, e in enumerate(evals[1:]):
        e["blocks"] = {
            b: {"grad_norm": (1 + k) / (1 + n), "update_ratio": 1e-3} for k, b in enumerate(["emb", "blocks.0"])
        }
    for metrics, points in [(losses + evals, 5), (losses + evals[:2], 1)]:
        page = explore(out["loss"], model=model, training={"metrics": metrics, "snapshots": {}})
        opened = Opened(browser, page.write(tmp_path / f"run{points}.html", force=True), LAPTOP)
        opened.tab.click("#tabs button[data-tab=training]")
        for card in ("loss", "health"):
            inside = opened.tab.evaluate(
                """card => {
                  const svg = document.querySelector(`.card.${card} svg`).getBoundingClientRect();
                  return [...document.querySelectorAll(`.card.${card} svg text`)].map(t => {
                    const r = t.getBoundingClientRect();
                    return [t.textContent, r.left >= svg.left && r.right <= svg.right && r.top >= svg.top];
                  });
                }""",
                card,
            )
            assert all(whole for _, whole in inside), inside
            assert [t for t, _ in inside][-1] == "210"  # the last step, every digit
        assert opened.tab.locator(".card.health polyline").count() == 2
        why = opened.tab.locator(".card.health .why")
        assert why.count() == (points < 3) and (points >= 3 or "eval-interval" in why.inner_text())
        assert opened.errors == []


def test_a_long_runs_training_tab_draws_with_nan_as_gaps(browser, tmp_path):
    """150,000 step records and 15,000 evaluations (spread into Math.min, they overflowed the call stack),
    a NaN loss at step 100: the tab draws, the loss line cut in two at the gap, the gap named by its line."""
    model = ToyModel()
    out = model.walkthrough(model.encode("the cat sat"), target=model.config.vocab.index("on"))
    losses = [{"step": s, "loss": float("nan") if s == 100 else 4.5 * 0.99 ** (s / 1000)} for s in range(1, 150_001)]
    blocks = {"emb": {"grad_norm": 1.0, "update_ratio": 1e-3}, "blocks.0": {"grad_norm": 2.0, "update_ratio": 1e-3}}
    evals = [{"step": s, "train_loss": 4.0, "val_loss": 4.1, "blocks": blocks} for s in range(0, 150_001, 10)]
    evals[500]["val_loss"] = float("inf")
    training = {"metrics": losses + evals, "snapshots": {}, "source": "out/metrics.jsonl"}
    page = explore(out["loss"], model=model, training=training)
    opened = Opened(browser, page.write(tmp_path / "long.html"), LAPTOP)
    opened.tab.click("#tabs button[data-tab=training]")
    assert opened.tab.locator(".card.loss polyline.train").count() == 2  # steps 1-99 and 101-150,000
    assert opened.tab.locator(".card.loss polyline.val").count() == 2  # the validation loss, cut at step 5,000
    assert opened.tab.locator(".card.health polyline").count() == 2
    assert "out/metrics.jsonl, line 100: loss is nan" in opened.tab.inner_text("#training")
    opened.tab.locator("#scrub").fill("10")
    assert opened.errors == []


ONE_SCREEN = """() => {
  // the step's panel: the lowest of its stages, the tables, maps and lines that run past its right edge
  const panel = document.getElementById("panel"), right = panel.getBoundingClientRect().right;
  const stages = [...panel.querySelectorAll(".stage")].map(s => s.getBoundingClientRect().bottom);
  const parts = [...panel.querySelectorAll("table, canvas, pre, .array")];
  const wide = parts.filter(e => e.getBoundingClientRect().right > right + 1);
  const unit = document.getElementById("status").dataset.unit;
  return {
    status: document.getElementById("status").textContent, kind: state.view.nodes[unit].kind,
    stages: stages.length, lowest: Math.max(...stages), wide: wide.length, scroll: panel.scrollTop,
    worked: panel.querySelectorAll("pre.worked").length, out: panel.querySelectorAll(".stage-out").length,
    ringed: panel.querySelectorAll(".stage-out td.worked, .stage-out canvas[data-mark]").length,
  };
}"""


@pytest.mark.parametrize("which", ["toy", "gpt"])
def test_every_backward_step_of_every_view_fits_one_laptop_screen(browser, toy, gpt, which):
    """b, then the right arrow, through every view: ① ② ③ on screen, nothing past the panel's edge, each op
    step working an element, each collapsed module's step sending its gradient on."""
    path, page = {"toy": toy, "gpt": gpt}[which][:2]
    opened = Opened(browser, path, LAPTOP)
    lowest, ops, shot = 0, 0, {}
    for i, v in enumerate(views(page)):
        opened.tab.evaluate("i => openView(i)", i)
        n = len(v["steps"])
        assert opened.tab.inner_text("#status").startswith(f"step mode: {n} step{'s' * (n != 1)} each way")
        opened.tab.keyboard.press("b")
        for k in range(n):
            step = opened.tab.evaluate(ONE_SCREEN)
            assert step["status"].startswith(f"backward {k + 1} / {n}"), step
            assert step["stages"] == 3 and step["lowest"] <= LAPTOP[1] and step["wide"] == 0, str(step)
            assert step["out"] == 1 and step["scroll"] == 0, step
            if step["kind"] == "op":
                ops += 1
                assert step["worked"] == 1 and step["ringed"] >= 1, step  # the worked element, ringed in ③
            for name in ("cross_entropy", "attention", "layer_norm") if which == "gpt" else ():
                if step["status"].split(": ")[1].startswith(name + " →") and not shot.get(name):
                    shot[name] = opened.screenshot(f"backward-{name.replace('_', '-')}") or True
            lowest = max(lowest, step["lowest"])
            opened.tab.keyboard.press("ArrowRight")
    assert ops == sum(1 for v in views(page) for u in v["steps"] if v["nodes"][u]["kind"] == "op")
    print(f"{which}: {ops} op steps worked; the lowest stage ends at {lowest:.0f} px of {LAPTOP[1]}")
    assert opened.errors == []


def test_the_training_tab_scrubs_through_weight_snapshots_beside_a_validation_curve(browser, run_200, tmp_path):
    """A 200-step run of `gradflow train`, its page at 1366x768: the run's name as the tab's heading, the
    batch loss and the validation loss as two curves, and the slider moving through the weight snapshots,
    the weight's map redrawn as it changes, with its change since the snapshot before."""
    from gradflow.cli.main import main

    path = tmp_path / "run.html"
    assert main(["explore", "--checkpoint", str(run_200), "--prompt", "to be or", "-o", str(path)]) == 0
    training = json.loads(re.search(r'id="gf-data">(.*?)</script>', path.read_text(), re.S).group(1))["training"]
    shots = training["snapshots"]
    assert len(shots) >= 3
    opened = Opened(browser, path, LAPTOP)
    tab = opened.tab
    tab.click("#tabs button[data-tab=training]")
    assert tab.inner_text("#run") == "run" and tab.title() == "run: \u201cto be or\u201d"
    assert tab.locator(".card.loss polyline.train").count() == tab.locator(".card.loss polyline.val").count() == 1
    assert tab.locator(".card.loss circle.val").count() == 5  # the evaluations at 0, 50, ..., 200
    assert "validation" in tab.inner_text(".card.loss .keys")
    for card in (".card.loss", ".card.weight", ".card.health"):  # one screen: the slider and three cards
        box = tab.locator(card).bounding_box()
        assert box["y"] + box["height"] <= LAPTOP[1], card
    pictures = []
    for k, shot in enumerate(shots[:: len(shots) // 3]):
        tab.locator("#scrub").fill(str(shot["step"]))  # the slider runs over the steps 0, 1, ..., 200
        text = tab.inner_text(".card.weight")
        assert f"snapshot {shots.index(shot) + 1} of {len(shots)}, at step {shot['step']}" in text
        assert ("Δw since step" in text) == (k > 0) and (k == 0 or f"||Δw|| / ||w|| = {shot['moved']}" in text)
        pictures.append(tab.evaluate("() => document.querySelector('.card.weight canvas').toDataURL()"))
    assert len(pictures) >= 3 and len(set(pictures)) == len(pictures)  # the weight's map changes
    tab.locator("#scrub").fill("130")
    opened.screenshot("training")
    assert opened.errors == [] and opened.requests == []


def test_attention_maps_are_large_beside_their_labels_and_a_space_has_a_visible_label(browser, tmp_path):
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=8, n_layer=1, n_head=2, n_embd=8))
    ids = np.array([[3, 1, 4, 1, 5, 9, 2, 6, 5]])
    _, loss = model(ids[:, :-1], ids[:, 1:])
    tokens = ["to", " ", "be", " or", "\n", "", "a", "b"]
    opened = Opened(browser, explore(loss, model=model, tokens=tokens).write(tmp_path / "gpt.html"), LAPTOP)
    tab = opened.tab
    tab.click("#tabs button[data-tab=attention]")
    label, first = (
        tab.locator(".grid .label:not(.head)").first.bounding_box(),
        tab.locator(".grid canvas").first.bounding_box(),
    )
    assert first["width"] >= 90 and first["x"] - (label["x"] + label["width"]) <= 12
    tab.locator(".grid canvas").first.click()
    rows = tab.locator("table.attn tbody th, table.attn tr:not(:first-child) th").all_inner_texts()
    heads = tab.locator("table.attn thead th").all_inner_texts()[1:]
    assert heads == ["to", "\u2423", "be", "\u2423or", "\\n", "\u2205", "a", "b"] and all(r.strip() for r in rows)
    assert opened.errors == []
