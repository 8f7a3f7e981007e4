"""Linear regression and softmax regression from scratch, written for PyTorch in the idiom of "Dive into
Deep Learning" (d2l-ai/d2l-en: its chapters on linear regression and softmax regression implemented
from scratch, and the utilities they add to the d2l package).

Parameters are bare tensors made with `torch.normal(..., requires_grad=True)`; minibatches come from a
generator that shuffles a list of indices with `random.shuffle` and indexes the data with
`torch.tensor(indices)`; minibatch SGD is written by hand, `param -= lr * param.grad / batch_size`
and `param.grad.zero_()` under no_grad. Softmax regression adds a softmax and cross-entropy by hand,
accuracy as `y_hat.argmax(axis=1)` compared after `.type(y.dtype)`, an Accumulator of Python floats,
and a training loop that takes the hand-written updater or, for the concise model (nn.Sequential,
`net.apply(init_weights)`, CrossEntropyLoss(reduction="none")), a torch.optim.Optimizer. The data
are synthetic: a line with noise, and small noisy images of four templates in place of Fashion-MNIST.

tests/test_programs.py runs it as written and with only its import lines changed, from the same data
and weights.
"""

import random

import torch
from torch import nn
from torch.utils import data

# --- linear regression from scratch ------------------------------------------------------------------


def synthetic_data(w, b, num_examples):
    """y = X w + b + noise: X drawn from N(0, 1), the noise from N(0, 0.01^2)."""
    X = torch.normal(0, 1, (num_examples, len(w)))
    y = torch.matmul(X, w) + b
    y += torch.normal(0, 0.01, y.shape)
    return X, y.reshape((-1, 1))


def data_iter(batch_size, features, labels):
    """The examples in a random order, batch_size at a time (the last batch may be smaller)."""
    num_examples = len(features)
    indices = list(range(num_examples))
    random.shuffle(indices)
    for i in range(0, num_examples, batch_size):
        batch_indices = torch.tensor(indices[i : min(i + batch_size, num_examples)])
        yield features[batch_indices], labels[batch_indices]


def init_params():
    """w drawn from N(0, 0.01^2), b zero: the leaves gradient descent changes."""
    w = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    return w, b


def linreg(X, w, b):
    """X w + b (b broadcast to every example)"""
    return torch.matmul(X, w) + b


def squared_loss(y_hat, y):
    """(y_hat - y)^2 / 2 for each example"""
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def sgd(params, lr, batch_size):
    """param <- param - lr * grad / batch_size: the gradient of the batch's sum, as its mean."""
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def train_linreg(w, b, features, labels, lr=0.03, num_epochs=3, batch_size=10):
    """The loss over all the data after each epoch."""
    net, loss = linreg, squared_loss
    losses = []
    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels):
            l = loss(net(X, w, b), y)  # (batch_size, 1)
            l.sum().backward()
            sgd([w, b], lr, batch_size)
        with torch.no_grad():
            train_l = loss(net(features, w, b), labels)
            print(f"epoch {epoch + 1}, loss {float(train_l.mean()):f}")
        losses.append(float(train_l.mean()))
    return losses


# --- softmax regression from scratch -----------------------------------------------------------------

text_labels = ["stripe", "ring", "corner", "speck"]
num_inputs, num_outputs = 16, len(text_labels)  # images of 4 x 4 pixels, flattened


def synthetic_images(num_examples, side=4):
    """Images of one channel, side x side: a class's template, drawn once from N(0, 1), plus noise."""
    templates = torch.normal(0, 1, (num_outputs, 1, side, side))
    y = torch.randint(0, num_outputs, (num_examples,))
    X = templates[y] + torch.normal(0, 2.0, (num_examples, 1, side, side))
    return X, y


def load_array(data_arrays, batch_size, is_train=True):
    """A DataLoader over tensors, shuffled for training."""
    dataset = data.TensorDataset(*data_arrays)
    return data.DataLoader(dataset, batch_size, shuffle=is_train)


W = torch.normal(0, 0.01, size=(num_inputs, num_outputs), requires_grad=True)
b = torch.zeros(num_outputs, requires_grad=True)


