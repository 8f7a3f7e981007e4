"""gf.explore and `gradflow explore`: every gradient kept, each arrow's share of it, fused ops opened into
primitive ops with the same numbers, and one self-contained page that needs no network.
(tests/test_explorer_browser.py opens the page in a real browser.)"""

import html
import json
import re

import numpy as np
import pytest
from helpers import views

import gradflow as gf
from gradflow.cli import explore as explore_command
from gradflow.cli.main import Parser, one_line
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.toy import ToyModel
from gradflow.nn import functional as F
from gradflow.tools import explore_page
from gradflow.tools.explore import explore


def nodes_named(page, name):
    return [n for v in views(page) for n in v["nodes"].values() if n.get("name") == name]


def toy():
    model = ToyModel()
    out = model.walkthrough(model.encode("the cat sat"), target=model.config.vocab.index("on"))
    return model, out


# --- every gradient kept --------------------------------------------------------------------------


def test_retain_grads_keeps_every_tensor_gradient_and_is_off_by_default():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    z = y.sum() * 3
    z.backward()
    assert y.grad is None  # by default only leaves keep theirs
    x2 = gf.tensor([1.0, 2.0], requires_grad=True)
    y2 = x2 * x2
    z2 = y2.sum() * 3
    with gf.autograd.retain_grads():
        z2.backward()
    np.testing.assert_array_equal(y2.grad, [3.0, 3.0])
    np.testing.assert_array_equal(x2.grad, [6.0, 12.0])
    assert float(z2.grad) == 1.0
    assert gf.autograd._RETAIN_ALL not in gf.engine.hooks.watchers  # switched off after the block


# --- fused ops opened into primitive ops (their references: gradflow/engine/ops/composed.py) -------------


def test_attention_opens_into_scores_scale_mask_softmax_and_product():
    gf.set_default_dtype(np.float64)
    try:
        gf.manual_seed(0)
        q, k, v = (gf.randn(1, 2, 4, 3, requires_grad=True) for _ in range(3))
        loss = (F.scaled_dot_product_attention(q, k, v, causal=True) ** 2).sum()
        page = explore(loss, names={q: "query"})
    finally:
        gf.set_default_dtype(np.float32)
    (fused,) = [n for n in views(page)[0]["nodes"].values() if n.get("name") == "attention"]
    assert fused["check"]["value"] < 1e-12 and fused["check"]["grad"] < 1e-12
    inside = views(page)[fused["view"]]
    ops = [inside["nodes"][u]["name"] for u in inside["steps"]]
    assert ops == ["permute", "matmul", "mul", "masked_fill", "softmax", "matmul"]
    named = [inside["nodes"][inside["nodes"][u]["output"]]["name"] for u in inside["steps"]]
    # the reference's steps, by name; its output keeps the name it has outside, as its inputs do
    assert named == ["", "q k^T", "scores", "masked", "weights", "attention(query, …)"]
    leaves = {n["name"] for n in inside["nodes"].values() if n["kind"] == "tensor" and n["tkind"] == "leaf"}
    assert "query" in leaves and "x" not in leaves
    opened = views(page)[inside["nodes"][inside["steps"][4]]["view"]]  # the softmax opens in turn
    assert [opened["nodes"][u]["name"] for u in opened["steps"]] == ["sub", "exp", "sum", "div"]
    scores = inside["nodes"][inside["nodes"][inside["steps"][1]]["output"]]
    expected = q.data @ k.data.swapaxes(-1, -2)
    np.testing.assert_allclose(np.reshape(scores["data"]["values"], (1, 2, 4, 4)), expected, rtol=1e-5)
    assert scores["grad"] is not None  # the gradient reached the scores: backward ran through the chain


# --- values, gradients and each arrow's share ------------------------------------------------------------


def test_toy_page_holds_the_engines_values_and_gradients():
    model, out = toy()
    page = explore(out["loss"], model=model, names={t: n for n, t in out.items()})
    (h,) = nodes_named(page, "h")
    np.testing.assert_allclose(h["data"]["values"], out["h"].data, rtol=1e-5)
    np.testing.assert_allclose(h["grad"]["values"], out["h"].grad, rtol=1e-5)  # an intermediate tensor's gradient
    (w1,) = nodes_named(page, "W_1")
    np.testing.assert_allclose(np.reshape(w1["grad"]["values"], (3, 4)), model.W_1.grad, rtol=1e-5)
    assert w1["tkind"] == "leaf" and nodes_named(page, "loss")[0]["tkind"] == "result"
    assert model.W_Q.grad is None  # the document's loss does not reach W_Q
    assert out["loss"].grad_fn._freed  # the graph is freed afterwards, as by backward


