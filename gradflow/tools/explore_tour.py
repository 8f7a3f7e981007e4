"""The explorer's guided tour: a few captioned stops through one training step, each tied to nodes.

    forward, three stops    the first op, and two more a third and two thirds of the way along
    the loss                the number backward starts from, dL/dL = 1
    backward                through the head, the attention and a LayerNorm, where the model has them
    a weight's gradient     and the update a plain SGD step (w <- w - lr dL/dw) would give it

A stop is {"view", "node", "step": "forward" | "backward" | None, "caption"}; the page opens the
view, puts step mode on the node (or selects it) and shows the caption. The learner leaves the tour
at any stop and explores from there.
"""

import math

import numpy as np

LR = 0.1  # the learning rate of the update the last stop works out

DOES = {
    "embedding": "looks up one row of the embedding table per token",
    "index": "picks out part of a tensor",
    "matmul": "multiplies by a weight matrix: each output is a weighted sum of the inputs",
    "linear": "is a linear layer, x W^T + b",
    "add": "adds two tensors (a bias, or a residual connection that lets the signal skip a block)",
    "relu": "keeps the positive numbers and zeroes the rest",
    "gelu": "is a smooth ReLU",
    "layer_norm": "rescales each row to mean 0 and variance 1, then scales and shifts it",
    "attention": "lets every position mix in the values of the positions it attends to",
    "log_softmax": "turns scores into log-probabilities",
    "cross_entropy": "compares the predicted distribution with the true next token",
}

BACK = {
    "attention": "Backward through attention: the gradient reaches q, k and v through the softmax of "
    "q k^T. Open it (⊕) to follow each of its plain ops.",
    "layer_norm": "Backward through LayerNorm: every output depends on its row's mean and variance, so "
    "the gradient sent back is centred and rescaled, not just passed through.",
}


def _ops(views):
    """(view index, op node id, op info) of every op in the computation's own views, in view order."""
    for i, v in enumerate(views):
        if v.get("main"):
            for uid in v["steps"]:
                if v["nodes"][uid]["kind"] == "op":
                    yield i, uid, v["nodes"][uid]


def _does(views, i, uid):
    info, nodes = views[i]["nodes"][uid], views[i]["nodes"]
    if info["kind"] == "module":
        return f"{info['name']} ({info['cls']}) runs; click it to open its own ops"
    out = nodes[info["output"]]["title"]
    what = DOES.get(info["name"], f"computes {out}")
    return f"{info['name']} {what}, making {out}"


def _update(weight):
    """The SGD update of a weight's number of largest gradient (of its norm when its numbers are not written
    out): w - lr g, the product lr g written, every number to the decimal place that shows the change."""
    data, grad = weight["data"], weight["grad"]
    if grad is None:
        return "It got no gradient."
    if "values" in data and "values" in grad:
        k = max(range(len(grad["values"])), key=lambda i: abs(grad["values"][i]))
        w, g = data["values"][k], grad["values"][k]
        at = ", ".join(str(int(i)) for i in np.unravel_index(k, weight["shape"]))
        step = LR * g
        places = _places(w, step)
        return (
            f"An SGD step w <- w - {LR} dL/dw moves {weight['title']}[{at}], the number with the largest "
            f"gradient, from {w:.{places}f} to {w:.{places}f} - {LR} * {g:.4g} = {w:.{places}f} - {step:.{places}f} "
            f"= {w - step:.{places}f}."
        )
    return f"An SGD step w <- w - {LR} dL/dw moves it by {LR} * {grad['stats']['norm']:.4g} in norm."


def _places(*numbers):
    """Decimal places that show 4 significant digits of each number (and so the step between them)."""
    return min(12, max([4] + [3 - math.floor(math.log10(abs(v))) for v in numbers if v]))


def tour(views):
    """The stops (see the module docstring) of the page's views."""
    main = views[0]
    units = main["steps"]
    if not units:
        return []
    ops = list(_ops(views))
    attention = [(i, uid) for i, uid, info in ops if info["name"] == "attention"]
    middle = attention[:1] or [(0, units[len(units) // 3])]
    forward = [(0, units[0])] + [s for s in middle if s != (0, units[0])] + [(0, units[(2 * len(units)) // 3])]
    stops = []
    for n, (i, uid) in enumerate(dict.fromkeys(forward)):
        lead = "The forward pass runs the graph from top to bottom. " if n == 0 else "Forward: "
        stops.append({"view": i, "node": uid, "step": "forward", "caption": lead + _does(views, i, uid) + "."})
    root = [t for t, info in main["nodes"].items() if info["kind"] == "tensor" and info["tkind"] == "result"]
    if root:
        loss = main["nodes"][root[0]]
        value = loss["data"].get("values", [None])[0] if loss["data"] else None
        said = f" = {value:.4g}" if isinstance(value, float) else ""
        named = "" if loss["title"] == "loss" else f", {loss['title']},"  # not "The loss loss = ..."
        stops.append(
            {
                "view": 0,
                "node": root[0],
                "step": None,
                "caption": f"The loss{named}{said}. Backward starts here from dL/dL = 1 and runs "
                "the ops in reverse, each turning the gradient of its output into gradients of its inputs.",
            }
        )
    stops.append(
        {
            "view": 0,
            "node": units[-1],
            "step": "backward",
            "caption": f"Backward through the head ({main['nodes'][units[-1]]['name']}): g comes in from the "
            "loss, the local rule turns it into the gradient sent to each input.",
        }
    )
    for name in ("attention", "layer_norm"):
        found = [(i, uid) for i, uid, info in ops if info["name"] == name]
        if found:
            i, uid = found[-1]  # the last in forward order: the first backward reaches
            stops.append({"view": i, "node": uid, "step": "backward", "caption": BACK[name]})
    for i, _, info in ops:
        if info["name"] not in ("matmul", "linear"):
            continue
        leaves = [t for t in info["inputs"] if t in views[i]["nodes"] and views[i]["nodes"][t].get("tkind") == "leaf"]
        if leaves:
            weight = views[i]["nodes"][leaves[0]]
            caption = f"The gradient of the weight {weight['title']}: how the loss changes with each of its numbers. "
            stops.append({"view": i, "node": leaves[0], "step": None, "caption": caption + _update(weight)})
            break
    return stops
