"""Neural-network layers: Module and Parameter, containers, layers, attention, positions, blocks, and F.

functional.py (imported as F) holds the functions a transformer is made of (softmax,
cross_entropy, layer_norm, attention, ...), each one call to an op of gradflow/engine/ops;
the Modules here hold the parameters and call F. Read layers.py first, then attention.py (GPT-2's
attention); kv_cache.py and general_attention.py add decoding, masks, grouped-query heads and RoPE.
activations.py and losses.py wrap F's functions as Modules, recurrent.py holds RNN, GRU and LSTM,
batchnorm.py BatchNorm1d, encoder.py PyTorch's MultiheadAttention and TransformerEncoder(Layer), decoder.py
TransformerDecoder(Layer) and the whole nn.Transformer,
and utils.py clips gradients, with PyTorch's names, so PyTorch model code runs as written.
Built on the engine only: nothing here knows of training, text or the command line.
"""

from gradflow.nn import init, lora, modules, parameter, utils
from gradflow.nn.activations import (
    ELU,
    GELU,
    GLU,
    Hardtanh,
    Identity,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from gradflow.nn.attention import CausalSelfAttention
from gradflow.nn.batchnorm import BatchNorm1d
from gradflow.nn.blocks import TransformerBlock
from gradflow.nn.decoder import Transformer, TransformerDecoder, TransformerDecoderLayer
from gradflow.nn.encoder import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer
from gradflow.nn.ffn import MLP, SwiGLU
from gradflow.nn.general_attention import GeneralAttention, padding_mask
from gradflow.nn.kv_cache import KVCache
from gradflow.nn.layers import Dropout, Embedding, Flatten, LayerNorm, Linear, RMSNorm
from gradflow.nn.lora import LoRALinear
from gradflow.nn.losses import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss
from gradflow.nn.module import Module, ModuleDict, ModuleList, Parameter, Sequential
from gradflow.nn.positional import (
    LearnedPositionalEncoding,
    RotaryEmbedding,
    SinusoidalPositionalEncoding,
    sinusoidal_table,
)
from gradflow.nn.recurrent import GRU, LSTM, RNN

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "CausalSelfAttention", "CrossEntropyLoss", "Dropout", "ELU",
    "Embedding", "Flatten", "GELU", "GLU", "GRU", "Hardtanh", "Identity", "KLDivLoss", "KVCache", "L1Loss", "LSTM",
    "LayerNorm", "LeakyReLU", "LearnedPositionalEncoding", "Linear", "LoRALinear", "LogSigmoid", "LogSoftmax", "MLP",
    "MSELoss", "Mish", "Module", "ModuleDict", "ModuleList", "MultiheadAttention", "NLLLoss",
    "Parameter", "RMSNorm", "RNN", "ReLU", "ReLU6", "RotaryEmbedding", "Sequential", "SiLU", "Sigmoid",
    "SinusoidalPositionalEncoding", "Softmax", "Softplus", "SwiGLU", "Tanh", "TransformerBlock", "TransformerEncoder",
    "TransformerEncoderLayer", "init", "lora", "padding_mask", "sinusoidal_table", "utils",
    "Transformer", "TransformerDecoder", "TransformerDecoderLayer", "GeneralAttention",
    "modules", "parameter",  # PyTorch's torch.nn.modules.<sub>.<Class> and torch.nn.parameter paths
]  # fmt: skip


def __getattr__(name):
    # PyTorch has no nn.MultiHeadAttention: the spelling one capital letter from nn.MultiheadAttention
    # is refused, so that neither layer's mask convention is ever taken for the other's.
    if name == "MultiHeadAttention":
        raise AttributeError(
            "gradflow.nn has no MultiHeadAttention: PyTorch's layer is nn.MultiheadAttention (boolean masks "
            "True = masked out), gradflow's own is nn.GeneralAttention (True = may attend)"
        )
    raise AttributeError(f"module 'gradflow.nn' has no attribute {name!r}")
