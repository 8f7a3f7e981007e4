"""gf.draw_graph: what is drawn (nodes, arrows, labels, module boxes), that it is deterministic, and
that it renders to files without a system Graphviz, as on a fresh machine."""

import math
import re
import shutil
import stat
import sys
import xml.etree.ElementTree as ET

import graphviz
import numpy as np
import pytest

import gradflow as gf
from gradflow.cli import main
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.tools import graph as gv

NODE = re.compile(r"^\s+((?:t|op|m)\d+) \[(.*)\]$", re.M)
EDGE = re.compile(r"^\s+(\w+) -> (\w+)$", re.M)


def nodes(g):
    """node id -> its attribute text, in the order of the DOT source."""
    return dict(NODE.findall(g.source))


def edges(g):
    return EDGE.findall(g.source)


def kinds(g):
    ids = list(nodes(g))
    return [sum(i.startswith(k) and i[len(k)].isdigit() for i in ids) for k in ("t", "op", "m")]


@pytest.fixture
def no_system_dot(monkeypatch, tmp_path):
    """A PATH without Graphviz's dot, as on a fresh machine: drawing must use the graphviz-pure package."""
    monkeypatch.setenv("PATH", str(tmp_path))


def micrograd():
    """micrograd's README expression: L = (a * b + c) * f."""
    a, b, c, f = (gf.tensor(v, requires_grad=True) for v in (2.0, -3.0, 10.0, -2.0))
    for t, name in zip((a, b, c, f), "abcf"):
        t.name = name
    e = a * b
    d = e + c
    L = d * f
    L.name = "L"
    L.backward()
    return L


def attention_head(t=3, d=4, hs=2):
    """One causal attention head written out: softmax(mask(q k^T / sqrt(hs))) v."""
    gf.manual_seed(0)
    x = gf.randn(t, d)
    w_q, w_k, w_v = (gf.randn(d, hs, requires_grad=True) for _ in range(3))
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = (q @ k.T) / math.sqrt(hs)
    scores = scores.masked_fill(~np.tri(t, dtype=bool), -np.inf)
    return scores.softmax(-1) @ v


def tiny_gpt_step(n_layer=1):
    gf.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=16, block_size=4, n_layer=n_layer, n_head=2, n_embd=8))
    ids = np.array([[1, 2, 3, 4, 5]])
    _, loss = model(ids[:, :-1], ids[:, 1:])
    loss.backward()
    return model, loss


# --- what is drawn ---------------------------------------------------------------------------------


def test_micrograd_expression_counts_and_data_flow_order():
    g = gf.draw_graph(micrograd())
    assert isinstance(g, graphviz.Digraph)
    assert kinds(g) == [7, 3, 0]  # a b c f, e d L; mul add mul
    assert edges(g) == [
        ("t0", "op0"), ("t1", "op0"), ("op0", "t2"),  # a, b -> mul -> e
        ("t2", "op1"), ("t3", "op1"), ("op1", "t4"),  # e, c -> add -> d
        ("t4", "op2"), ("t5", "op2"), ("op2", "t6"),  # d, f -> mul -> L
    ]  # fmt: skip
    labels = nodes(g)
    assert "<b>a</b>" in labels["t0"] and "<b>L</b>" in labels["t6"]
    assert "<mul>" in labels["op0"] and "<add>" in labels["op1"]


def test_one_attention_head_counts():
    g = gf.draw_graph(attention_head())
    # leaves x, W_q, W_k, W_v and the constant sqrt(hs); q, k, v, k^T, q k^T, scaled, masked, weights, out
    assert kinds(g) == [14, 9, 0]
    assert len(edges(g)) == 24  # each op: an arrow from every input and one to its output
    ops = [re.search(r"label=<(\w+)", a).group(1) for i, a in nodes(g).items() if i.startswith("op")]
    assert ops == ["matmul", "matmul", "permute", "matmul", "div", "masked_fill", "softmax", "matmul", "matmul"]


def test_a_tensor_read_twice_by_one_op_has_two_arrows():
    x = gf.tensor([1.0, 2.0], requires_grad=True)
    assert edges(gf.draw_graph(x * x)) == [("t0", "op0"), ("t0", "op0"), ("op0", "t1")]


def test_a_leaf_alone_is_one_node():
    g = gf.draw_graph(gf.tensor([1.0, 2.0]))
    assert kinds(g) == [1, 0, 0] and edges(g) == []


