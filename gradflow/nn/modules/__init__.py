"""torch.nn.modules: gradflow's layers under the paths PyTorch gives them, torch.nn.modules.rnn.LSTM and the rest.

A program names classes by these paths where it allows them for a weights-only load
(`torch.serialization.safe_globals([torch.nn.modules.rnn.LSTM, ...])`); each name here is gradflow's own
class, the one gradflow.nn exports, so allowing it by either name allows the same class.
"""

from gradflow.nn.modules import (
    activation,
    batchnorm,
    container,
    dropout,
    flatten,
    linear,
    loss,
    module,
    normalization,
    rnn,
    sparse,
    transformer,
)

__all__ = [
    "activation",
    "batchnorm",
    "container",
    "dropout",
    "flatten",
    "linear",
    "loss",
    "module",
    "normalization",
    "rnn",
    "sparse",
    "transformer",
]
