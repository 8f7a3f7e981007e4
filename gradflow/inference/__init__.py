"""Inference: sampling a continuation (temperature, top-k, top-p, a KV cache) and chatting.

Built on engine, nn and text; it works with any model that maps token ids to logits and never
imports a particular one.
"""

from gradflow.inference.chat import SMOLLM2_SYSTEM, Chat, chatml, reply
from gradflow.inference.generate import filter_probs, generate, sample

__all__ = ["SMOLLM2_SYSTEM", "Chat", "chatml", "filter_probs", "generate", "reply", "sample"]