def softmax(X):
    """exp(X_ij) / sum_k exp(X_ik), row by row (no guard against overflow: the logits here are small)."""
    X_exp = torch.exp(X)
    partition = X_exp.sum(1, keepdim=True)
    return X_exp / partition


def net(X):
    return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)


def cross_entropy(y_hat, y):
    """-log of the probability given to the right class, for each example."""
    return -torch.log(y_hat[range(len(y_hat)), y])


def accuracy(y_hat, y):
    """How many predictions are right."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


class Accumulator:
    """Sums of n numbers, as Python floats."""

    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def evaluate_accuracy(net, data_iter):
    """The share of right predictions over a dataset."""
    if isinstance(net, torch.nn.Module):
        net.eval()
    metric = Accumulator(2)  # right predictions, predictions
    with torch.no_grad():
        for X, y in data_iter:
            metric.add(accuracy(net(X), y), y.numel())
    return metric[0] / metric[1]


def train_epoch_ch3(net, train_iter, loss, updater):
    """One epoch: the mean loss and the accuracy over it."""
    if isinstance(net, torch.nn.Module):
        net.train()
    metric = Accumulator(3)  # summed loss, right predictions, examples
    for X, y in train_iter:
        y_hat = net(X)
        l = loss(y_hat, y)
        if isinstance(updater, torch.optim.Optimizer):
            updater.zero_grad()
            l.mean().backward()
            updater.step()
        else:
            l.sum().backward()
            updater(X.shape[0])
        metric.add(float(l.sum()), accuracy(y_hat, y), y.numel())
    return metric[0] / metric[2], metric[1] / metric[2]


def train_ch3(net, train_iter, test_iter, loss, num_epochs, updater):
    """Each epoch's (train loss, train accuracy, test accuracy)."""
    history = []
    for epoch in range(num_epochs):
        train_metrics = train_epoch_ch3(net, train_iter, loss, updater)
        test_acc = evaluate_accuracy(net, test_iter)
        history.append((*train_metrics, test_acc))
        print(
            f"epoch {epoch + 1}, loss {train_metrics[0]:.3f}, train acc {train_metrics[1]:.3f}, test acc {test_acc:.3f}"
        )
    train_loss, train_acc = train_metrics
    assert 0 < train_acc <= 1 and 0 < test_acc <= 1, (train_acc, test_acc)
    return history


lr = 0.1


def updater(batch_size):
    return sgd([W, b], lr, batch_size)


def get_labels(labels):
    return [text_labels[int(i)] for i in labels]


def predict_ch3(net, test_iter, n=6):
    """The first n test images' true and predicted labels."""
    X, y = next(iter(test_iter))
    trues = get_labels(y)
    preds = get_labels(net(X).argmax(axis=1))
    return list(zip(trues, preds))[:n]


def init_weights(m):
    if type(m) is nn.Linear:
        nn.init.normal_(m.weight, std=0.01)


def concise_net():
    """The same model from layers: flatten the image, one Linear; the softmax is inside the loss."""
    net = nn.Sequential(nn.Flatten(), nn.Linear(num_inputs, num_outputs))
    net.apply(init_weights)
    return net


if __name__ == "__main__":
    random.seed(0)
    torch.manual_seed(0)
    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features, labels = synthetic_data(true_w, true_b, 1000)
    print("features:", features[0], "\nlabel:", labels[0])
    w_hat, b_hat = init_params()
    linreg_losses = train_linreg(w_hat, b_hat, features, labels)
    print(f"error in estimating w: {true_w - w_hat.reshape(true_w.shape)}")
    print(f"error in estimating b: {true_b - b_hat}")

    X, y = synthetic_images(1200)
    train_iter = load_array((X[:1000], y[:1000]), 32)
    test_iter = load_array((X[1000:], y[1000:]), 32, is_train=False)
    scratch = train_ch3(net, train_iter, test_iter, cross_entropy, 5, updater)
    predictions = predict_ch3(net, test_iter)
    net_concise = concise_net()
    trainer = torch.optim.SGD(net_concise.parameters(), lr=0.1)
    concise = train_ch3(net_concise, train_iter, test_iter, nn.CrossEntropyLoss(reduction="none"), 5, trainer)