def test_labels_show_shape_dtype_values_and_gradients():
    w = gf.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    loss = (w * 2).sum()
    loss.backward()
    labels = nodes(gf.draw_graph(loss, names={w: "w", loss: "loss"}))
    w_label = labels["t0"]
    assert "<b>w</b>" in w_label and "(2, 3) float32" in w_label
    assert "data" in w_label and "[[1.0000 2.0000 3.0000]" in w_label
    assert "grad" in w_label and "[[2.0000 2.0000 2.0000]" in w_label
    assert "() float32" in labels["t1"] and "2.0000" in labels["t1"]  # the constant 2
    assert "axis=(0, 1)" in labels["op1"]  # sum over every axis


def test_values_grads_and_max_elements_can_be_hidden():
    L = micrograd()
    assert "grad" not in gf.draw_graph(L, grads=False).source
    no_values = gf.draw_graph(L, values=False).source
    assert "data" not in no_values and "grad" in no_values
    capped = gf.draw_graph(gf.ones(3, 3, requires_grad=True).sum(), max_elements=8).source
    assert "(3, 3) float32" in capped and "1.0000" not in capped


def test_rankdir():
    assert "rankdir=LR" in gf.draw_graph(micrograd()).source
    assert "rankdir=TB" in gf.draw_graph(micrograd(), rankdir="TB").source


def test_graph_drawn_after_backward_keeps_op_names_and_params():
    x = gf.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x.reshape(4).rsqrt()[1:3].sum()
    y.backward()  # frees what the ops saved, but not their inputs, params and names
    labels = " ".join(nodes(gf.draw_graph(y)).values())
    assert "reshape" in labels and "shape=(4,)" in labels and "rsqrt" in labels and "[1:3]" in labels


def test_names_from_the_model_the_tensor_and_the_argument():
    model, loss = tiny_gpt_step()
    src = gf.draw_graph(loss, model=model, modules="cluster").source
    assert "blocks.0.attn.q_proj.weight" in src and "wte.weight" in src
    model.ln_f.weight.name = "final gain"  # a tensor's own name beats its parameter name
    src = gf.draw_graph(loss, model=model, names={loss: "the loss"}).source
    assert "final gain" in src and "ln_f.weight" not in src and "<b>the loss</b>" in src


def test_same_computation_same_dot_text():
    first = gf.draw_graph(micrograd()).source
    clutter = [gf.tensor(float(i)) for i in range(100)]  # other objects, other ids
    assert gf.draw_graph(micrograd()).source == first
    a = tiny_gpt_step()
    del clutter
    b = tiny_gpt_step()
    for modules in (None, "cluster", "collapse"):
        assert gf.draw_graph(a[1], model=a[0], modules=modules).source == (
            gf.draw_graph(b[1], model=b[0], modules=modules).source
        )


def test_grads_all_runs_backward_keeping_every_gradient():
    a, b = gf.tensor(2.0, requires_grad=True), gf.tensor(-3.0, requires_grad=True)
    e = a * b
    loss = (e + a) * a  # a is read three times: its gradient sums the three paths
    labels = nodes(gf.draw_graph(loss, grads="all", names={a: "a", e: "e", loss: "L"}))
    assert float(a.grad) == 2 * a.item() * b.item() + 2 * a.item()  # dL/da = 2ab + 2a = -8
    assert float(e.grad) == a.item()  # dL/de = a, an intermediate tensor's gradient, kept
    assert "-8.0000" in labels["t0"] and "2.0000" in labels["t2"]  # e = t2 shows its gradient
    assert float(loss.grad) == 1.0


def test_grads_all_after_backward_refuses_to_add_a_second_gradient():
    L = micrograd()  # already backwarded: leaves hold gradients and the graph is freed
    with pytest.raises(ValueError, match="draw_graph: a backward pass already ran through this graph"):
        gf.draw_graph(L, grads="all")
    a = gf.tensor(1.0, requires_grad=True)
    a.grad = np.array(5.0, dtype=np.float32)
    with pytest.raises(ValueError, match="already holds a gradient"):
        gf.draw_graph(a * a, grads="all")
    with pytest.raises(ValueError, match=r"the root has shape \(2,\)"):
        gf.draw_graph(gf.ones(2, requires_grad=True) * 2, grads="all")


def test_the_legend_names_each_fill_colour():
    g = gf.draw_graph(micrograd())
    assert "subgraph cluster_legend" in g.source
    for kind in ("leaf", "constant", "value", "result", "op"):
        fill, text = gv.KINDS[kind]
        assert re.search(rf'legend_{kind} \[label="?{re.escape(text)}"? fillcolor="{fill}"', g.source), kind
    assert "legend_module" not in g.source and "legend_module" in gf.draw_graph(micrograd(), modules="collapse").source
    assert "legend" not in gf.draw_graph(micrograd(), legend=False).source


