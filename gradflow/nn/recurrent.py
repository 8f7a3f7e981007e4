"""Recurrent layers with PyTorch's signatures, weights and gate order: RNN, GRU, LSTM.

Each layer reads the sequence one step at a time, carrying a hidden state h (and, in the LSTM, a
cell state c) from step to step; layer l + 1 reads the hidden states of layer l. Layer l holds
weight_ih_l{l} (gates x input), weight_hh_l{l} (gates x hidden), bias_ih_l{l} and bias_hh_l{l},
initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), so a PyTorch state dict loads as it is:

    RNN    h' = tanh(W_ih x + b_ih + W_hh h + b_hh)                       (or relu)
    GRU    r = sigmoid(W_ir x + b_ir + W_hr h + b_hr)                     rows r, z, n of the weights
           z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
           n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
           h' = (1 - z) * n + z * h
    LSTM   i, f, g, o = W_ih x + b_ih + W_hh h + b_hh, cut in four       rows i, f, g, o
           c' = sigmoid(f) * c + sigmoid(i) * tanh(g);  h' = sigmoid(o) * tanh(c')

(Cho et al., "Learning Phrase Representations using RNN Encoder-Decoder"; Hochreiter and Schmidhuber,
"Long Short-Term Memory"). The input projection W_ih x + b_ih is computed for every step at once; the
steps themselves run in order, composed of the plain ops, so backward is backpropagation through time.
Input is (seq, batch, features), (batch, seq, features) with batch_first, or (seq, features) alone.
"""

import math

from gradflow.engine.creation import zeros
from gradflow.engine.functions import stack
from gradflow.engine.tensor import as_tensor
from gradflow.nn import functional as F
from gradflow.nn import init
from gradflow.nn.module import Module


class RecurrentLayers(Module):
    """What RNN, GRU and LSTM share: the weights of every layer, the input's layouts, dropout between layers."""

    gates = 1

    def __init__(self, op, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype):
        super().__init__()
        if bidirectional:
            raise ValueError(f"{op}: bidirectional=True is not supported; run a second {op} on the reversed sequence")
        if not 0 <= dropout < 1:
            raise ValueError(f"{op}: dropout must be in [0, 1), got {dropout}")
        if num_layers < 1:
            raise ValueError(f"{op}: num_layers must be at least 1, got {num_layers}")
        self.op, self.input_size, self.hidden_size, self.num_layers = op, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, dropout
        bound = 1 / math.sqrt(hidden_size)
        rows = self.gates * hidden_size
        for layer in range(num_layers):
            inputs = input_size if layer == 0 else hidden_size
            names = [("weight_ih", (rows, inputs)), ("weight_hh", (rows, hidden_size))]
            names += [("bias_ih", (rows,)), ("bias_hh", (rows,))] if bias else []
            for name, shape in names:
                setattr(self, f"{name}_l{layer}", init.uniform_(init.parameter(*shape, dtype=dtype), -bound, bound))

    def flatten_parameters(self):
        """Nothing to do: PyTorch packs the weights into one block of memory for cuDNN; here each weight
        is its own array already (kept so that programs calling it, after a DataParallel, run)."""

    def weights(self, layer):
        """(W_ih, W_hh, b_ih, b_hh) of one layer; the biases None without bias."""
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        return tuple(getattr(self, f"{name}_l{layer}", None) for name in names)

    def sequence_first(self, input):
        """input as (seq, batch, features), and whether it came without a batch axis."""
        x = as_tensor(input)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise ValueError(
                f"{self.op}: input must be (seq, batch, {self.input_size}), (batch, seq, {self.input_size}) with "
                f"batch_first, or (seq, {self.input_size}); got shape {x.shape}"
            )
        if x.ndim == 2:
            return x.unsqueeze(1), True
        return (x.transpose(0, 1) if self.batch_first else x), False

    def initial(self, name, state, batch, unbatched, dtype):
        """A state given as (num_layers, batch, hidden) (or (num_layers, hidden) unbatched), else zeros."""
        shape = (self.num_layers, batch, self.hidden_size)
        if state is None:
            return zeros(*shape, dtype=dtype)
        state = as_tensor(state)
        state = state.unsqueeze(1) if unbatched else state
        if state.shape != shape:
            raise ValueError(f"{self.op}: {name} must have shape {shape}, got {state.shape}")
        return state

    def layers(self, x, states):
        """Run every layer over x (seq, batch, features) from the states, one per layer, a tuple each;
        the last layer's outputs (seq, batch, hidden) and every layer's final state."""
        finals = []
        for layer in range(self.num_layers):
            if layer > 0:
                x = F.dropout(x, self.dropout, self.training)
            w_ih, w_hh, b_ih, b_hh = self.weights(layer)
            projected = F.linear(x, w_ih, b_ih)  # W_ih x + b_ih for every step at once
            state = states[layer]
            outputs = []
            for t in range(x.shape[0]):
                state = self.step(projected[t], state, w_hh, b_hh)
                outputs.append(state[0])
            x = stack(outputs)
            finals.append(state)
        return x, finals

    def outputs(self, x, unbatched):
        if unbatched:
            return x.squeeze(1)
        return x.transpose(0, 1) if self.batch_first else x

    def extra_repr(self):
        extras = [f"num_layers={self.num_layers}"] if self.num_layers != 1 else []
        extras += ["bias=False"] if not self.bias else []
        extras += ["batch_first=True"] if self.batch_first else []
        extras += [f"dropout={self.dropout}"] if self.dropout else []
        return ", ".join([f"{self.input_size}, {self.hidden_size}", *extras])