def test_a_tensor_used_twice_shows_each_share_and_the_running_sum():
    a = gf.tensor([2.0, -1.0], requires_grad=True)
    b = a * 3
    loss = (b * a + b).sum()  # b read twice, a read twice
    page = explore(loss, names={a: "a", b: "b"})
    (b_info,) = nodes_named(page, "b")
    arrivals = b_info["arrivals"]
    assert len(arrivals) == 2
    np.testing.assert_allclose(arrivals[-1][2]["values"], b.grad)  # the last running sum is the gradient
    np.testing.assert_allclose(np.add(arrivals[0][1]["values"], arrivals[1][1]["values"]), b.grad)
    np.testing.assert_allclose(b.grad, a.data + 1)  # d/db of b a + b


def test_gpt_modules_are_views_of_their_own():
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=4, n_layer=1, n_head=2, n_embd=8))
    ids = np.array([[1, 2, 3, 4, 5]])
    _, loss = model(ids[:, :-1], ids[:, 1:])
    page = explore(loss, model=model, tokens=["a", "b", "c", "d"])
    first = views(page)[0]
    modules = [n["name"] for n in first["nodes"].values() if n["kind"] == "module"]
    assert "blocks.0" in modules and "wte" in modules
    block = next(n for n in first["nodes"].values() if n.get("name") == "blocks.0")
    inner = [n["name"] for n in views(page)[block["view"]]["nodes"].values() if n["kind"] == "module"]
    assert "blocks.0.attn" in inner and "blocks.0.ffn" in inner
    data = json.loads(re.search(r'id="gf-data">(.*?)</script>', page.html, re.S).group(1))
    (layer,) = data["attention"]["layers"]
    assert len(layer["heads"]) == 2 and len(layer["heads"][0]) == 16
    w = np.reshape(layer["heads"][0], (4, 4)) / 1000
    np.testing.assert_allclose(w.sum(axis=1), 1, atol=3e-3)
    assert np.all(np.triu(w, 1) == 0)  # causal: no query sees a later key


def test_every_tensor_has_a_readable_name_in_the_graph_and_the_data():
    model, out = toy()
    page = explore(out["loss"], model=model, names={out["x"]: "x", out["h"]: "h"})
    titles = {n["title"] for v in views(page) for n in v["nodes"].values() if n["kind"] == "tensor"}
    assert {"W_1 @ x", "relu(h)", "W_1", "h"} <= titles
    assert "tensor" not in titles and "" not in titles
    svgs = "".join(v["svg"] for v in views(page))
    assert all(t in html.unescape(svgs) for t in titles)  # the graph's boxes say the same
    q, k = (gf.randn(1, 2, 4, 3, requires_grad=True) for _ in range(2))
    attention = explore(F.scaled_dot_product_attention(q, k, k).sum(), names={q: "q", k: "k"})
    inside = {n["title"] for v in views(attention)[1:] for n in v["nodes"].values() if n["kind"] == "tensor"}
    assert {"k^T", "q k^T", "scores", "weights"} <= inside


def test_the_page_needs_no_network():
    _, out = toy()
    page = explore(out["loss"])
    html = page.html
    assert not re.search(r'(src|href)\s*=\s*"(?!data:|#)', html)
    urls = set(re.findall(r"https?://[^\s\"'<>\\]+", html))
    assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}, urls
    assert "fetch(" not in html and "XMLHttpRequest" not in html
    assert "<iframe srcdoc=" in page._repr_html_()


def test_no_text_can_end_a_script_block_or_open_a_comment():
    _, out = toy()
    hostile = "</script><!--<script> \u2028 & {{title}}"
    page = explore(out["loss"], names={out["h"]: hostile}, title=hostile)
    blocks = re.findall(r'<script type="application/json" id="gf-\S+?">(.*?)</script>', page.html, re.S)
    assert blocks and not any(re.search("[<>&\u2028]", b) for b in blocks)
    assert hostile in nodes_named(page, hostile)[0]["name"]
    script = (explore_page.ASSETS / "explorer.js").read_text()
    assert "</script" not in script.lower() and "<!--" not in script  # inlined as it is
    assert page.html.count("&lt;/script&gt;&lt;!--&lt;script&gt;") == 2  # <title> and <h1>


def test_backward_refused_when_it_would_add_to_gradients():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(ValueError, match="explore: a backward pass already ran"):
        explore(loss)
    y = (x * 2).sum()
    with pytest.raises(ValueError, match="already holds a gradient"):
        explore(y)
    assert explore(y, backward=False).size > 0  # showing the gradients there are
    with pytest.raises(TypeError, match="explore: root must be a Tensor"):
        explore(np.ones(2))


def test_write_never_replaces_a_file_without_force(tmp_path):
    _, out = toy()
    page = explore(out["loss"])
    path = tmp_path / "page.html"
    path.write_text("my notes")
    with pytest.raises(FileExistsError, match="pass force=True"):
        page.write(path)
    assert path.read_text() == "my notes"
    page.write(path, force=True)
    assert path.read_text(encoding="utf-8") == page.html


def test_without_graphviz_one_clear_error(monkeypatch):
    def missing():
        raise RuntimeError("no dot")

    monkeypatch.setattr(explore_page, "layout_program", missing)
    _, out = toy()
    with pytest.raises(OSError, match="explore: laying out the graph needs Graphviz's `dot`.*install Graphviz"):
        explore(out["loss"])


