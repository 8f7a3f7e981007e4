"""Transformer blocks: attention and feed-forward sublayers, each wrapped in a residual and a norm.

    pre-norm  (GPT-2, Llama):                         x = x + Attn(Norm(x));   x = x + FFN(Norm(x))
    post-norm (the 2017 Transformer, "Add & Norm"):   x = Norm(x + Attn(x));   x = Norm(x + FFN(x))

Pre-norm leaves the residual stream x untouched by normalisation, so gradients reach early layers
along an identity path; post-norm normalises the stream itself after every sublayer.

GPT-2's block is written out in models/gpt.py; this one, with its choices as arguments, builds
Llama's (models/llama.py) and the 2017 Transformer's (models/transformer.py).
"""

from functools import partial

from gradflow.nn.ffn import MLP, SwiGLU
from gradflow.nn.general_attention import GeneralAttention
from gradflow.nn.layers import LayerNorm, RMSNorm
from gradflow.nn.module import Module


def make_norm(kind, d_model, eps, dtype=None):
    if kind == "layer":
        return LayerNorm(d_model, eps=eps, dtype=dtype)
    if kind == "rms":
        return RMSNorm(d_model, eps=eps, dtype=dtype)
    raise ValueError(f"norm must be 'layer' or 'rms', got {kind!r}")


class TransformerBlock(Module):
    """One block: self-attention, optional cross-attention (a decoder's view of the encoder), FFN.

    ffn: "relu" or "gelu" (two-layer MLP) or "swiglu"; norm: "layer" or "rms"; norm_first: pre-norm.
    forward(x, context=None, causal=False, mask=None, lengths=None, context_lengths=None, context_mask=None,
            cache=None, need_weights=False): mask/lengths restrict self-attention, context_mask/context_lengths
    cross-attention; need_weights keeps each attention's weights in its `.weights`, for pictures.
    """

    def __init__(
        self,
        d_model,
        n_heads,
        d_ff,
        n_kv_heads=None,
        ffn="gelu",
        norm="layer",
        norm_first=True,
        eps=1e-5,
        bias=True,
        attn_bias=None,
        cross_attention=False,
        rope=None,
        dropout=0.0,
        dtype=None,
    ):
        super().__init__()
        self.norm_first = norm_first
        attn_bias = bias if attn_bias is None else attn_bias
        self.attn_norm = make_norm(norm, d_model, eps, dtype)
        self.attn = GeneralAttention(
            d_model, n_heads, n_kv_heads, bias=attn_bias, out_bias=bias, rope=rope, dropout=dropout, dtype=dtype
        )
        self.cross_attn = None
        if cross_attention:
            self.cross_norm = make_norm(norm, d_model, eps, dtype)
            self.cross_attn = GeneralAttention(d_model, n_heads, n_kv_heads, bias=bias, dropout=dropout, dtype=dtype)
        self.ffn_norm = make_norm(norm, d_model, eps, dtype)
        if ffn == "swiglu":
            self.ffn = SwiGLU(d_model, d_ff, bias=bias, dropout=dropout, dtype=dtype)
        else:
            self.ffn = MLP(d_model, d_ff, activation=ffn, bias=bias, dropout=dropout, dtype=dtype)

    def _sublayer(self, x, norm, fn):
        """Residual around fn, with the norm before fn (pre-norm) or after the sum (post-norm)."""
        return x + fn(norm(x)) if self.norm_first else norm(x + fn(x))

    def forward(
        self,
        x,
        context=None,
        causal=False,
        mask=None,
        lengths=None,
        context_lengths=None,
        context_mask=None,
        cache=None,
        need_weights=False,
    ):
        attend = partial(self.attn, causal=causal, mask=mask, lengths=lengths, cache=cache, need_weights=need_weights)
        x = self._sublayer(x, self.attn_norm, attend)
        if self.cross_attn is not None:
            if context is None:
                raise ValueError("TransformerBlock: a block with cross-attention needs a context")
            attend_context = partial(
                self.cross_attn, context=context, mask=context_mask, lengths=context_lengths, need_weights=need_weights
            )
            x = self._sublayer(x, self.cross_norm, attend_context)
        return self._sublayer(x, self.ffn_norm, self.ffn)