class RNN(RecurrentLayers):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (nonlinearity="relu": max(., 0)). forward(input, h0=None)
    returns (output, h_n): every step's hidden state of the last layer, and every layer's last one."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, dtype=None):  # fmt: skip
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)
        self.nonlinearity = nonlinearity

    def step(self, projected, state, w_hh, b_hh):
        (h,) = state
        pre = projected + F.linear(h, w_hh, b_hh)
        return (pre.tanh() if self.nonlinearity == "tanh" else pre.relu(),)

    def forward(self, input, hx=None):
        x, unbatched = self.sequence_first(input)
        h0 = self.initial("hx", hx, x.shape[1], unbatched, x.dtype)
        out, finals = self.layers(x, [(h0[layer],) for layer in range(self.num_layers)])
        h_n = stack([h for (h,) in finals])
        return self.outputs(out, unbatched), h_n.squeeze(1) if unbatched else h_n


class GRU(RecurrentLayers):
    """The gated recurrent unit (formulas above, rows r, z, n). forward(input, h0=None) -> (output, h_n)."""

    gates = 3

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):  # fmt: skip
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)

    def step(self, projected, state, w_hh, b_hh):
        (h,) = state
        x_r, x_z, x_n = projected.chunk(3, dim=-1)
        h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, dim=-1)
        r = (x_r + h_r).sigmoid()  # how much of the past the candidate reads
        z = (x_z + h_z).sigmoid()  # how much of the past each unit keeps
        n = (x_n + r * h_n).tanh()
        return ((1 - z) * n + z * h,)

    def forward(self, input, hx=None):
        x, unbatched = self.sequence_first(input)
        h0 = self.initial("hx", hx, x.shape[1], unbatched, x.dtype)
        out, finals = self.layers(x, [(h0[layer],) for layer in range(self.num_layers)])
        h_n = stack([h for (h,) in finals])
        return self.outputs(out, unbatched), h_n.squeeze(1) if unbatched else h_n


class LSTM(RecurrentLayers):
    """Long short-term memory (formulas above, rows i, f, g, o). forward(input, (h0, c0)=None) returns
    (output, (h_n, c_n))."""

    gates = 4

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=None):  # fmt: skip
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, dtype)

    def step(self, projected, state, w_hh, b_hh):
        h, c = state
        i, f, g, o = (projected + F.linear(h, w_hh, b_hh)).chunk(4, dim=-1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()  # forget some of the cell, write some of the candidate
        return o.sigmoid() * c.tanh(), c

    def forward(self, input, hx=None):
        x, unbatched = self.sequence_first(input)
        h0, c0 = (None, None) if hx is None else hx
        h0 = self.initial("h_0", h0, x.shape[1], unbatched, x.dtype)
        c0 = self.initial("c_0", c0, x.shape[1], unbatched, x.dtype)
        out, finals = self.layers(x, [(h0[layer], c0[layer]) for layer in range(self.num_layers)])
        h_n, c_n = stack([h for h, _ in finals]), stack([c for _, c in finals])
        if unbatched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self.outputs(out, unbatched), (h_n, c_n)