# --- the command ---------------------------------------------------------------------------------------


def command(argv, capsys):
    """Run `gradflow explore` as cli/main.py runs a command: exit code, stdout, stderr."""
    parser = Parser(prog="gradflow")
    explore_command.add_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["explore", *argv])
    try:
        code = args.run(args)
    except (ValueError, OSError) as e:
        print(one_line("explore", e), file=__import__("sys").stderr)
        code = 2
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_toy_and_small_models(tmp_path, capsys):
    for flags in (["--toy"], ["--model", "gpt"], ["--model", "llama", "--n-layer", "2"]):
        path = tmp_path / f"{flags[-1]}.html"
        code, out, _ = command([*flags, "-o", str(path)], capsys)
        assert code == 0 and f"wrote {path}" in out
        assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--toy", "--model", "gpt"], "give one of --toy, --model or --checkpoint"),
        ([], "give one of --toy, --model or --checkpoint"),
        (["--model", "smollm2"], "--model needs --prompt TEXT"),
        (["--toy", "--prompt", "hi"], "--prompt is for --checkpoint"),
        (["--model", "gpt", "--n-layer", "0"], "--n-layer must be at least 1, got 0"),
        (["--checkpoint", "/nonexistent", "--prompt", "ab"], "checkpoint /nonexistent does not exist"),
    ],
)
def test_cli_errors_are_one_line(flags, message, tmp_path, capsys):
    code, _, err = command([*flags, "-o", str(tmp_path / "x.html")], capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith("gradflow explore: ") and message in err


def test_cli_refuses_to_replace_a_file(tmp_path, capsys):
    path = tmp_path / "toy.html"
    path.write_text("keep me")
    code, _, err = command(["--toy", "-o", str(path)], capsys)
    assert code == 2 and "exists; add --force to replace it" in err and path.read_text() == "keep me"
    assert command(["--toy", "-o", str(path), "--force"], capsys)[0] == 0


def test_cli_checkpoint_shows_a_200_step_runs_snapshots_change_under_the_runs_name(run_200, tmp_path, capsys):
    """`gradflow train` for 200 steps, evaluated every 50, keeps weight snapshots at each evaluation and every 20
    steps (training/snapshots.py); the page scrubs through them, each one's change since the one before
    measured, and names the run by its folder, never by the absolute path it was given."""
    path = tmp_path / "run.html"
    code, out, err = command(["--checkpoint", str(run_200), "--prompt", "to be or", "-o", str(path)], capsys)
    assert code == 0, err
    text = path.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="gf-data">(.*?)</script>', text, re.S).group(1))
    training = data["training"]
    assert [e["step"] for e in training["evals"]] == [0, 50, 100, 150, 200] and "blocks.0" in training["evals"][-1][
        "blocks"
    ]
    assert all(isinstance(e["val_loss"], float) for e in training["evals"])  # the validation curve's points
    assert training["weight"] == "blocks.0.attn.q_proj.weight" and training["held"] is None
    shots = training["snapshots"]
    assert [s["step"] for s in shots] == sorted({*range(0, 201, 20), 50, 150})
    assert shots[0]["change"] is None
    for before, after in zip(shots, shots[1:]):
        change = np.array(after["change"]["values"])
        assert after["moved"] > 0 and np.abs(change).max() > 0
        np.testing.assert_allclose(np.array(after["heat"]["values"]) - before["heat"]["values"], change, atol=2e-4)
    assert data["title"] == "run: \u201cto be or\u201d" and training["run"] == "run"
    assert str(run_200.parent) not in text and "'" not in data["title"]


def test_cli_checkpoint_names_a_parameter_its_snapshots_do_not_hold(tmp_path, capsys, monkeypatch):
    """A larger model's snapshots hold one matrix: another --weight is shown at the checkpoint's step, and the
    page says which one the snapshots hold."""
    from gradflow.cli.main import main
    from gradflow.training import snapshots

    monkeypatch.setattr(snapshots, "WHOLE", 100)
    data = tmp_path / "tiny.txt"
    data.write_text("to be or not to be, that is the question. " * 20)
    flags = ["--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "8", "--batch-size", "2"]
    flags += ["--eval-iters", "1", "--sample-tokens", "0", "--max-iters", "4"]
    assert main(["train", "--data", str(data), *flags, "--out-dir", str(tmp_path / "run")]) == 0
    path = tmp_path / "run.html"
    checkpoint = ["--checkpoint", str(tmp_path / "run" / "ckpt.npz"), "--prompt", "to be", "-o", str(path)]
    assert command([*checkpoint, "--weight", "wte.weight"], capsys)[0] == 0
    training = json.loads(re.search(r'id="gf-data">(.*?)</script>', path.read_text(), re.S).group(1))["training"]
    assert [s["step"] for s in training["snapshots"]] == [4]
    assert training["held"] == "the run's snapshots hold blocks.0.attn.q_proj.weight, not wte.weight"