def test_the_legend_is_one_column_whichever_way_the_graph_runs():
    """Top to bottom, invisible arrows stack the samples (a row would double a tall drawing's width);
    left to right, the samples share a rank, and a rank already runs down the page."""
    top_down = gf.draw_graph(micrograd(), rankdir="TB").source
    order = ["leaf", "constant", "value", "result", "op"]
    for above, below in zip(order, order[1:]):
        assert f"legend_{above} -> legend_{below} [style=invis]" in top_down
    assert "legend_leaf -> " not in gf.draw_graph(micrograd(), rankdir="LR").source


# --- module boxes ----------------------------------------------------------------------------------


def clusters(g):
    """(name, label) of each module box, in order."""
    found = re.findall(r'subgraph (cluster_\d+) \{\s+color="[^"]*" label=("[^"]*"|\S+)', g.source)
    return [(name, label.strip('"')) for name, label in found]


def test_module_clusters_are_labelled_boxes_of_their_ops():
    model, loss = tiny_gpt_step()
    plain = gf.draw_graph(loss, model=model)
    boxed = gf.draw_graph(loss, model=model, modules="cluster")
    assert clusters(plain) == [] and kinds(boxed) == kinds(plain) and edges(boxed) == edges(plain)
    labels = [label for _, label in clusters(boxed)]
    assert labels[0] == "GPT"
    for label in ("blocks.0 (Block)", "blocks.0.attn (CausalSelfAttention)", "blocks.0.attn.q_proj (Linear)"):
        assert label in labels
    # every module that ran an op: not the ModuleList (never called) nor dropout with p = 0 (returns x)
    ran = [
        f"{name} ({type(m).__name__})" if name else "GPT"
        for name, m in model.named_modules()
        if not isinstance(m, (gf.nn.ModuleList, gf.nn.Dropout))
    ]
    assert labels == ran
    q_proj = boxed.source.split('label="blocks.0.attn.q_proj (Linear)"')[1].split("}")[0]
    assert "blocks.0.attn.q_proj.weight" in q_proj and "linear" in q_proj  # its weight is used only inside


def test_parameters_sit_in_their_module_and_inputs_outside():
    layer = gf.nn.Linear(3, 2)
    x = gf.tensor([[1.0, -2.0, 3.0]], requires_grad=True)
    g = gf.draw_graph(layer(x).sum(), model=layer, modules="cluster", names={x: "x"})
    outside, box = g.source.split("subgraph cluster_0")
    assert "<b>x</b>" in outside and "<b>weight</b>" in box and "<b>bias</b>" in box and "linear" in box


def test_collapsed_modules_are_one_node_each():
    model, loss = tiny_gpt_step(n_layer=2)
    g = gf.draw_graph(loss, model=model, modules="collapse")
    names = [re.search(r'label="([^"]*)"', a).group(1) for i, a in nodes(g).items() if i.startswith("m")]
    assert names == [
        "wte (Embedding)", "wpe (Embedding)", "blocks.0 (Block)",
        "blocks.1 (Block)", "ln_f (LayerNorm)", "lm_head (Linear)",
    ]  # fmt: skip
    assert "q_proj" not in g.source  # inside a collapsed block
    assert "<b>wte.weight</b>" in g.source  # tied: read by wte and lm_head, so drawn between them
    assert clusters(g) == [("cluster_0", "GPT")]
    # wte.weight, 6 module outputs, their sum tok_emb + pos_emb, the reshaped logits, the loss; add, reshape, loss
    assert kinds(g) == [10, 3, 6]


def test_collapse_depth():
    model, loss = tiny_gpt_step()
    g = gf.draw_graph(loss, model=model, modules="collapse", collapse_depth=2)
    labels = " ".join(nodes(g).values())
    assert "blocks.0.attn (CausalSelfAttention)" in labels and "blocks.0.ffn (MLP)" in labels
    assert "blocks.0 (Block)" in [label for _, label in clusters(g)]
    whole = gf.draw_graph(loss, model=model, modules="collapse", collapse_depth=0)
    assert kinds(whole) == [1, 0, 1] and edges(whole) == [("m0", "t0")]  # the model, then the loss


# --- rendering without a system Graphviz -----------------------------------------------------------


