"""PyTorch's transformer decoder and the whole encoder-decoder, nn.Transformer, with PyTorch's signatures,
parameter names and initialisation, so that a PyTorch state dict loads as it is (Vaswani et al.,
"Attention Is All You Need"). encoder.py holds the attention and the encoder; a decoder layer adds one
step between the two, attention from the target to the encoder's output (the memory):

    DecoderLayer (post)  x = norm1(x + dropout1(self_attn(x)))
                         x = norm2(x + dropout2(multihead_attn(x, memory)))
                         x = norm3(x + dropout3(ff(x)))
    DecoderLayer (pre)   the same with each norm applied to the step's input instead (norm_first)
    Transformer          memory = encoder(src); out = decoder(tgt, memory), each stack ending in a LayerNorm
"""

import copy

import numpy as np

from gradflow.engine.tensor import Tensor, as_tensor
from gradflow.nn import init
from gradflow.nn.encoder import MultiheadAttention, TransformerEncoder, TransformerEncoderLayer, activation_of
from gradflow.nn.layers import Dropout, LayerNorm, Linear
from gradflow.nn.module import Module, ModuleList


class TransformerDecoderLayer(Module):
    """PyTorch's nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu", layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True): the
    encoder layer's self-attention and feed-forward net, with attention to the memory between them
    (its parameters in PyTorch's order, so that parameters() and a state dict line up with PyTorch's)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu", layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, dtype=None):  # fmt: skip
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.activation = activation_of("TransformerDecoderLayer", activation)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2, self.dropout3 = Dropout(dropout), Dropout(dropout), Dropout(dropout)

    feed_forward = TransformerEncoderLayer.feed_forward  # linear2(dropout(activation(linear1(x))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):  # fmt: skip
        x, memory = as_tensor(tgt), as_tensor(memory)

        def attend(x):  # to the target so far
            out, _ = self.self_attn(x, x, x, tgt_key_padding_mask, False, tgt_mask, is_causal=bool(tgt_is_causal))
            return self.dropout1(out)

        def recall(x):  # to the memory, the encoder's output
            out, _ = self.multihead_attn(
                x, memory, memory, memory_key_padding_mask, False, memory_mask, is_causal=bool(memory_is_causal)
            )
            return self.dropout2(out)

        if self.norm_first:
            x = x + attend(self.norm1(x))
            x = x + recall(self.norm2(x))
            return x + self.dropout3(self.feed_forward(self.norm3(x)))
        x = self.norm1(x + attend(x))
        x = self.norm2(x + recall(x))
        return self.norm3(x + self.dropout3(self.feed_forward(x)))


class TransformerDecoder(Module):
    """PyTorch's nn.TransformerDecoder(decoder_layer, num_layers, norm=None): num_layers copies of the layer
    (each with weights of its own), then norm if given."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers, self.norm = num_layers, norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):  # fmt: skip
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                      bool(tgt_is_causal), memory_is_causal)  # fmt: skip
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """PyTorch's nn.Transformer(d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
    dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None,
    layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True): an encoder stack and a decoder
    stack, each closed by a LayerNorm, every matrix drawn by Xavier's uniform rule as PyTorch's are."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1, activation="relu", custom_encoder=None, custom_decoder=None, layer_norm_eps=1e-5,
                 batch_first=False, norm_first=False, bias=True, device=None, dtype=None):  # fmt: skip
        super().__init__()
        options = (dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias, dtype)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, *options),
            num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype),
        )
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, *options),
            num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype),
        )
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):  # fmt: skip
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                            tgt_is_causal, memory_is_causal)  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The causal mask as PyTorch adds it to the scores: -inf above the diagonal (the future), 0 on and
        below it, (sz, sz), float32 unless dtype says."""
        return Tensor(np.triu(np.full((sz, sz), -np.inf), 1).astype(dtype or np.float32))
