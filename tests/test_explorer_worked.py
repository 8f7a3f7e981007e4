"""The explorer's backward step works one element of each gradient out on the page's own numbers
(gradflow/tools/explore_worked*.py): for every op of the plain tier, as the gradcheck table enumerates
them, and on every op of the toy, a 1-layer GPT and a 1-layer Llama, the worked value equals the
engine's gradient that panel ③ shows, to every digit shown. And the names the page gives tensors."""

import re

import numpy as np
import pytest
from helpers import all_ops  # every op of both tiers

import gradflow as gf
from gradflow.models.gpt import GPT, GPTConfig
from gradflow.models.llama import Llama, LlamaConfig
from gradflow.models.toy import ToyModel
from gradflow.tools.explore_names import short
from gradflow.tools.explore_view import Exploration, brief
from gradflow.tools.explore_worked_terms import number
from gradflow.tools.gradcheck_table import CASES
from gradflow.tools.graph import backward_keeping_every_grad


def explored(loss, model=None, names=None, decompositions=64):
    with np.errstate(all="ignore"):
        backward_keeping_every_grad(loss, "test", retain_graph=True)
    return Exploration(loss, model, names or {}, decompositions)


def unworked(exploration):
    """(op, why) for every op step of every graph whose worked elements miss an input or a digit of ③."""
    wrong, ops = [], 0
    for g in exploration.graphs:
        for op in g.ops:
            shares = [g.shares.get((op, i)) for i in range(len(op.inputs))]
            if all(s is None for s in shares):
                continue
            ops += 1
            items = exploration.worked(g, op) or []
            if {item["input"] for item in items} != {i for i, s in enumerate(shares) if s is not None}:
                wrong.append((op.name, "an input that gets a gradient is not worked"))
            for item in items:
                engine = shares[item["input"]][tuple(item["at"])]
                assert np.abs(shares[item["input"]]).max() == abs(engine)  # the largest element is the one worked
                assert not any(line.rstrip().endswith("...") or line.startswith("take") for line in item["lines"])
                cancelled = "rounding" in item and max(abs(engine), abs(item["value"])) <= item["rounding"]
                if number(engine) != number(item["value"]) and not cancelled:
                    wrong.append((op.name, f"worked {number(item['value'])}, engine {number(engine)}"))
    return wrong, ops


def test_every_plain_op_works_an_element_to_the_engines_digits():
    """One gradcheck case of each op the table names, float64, with a random upstream gradient."""
    seen = set()
    with gf.use_kernels("plain"):
        for case in {c.name: c for c in reversed(CASES)}.values():
            y = case.fn(*case.inputs())
            r = np.random.default_rng(0).standard_normal(y.shape)
            exploration = explored((y * gf.tensor(r)).sum(), decompositions=0)
            wrong, _ = unworked(exploration)
            assert not wrong, f"{case.label}: {wrong}"
            seen |= {type(op) for op in exploration.graphs[0].ops}
    plain = {op for op in all_ops() if op.__module__.startswith("gradflow.engine.")}
    missing = sorted(op.__name__ for op in plain if op not in seen)
    assert not missing, f"plain ops that no worked element was checked on: {missing}"
    assert len(plain) >= 55


def toy():
    model = ToyModel()
    out = model.walkthrough(model.encode("the cat sat"), target=model.config.vocab.index("on"))
    return out["loss"], model, {t: n for n, t in out.items()}


def small(kind):
    gf.manual_seed(0)
    if kind == "gpt":
        model = GPT(GPTConfig(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16))
    else:
        model = Llama(LlamaConfig(vocab_size=32, n_layer=1, d_model=16, n_heads=2, n_kv_heads=1, d_ff=32))
    ids = np.random.default_rng(0).integers(0, 32, size=(1, 9))
    _, loss = model(ids[:, :-1], ids[:, 1:])
    return loss, model, {loss: "loss"}


PAGES = {"toy": toy, "gpt": lambda: small("gpt"), "llama": lambda: small("llama")}


@pytest.mark.parametrize("which", PAGES)
def test_every_op_step_of_a_page_works_an_element_to_the_digits_shown(which):
    """float32, as the pages are built: the rule in float64 on the values forward saw gives ③'s digits."""
    with gf.use_kernels("plain"):
        exploration = explored(*PAGES[which]())
    wrong, ops = unworked(exploration)
    assert not wrong, wrong
    assert ops >= {"toy": 29, "gpt": 100, "llama": 100}[which]


def worked_lines(exploration, name):
    g = exploration.graphs[0]
    (op,) = [op for op in g.ops if op.name == name][:1]
    return "\n".join(line for item in exploration.worked(g, op) for line in item["lines"])


def test_the_fused_ops_are_worked_with_their_own_rules():
    with gf.use_kernels("plain"):
        gpt = explored(*small("gpt"), decompositions=0)
        llama = explored(*small("llama"), decompositions=0)
    ce = worked_lines(gpt, "cross_entropy")
    assert "softmax(z_n)_c" in ce and "onehot(t_n)_c" in ce and "/ 8" in ce  # (softmax - onehot) / N, N = 8 rows
    ln = worked_lines(gpt, "layer_norm")
    assert "r = 1 / sqrt(var + eps)" in ln and "mean(gh)" in ln and "mean(gh * xhat)" in ln
    assert "mean(gh * xhat)" in worked_lines(llama, "rms_norm")
    attention = worked_lines(gpt, "attention")
    assert "dS[i, j] = A[i, j] (dA[i, j] - s)" in attention and "A'[i, j]" in attention
    assert "lands in" in worked_lines(gpt, "embedding")  # where the gradient lands, summed over repeats