def test_fresh_machine_uses_the_graphviz_pure_package(no_system_dot):
    assert re.search(r"graphviz-pure(\.exe)?$", gv.layout_program())


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for dot")
def test_system_dot_comes_first(monkeypatch, tmp_path):
    dot = tmp_path / "dot"
    dot.write_text("#!/bin/sh\n")
    dot.chmod(dot.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gv.layout_program() == str(dot)


def test_no_layout_program_is_a_clear_error(no_system_dot, monkeypatch):
    monkeypatch.setattr(gv, "FALLBACK_PROGRAM", "no-such-graphviz")
    with pytest.raises(RuntimeError, match="pip install no-such-graphviz"):
        gv.render("digraph { a }")


def test_svg_file_is_valid_xml(no_system_dot, tmp_path):
    path = gf.draw_graph(micrograd()).write(tmp_path / "micrograd.svg")
    svg = ET.parse(path).getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    titles = [el.text for el in svg.iter("{http://www.w3.org/2000/svg}title")]
    assert {"t0", "op0", "t6", "t0->op0"} <= set(titles)


def test_png_and_dot_files(no_system_dot, tmp_path):
    g = gf.draw_graph(micrograd())
    assert g.write(tmp_path / "m.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert g.write(tmp_path / "m.dot").read_text() == g.source


def test_jupyter_shows_svg(no_system_dot):
    bundle = gf.draw_graph(micrograd())._repr_mimebundle_()
    assert list(bundle) == ["image/svg+xml"] and "<svg" in bundle["image/svg+xml"]


def test_bad_format_and_path_are_clear_errors(tmp_path):
    g = gf.draw_graph(micrograd())
    with pytest.raises(ValueError, match=r"cannot write '.*graph\.pdf': the format comes from the extension"):
        g.write(tmp_path / "graph.pdf")
    with pytest.raises(OSError, match="there is no directory '.*missing'"):
        g.write(tmp_path / "missing" / "graph.svg")
    with pytest.raises(ValueError, match="render: cannot draw the format 'pdf'"):
        gv.render(g.source, "pdf")


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"rankdir": "RL"}, "rankdir must be 'LR'"),
        ({"modules": "boxes"}, "modules must be None, 'cluster' or 'collapse'"),
        ({"max_elements": -1}, "max_elements must be a non-negative int"),
        ({"model": "gpt"}, "model must be an nn.Module"),
        ({"grads": "some"}, "grads must be True, False or 'all'"),
        ({"grads": 1}, "grads must be True, False or 'all'"),
    ],
)
def test_bad_options(kwargs, error):
    with pytest.raises((ValueError, TypeError), match=error):
        gf.draw_graph(micrograd(), **kwargs)
    with pytest.raises(TypeError, match="root must be a Tensor"):
        gf.draw_graph(np.ones(2))


# --- the command -------------------------------------------------------------------------------------


def test_cli_toy_walkthrough(no_system_dot, tmp_path, capsys):
    path = tmp_path / "toy.svg"
    assert main(["graph", "--toy", "-o", str(path)]) == 0
    assert "laid out by graphviz-pure" in capsys.readouterr().out
    text = " ".join(el.text or "" for el in ET.parse(path).getroot().iter())
    for name in ("W_1", "relu_h", "logits", "loss", "layer_norm", "log_softmax"):
        assert name in text


def png_size(path):
    """(width, height) in pixels, from the PNG's header chunk."""
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


@pytest.mark.parametrize("layout", ["dot", "graphviz-pure"])
def test_cli_pngs_fit_a_laptops_screen(layout, tmp_path, monkeypatch):
    """The toy's drawing is scaled down to 1600 pixels on its long side; the GPT's, smaller, keeps 96 dpi
    and its legend stands beside it as a narrow column."""
    if layout == "graphviz-pure":
        monkeypatch.setenv("PATH", str(tmp_path))
    elif shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    toy, gpt = tmp_path / "toy.png", tmp_path / "gpt.png"
    assert main(["graph", "--toy", "-o", str(toy)]) == 0 and main(["graph", "--model", "gpt", "-o", str(gpt)]) == 0
    assert max(png_size(toy)) == 1600
    width, height = png_size(gpt)
    assert height < 1600 and width < 0.7 * height


def test_cli_gpt_training_step(tmp_path):
    path = tmp_path / "gpt.dot"
    assert main(["graph", "--model", "gpt", "--n-layer", "2", "-o", str(path)]) == 0
    src = path.read_text()
    assert "blocks.1 (Block)" in src and "wte.weight" in src


@pytest.mark.parametrize(
    "output, message",
    [("graph.pdf", "the format comes from the extension"), ("missing/graph.svg", "there is no directory")],
)
def test_cli_errors_are_one_line(tmp_path, capsys, output, message):
    assert main(["graph", "--toy", "-o", str(tmp_path / output)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gradflow graph: cannot write") and message in err and err.count("\n") == 1


def test_cli_without_a_layout_program(no_system_dot, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(gv, "FALLBACK_PROGRAM", "no-such-graphviz")
    assert main(["graph", "--toy", "-o", str(tmp_path / "toy.svg")]) == 1
    assert "pip install no-such-graphviz" in capsys.readouterr().err
