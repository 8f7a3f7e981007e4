"""The original encoder-decoder Transformer (Vaswani et al., 2017), with the equations of
"A Brief Introduction to (some of) the Math Behind the Transformer".

A side trip: read after gradflow/nn/general_attention.py and gradflow/nn/blocks.py; next, gpt.py, its decoder half
alone.

    source ids (B, S) ──> embed * sqrt(d) + PE ──> N x [self-attention, Add & Norm, FFN, Add & Norm]  = memory
    target ids (B, T) ──> embed * sqrt(d) + PE ──> N x [masked self-attention, Add & Norm,
                                                        cross-attention to memory, Add & Norm,
                                                        FFN, Add & Norm]
                      ──> Linear ──> softmax: P(y_t = v | y_<t, source)

Every sublayer is wrapped in "Add & Norm" (post-norm):  Z = LayerNorm(X + Sublayer(X)), with

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k) + M) V,      M_ij = 0 where allowed, -inf where not
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,      head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)
    FFN(X) = max(0, X W_1 + b_1) W_2 + b_2
    PE[n, 2i] = sin(n / 10000^(2i/d)),   PE[n, 2i+1] = cos(n / 10000^(2i/d))

Two masks keep information where it belongs:
  - padding: no query (encoder self-attention or decoder cross-attention) attends to a source key
    j >= src_lengths[b], so the tokens in padded source positions never reach any output;
  - causal: decoder position t attends only to target positions <= t, so the prediction of y_t
    never sees y_t or anything after it (the input at t is y_(t-1), shifted right behind BOS).

The paper shares one matrix between the two embeddings and the head; here each has its own.

Shapes: B batch, S source length, T target length, d = d_model, V = target vocabulary.
"""

import math
from dataclasses import dataclass

import numpy as np

import gradflow as gf
from gradflow import nn
from gradflow.nn import functional as F


@dataclass
class TransformerConfig:
    src_vocab: int = 16
    tgt_vocab: int = 16
    d_model: int = 64  # d: width of every token vector
    n_heads: int = 4  # h: d_k = d_v = d / h per head
    d_ff: int = 256  # inner width of the feed-forward network (4 d in the paper)
    n_enc_layers: int = 2
    n_dec_layers: int = 2
    max_len: int = 64  # longest source or target sequence the positional table covers
    dropout: float = 0.0  # on embeddings + PE, attention weights and every sublayer's output
    pad_id: int = 0  # padding token: ignored by the loss, and the source padding when lengths are not given
    eps: float = 1e-5  # LayerNorm epsilon


class Transformer(nn.Module):
    """Encoder-decoder Transformer: forward(src, tgt_in, targets=None, src_lengths=None) -> (logits, loss)."""

    def __init__(self, config):
        super().__init__()
        self.config = c = config

        def block(cross_attention):
            return nn.TransformerBlock(
                c.d_model,
                c.n_heads,
                c.d_ff,
                ffn="relu",
                norm="layer",
                norm_first=False,
                eps=c.eps,
                cross_attention=cross_attention,
                dropout=c.dropout,
            )

        # Embeddings start at N(0, 1/d), so that E[id] * sqrt(d) has unit scale, like PE's entries.
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.d_model)
        nn.init.normal_(self.src_embed.weight, std=c.d_model**-0.5)
        nn.init.normal_(self.tgt_embed.weight, std=c.d_model**-0.5)
        self.pos = nn.SinusoidalPositionalEncoding(c.d_model, max_len=c.max_len)
        self.drop = nn.Dropout(c.dropout)
        self.encoder = nn.ModuleList([block(cross_attention=False) for _ in range(c.n_enc_layers)])
        self.decoder = nn.ModuleList([block(cross_attention=True) for _ in range(c.n_dec_layers)])
        self.head = nn.Linear(c.d_model, c.tgt_vocab)

    def embed(self, ids, table):
        """X = dropout(E[ids] sqrt(d) + PE[0:T]):  (B, T) ids -> (B, T, d)"""
        x = table(ids) * math.sqrt(self.config.d_model)  # (B, T, d)
        return self.drop(self.pos(x))

    def source_lengths(self, src, src_lengths):
        """(B,) real source lengths: as given, or the number of non-pad tokens (sources padded on the right)."""
        if src_lengths is not None:
            return src_lengths
        return (np.asarray(src) != self.config.pad_id).sum(axis=1)

    def encode(self, src, src_lengths=None):
        """memory = Encoder(X_src):  (B, S) ids -> (B, S, d)

        Each layer:  Z = LayerNorm(X + MultiHead(X, X, X; keys j < length)),  X' = LayerNorm(Z + FFN(Z)).
        """
        lengths = self.source_lengths(src, src_lengths)
        x = self.embed(src, self.src_embed)  # (B, S, d)
        for layer in self.encoder:
            x = layer(x, lengths=lengths)  # (B, S, d)
        return x

    def decode(self, tgt_in, memory, src_lengths=None):
        """h = Decoder(X_tgt, memory):  (B, T) ids, (B, S, d) -> (B, T, d)

        Each layer:  Z_1 = LayerNorm(Y + MultiHead(Y, Y, Y; keys j <= i))                  masked self-attention
                     Z_2 = LayerNorm(Z_1 + MultiHead(Z_1, memory, memory; keys j < length))  cross-attention
                     Y'  = LayerNorm(Z_2 + FFN(Z_2))
        src_lengths: as for encode; None means the memory has no padding.
        """
        y = self.embed(tgt_in, self.tgt_embed)  # (B, T, d)
        for layer in self.decoder:
            y = layer(y, context=memory, causal=True, context_lengths=src_lengths)  # (B, T, d)
        return y

    def forward(self, src, tgt_in, targets=None, src_lengths=None):
        """logits = Decoder(tgt_in, Encoder(src)) W^T + b:  (B, T, V);  P(y_t = v) = softmax(logits[:, t])_v

        loss = mean over non-pad targets of -log P(y_t = targets[:, t])   (cross-entropy, pad_id ignored)
        """
        lengths = self.source_lengths(src, src_lengths)
        memory = self.encode(src, lengths)  # (B, S, d)
        logits = self.head(self.decode(tgt_in, memory, lengths))  # (B, T, V)
        if targets is None:
            return logits, None
        b, t, v = logits.shape
        targets = np.asarray(targets).reshape(b * t)
        loss = F.cross_entropy(logits.reshape(b * t, v), targets, ignore_index=self.config.pad_id)
        return logits, loss

    def greedy_decode(self, src, bos_id, max_len, src_lengths=None):
        """y_t = argmax_v P(v | y_<t, source), one token at a time from y_0 = BOS: (B, S) -> (B, max_len)

        The source is encoded once; each step re-runs the decoder over the prefix and keeps the last
        position's most likely token. Returns the generated tokens, without the BOS.
        """
        with gf.no_grad():
            lengths = self.source_lengths(src, src_lengths)
            memory = self.encode(src, lengths)  # (B, S, d)
            ys = gf.full((memory.shape[0], 1), bos_id)  # (B, 1)
            for _ in range(max_len):
                logits = self.head(self.decode(ys, memory, lengths)[:, -1])  # (B, V)
                ys = gf.cat([ys, logits.argmax(axis=-1, keepdims=True)], axis=1)  # (B, t + 1)
            return ys[:, 1:]