def test_a_softmax_element_is_its_rows_rule_on_its_numbers():
    x = gf.tensor([[0.5, -1.0, 2.0], [0.1, 0.2, 0.3]], requires_grad=True)
    g = np.array([[0.3, -0.7, 0.2], [1.0, 0.0, -1.0]])
    exploration = explored((x.softmax(-1) * gf.tensor(g)).sum())
    graph = exploration.graphs[0]
    (item,) = exploration.worked(graph, next(op for op in graph.ops if op.name == "softmax"))
    y = np.exp(x.data) / np.exp(x.data).sum(-1, keepdims=True)
    n, j = item["at"]
    s = (g[n] * y[n]).sum()
    assert item["value"] == pytest.approx(y[n, j] * (g[n, j] - s), rel=1e-6)
    assert "s = sum_i g_i y_i = " in "\n".join(item["lines"]) and number(s) in "\n".join(item["lines"])


def test_a_tensor_read_twice_is_worked_once_per_read_and_its_shares_summed():
    """x * x: the op reads x as a and as b; each read is worked under its own name, and the two shares add up
    to dL/dx = 2 x g, the engine's."""
    x = gf.tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    g = np.array([[0.5, 1.0], [-1.0, 2.0]])
    exploration = explored(((x * x) * gf.tensor(g)).sum(), names={x: "x"})
    graph = exploration.graphs[0]
    items = exploration.worked(graph, next(op for op in graph.ops if op.name == "mul" and op.inputs[0] is x))
    lines = [line for item in items for line in item["lines"]]
    assert len(lines) == len(set(lines)) == 4, lines
    assert lines[0] == "x is read twice, as a and b: each read sends a share"
    assert lines[1].startswith("dL/da[1, 0] = g[1, 0] * b") and lines[2].startswith("dL/db[1, 0] = g[1, 0] * a")
    assert lines[3] == f"dL/dx[1, 0] from this op = dL/da + dL/db = -3 + -3 = {number(x.grad.data[1, 0])}"
    assert x.grad.data[1, 0] == 2 * 3.0 * -1.0


@pytest.mark.parametrize("which", PAGES)
def test_names_keep_their_digits_close_their_brackets_and_never_name_two_tensors(which):
    with gf.use_kernels("plain"):
        exploration = explored(*PAGES[which]())
    for g in exploration.graphs:
        named = {}
        for t in [g.output[op] for op in g.ops] + [t for op in g.ops for t in op.inputs if t is not None]:
            title = exploration.title(g, t)
            assert title.count("(") == title.count(")") and title.count("[") == title.count("]"), title
            assert "… * …" not in title and "… + …" not in title, title
            assert not re.search(r"(^|[^\w.+-])0\d", title), f"a number cut at its point: {title}"
            if t.data.size > 1 and t.grad_fn is not None:
                named.setdefault(title, set()).add(id(t))
        twice = {title for title, ts in named.items() if len(ts) > 1}
        assert not twice, f"one name for two tensors: {twice}"


def test_gelus_constant_keeps_its_digits_and_an_opened_op_keeps_outside_names():
    with gf.use_kernels("plain"):
        gpt = explored(*small("gpt"))
        loss, model, names = toy()
        toy_page = explored(loss, model, names)
    constants = {title for g in gpt.graphs for title in g.titles.values() if "4471" in title}
    assert constants and all("0.04471" in title for title in constants), constants
    outside = set(toy_page.graphs[0].titles.values())
    for g in toy_page.graphs[1:]:  # each fused op opened: its inputs are the tensors the toy names
        inputs = [t for op in g.ops for t in op.inputs if t is not None and t.grad_fn is None and t.requires_grad]
        leaves = {toy_page.title(g, t) for t in inputs}
        assert leaves <= outside, leaves - outside


def test_short_names_shorten_at_their_parts():
    assert short("reshape(blocks.0.attn.q_proj out)") == "reshape(attn.q_proj out)"
    assert short("silu(layers.0.ffn.gate_proj out)") == "silu(ffn.gate_proj out)"
    assert short("0.04471") == "0.04471"
    assert short("(embed_tokens out) + (layers.0.attn out)") == "add(…)"
    for text in ["permute(reshape(layers.0.attn.q_proj out))", "(0.04471 * (ffn.fc1 out)) * (blocks.0.ffn.fc1 out)"]:
        s = short(text)
        assert len(s) <= 24 and s.count("(") == s.count(")") and s != "…"


def test_a_large_gradient_is_a_heat_map_with_the_worked_element_marked():
    a = np.random.default_rng(0).standard_normal((2, 3, 40, 50))
    shown = brief(a, (1, 2, 17, 33))
    heat = shown["heat"]
    assert heat["lead"] == [1, 2] and len(heat["rows"]) <= 32 and len(heat["cols"]) <= 32
    r, c = heat["mark"]
    assert heat["rows"][r] == 17 and heat["cols"][c] == 33  # the marked element's own row and column are kept
    assert heat["values"][r * len(heat["cols"]) + c] == pytest.approx(a[1, 2, 17, 33], rel=1e-3)
    assert shown["marked"] == {"at": [1, 2, 17, 33], "value": pytest.approx(a[1, 2, 17, 33], rel=1e-5)}
    assert "heat" in brief(np.ones(65)) and "values" in brief(np.ones(64))  # every gradient of more than 64 numbers
