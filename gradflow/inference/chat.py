"""Chatting with an instruct model: the ChatML template, and a conversation that keeps its KV cache.

An instruct model was fine-tuned on conversations written in one fixed format; it answers well
only when the prompt is written the same way. SmolLM2 uses ChatML, stored as a Jinja template in
its GGUF file (tokenizer.chat_template), which renders every message as

    <|im_start|>{role}
    {content}<|im_end|>

one after the other, puts a default system message first when the conversation has none, and
ends with "<|im_start|>assistant\\n" for the model to continue. The model closes its turn with
<|im_end|>, so that token stops generation.

The template lives in gradflow/text/chat_data.py, beside the fine-tuning data written in it.

A conversation only grows, so each turn's prompt begins with the previous one: `Chat` keeps the
KV cache between turns and runs only the new tokens through the model.
"""

from gradflow.inference.generate import generate
from gradflow.text.chat_data import SMOLLM2_SYSTEM, chatml  # noqa: F401  (part of this module's API)


class Chat:
    """chat = Chat(model, tokenizer); chat.say("What is the capital of France?") -> the reply text.

    sampling: keyword arguments for `generate` (temperature, top_k, top_p, seed, max_new_tokens).
    """

    def __init__(self, model, tokenizer, system=SMOLLM2_SYSTEM, context=8192, **sampling):
        self.model, self.tokenizer, self.context = model, tokenizer, context
        self.messages = [] if system is None else [{"role": "system", "content": system}]
        self.sampling = {"max_new_tokens": 512, **sampling}
        self.end = tokenizer.token_id["<|im_end|>"]
        self.ids, self.cache = [], model.new_cache()

    def say(self, text, on_token=None):
        """Add the user's message, generate the assistant's reply (streamed to on_token), return its text.

        The new prompt is the conversation's tokens so far, the reply's closing "<|im_end|>\n" and
        the user's turn: the model's own reply is kept as the tokens it chose, not re-encoded.
        """
        if self.ids and self.ids[-1] != self.end:  # the last reply ran out of tokens: close it
            self.ids.append(self.end)
        turn = chatml([{"role": "user", "content": text}], default_system=None)
        if not self.ids:  # the first turn carries the system message
            turn = chatml([*self.messages, {"role": "user", "content": text}], default_system=None)
        prompt = self.ids + self.tokenizer.encode(("\n" if self.ids else "") + turn).tolist()
        self.messages.append({"role": "user", "content": text})
        self.ids = generate(
            self.model, prompt, cache=self.cache, context=self.context, stop=(self.end,), on_token=on_token,
            **self.sampling,
        )  # fmt: skip
        reply = self.ids[len(prompt) :]
        content = self.tokenizer.decode(reply[:-1] if reply and reply[-1] == self.end else reply)
        self.messages.append({"role": "assistant", "content": content})
        return content


def reply(model, tokenizer, messages, max_new_tokens=64, **sampling):
    """The assistant's reply to a conversation (greedy unless sampling says otherwise), as text: what a
    fresh Chat would answer after these messages, with the default system message when none is given."""
    end = tokenizer.token_id["<|im_end|>"]
    prompt = tokenizer.encode(chatml(messages)).tolist()
    ids = generate(model, prompt, max_new_tokens, stop=(end,), **sampling)[len(prompt) :]
    return tokenizer.decode(ids[:-1] if ids and ids[-1] == end else ids)
