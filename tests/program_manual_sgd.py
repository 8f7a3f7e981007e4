"""Gradient descent written by hand, as PyTorch's first tutorials write it: fit a cubic
y = a + b x + c x^2 + d x^3 to cos(x) on [-2, 2] by the sum of squared errors, the update
`w -= learning_rate * w.grad` under no_grad, first on four bare tensors, then on a module's parameters.

tests/test_programs.py runs it as written and with only its import lines changed.
"""

import math

import torch

x = torch.linspace(-2, 2, 200)
y = torch.cos(x)
learning_rate = 1e-4


def coefficients():
    """a, b, c, d: four scalars drawn from N(0, 1), to learn."""
    return [torch.randn((), requires_grad=True) for _ in range(4)]


def fit(a, b, c, d, steps=300, forget="none"):
    """Steps of descent on the bare tensors; the gradients forgotten by setting them to None, or by
    zero_() in place (forget="zero_"). The loss before each step."""
    losses = []
    for t in range(steps):
        y_pred = a + b * x + c * x**2 + d * x**3
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        if t % 100 == 99:
            print(t, loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            for w in (a, b, c, d):
                if forget == "zero_":
                    w.grad.zero_()
                else:
                    w.grad = None
    print(f"Result: y = {a.item():.4f} + {b.item():.4f} x + {c.item():.4f} x^2 + {d.item():.4f} x^3")
    return losses


def polynomial_model():
    """The cubic as a layer: the features x, x^2, x^3 into Linear(3, 1), flattened to one number per x."""
    return torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))


def fit_module(model, steps=300):
    powers = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(powers)  # (200, 3)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    losses = []
    for t in range(steps):
        loss = loss_fn(model(xx), y)
        losses.append(loss.item())
        if t % 100 == 99:
            print(t, loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    linear_layer = model[0]
    print(
        f"Result: y = {linear_layer.bias.item():.4f} + {linear_layer.weight[:, 0].item():.4f} x"
        f" + {linear_layer.weight[:, 1].item():.4f} x^2 + {linear_layer.weight[:, 2].item():.4f} x^3"
    )
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    by_hand = fit(*coefficients())
    zeroed = fit(*coefficients(), forget="zero_")
    with_module = fit_module(polynomial_model())
    print(f"cos(1) = {math.cos(1):.4f}")
