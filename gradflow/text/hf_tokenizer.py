"""A gradflow tokenizer as the files Hugging Face's `tokenizers` library and transformers read.

tokenizer.json, the `tokenizers` library's serialization, describes a tokenizer as a pipeline:
added (special) tokens are cut out of the text first, a pre-tokenizer cuts the rest into pieces, a
model turns each piece into ids, and a decoder turns ids back into text. Each gradflow tokenizer
is one such pipeline, written here as plain JSON (nothing of the library is needed to write it):

    char            model BPE with no merges, so every character is a token of its own; decoder
                    Fuse, which joins the tokens with nothing between them
    bpe             GPT-2's byte-level BPE: pre-tokenizer ByteLevel (GPT-2's split pattern, then
                    each byte as the printable character BYTE_TO_CHAR gives it), model BPE with the
                    merges in the order learned, decoder ByteLevel (characters back to bytes)
    pretrained_bpe  the same, its control tokens as special added tokens, and Digits(individual)
                    before ByteLevel when it isolates every digit (SmolLM2)

tokenizer_config.json tells transformers' AutoTokenizer to read tokenizer.json. A tokenizer the
pipeline cannot express (a split pattern of its own, two ids for one string) raises ValueError.
"""

from gradflow.text.bpe import SPLIT_PATTERN, BPETokenizer
from gradflow.text.char import CharTokenizer
from gradflow.text.pretrained_bpe import BYTE_TO_CHAR, PretrainedBPETokenizer
from gradflow.text.tokenizer import short


def hf_tokenizer_files(tokenizer):
    """{file name: JSON object} for tokenizer.json and tokenizer_config.json, or ValueError saying why not."""
    if isinstance(tokenizer, PretrainedBPETokenizer):
        vocab = tokenizer.tokens
        merges = [m.split(" ") for m in tokenizer.merge_strings]
        pre = byte_level(tokenizer.pattern)
        if tokenizer.split_digits:
            pre = {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True}, pre]}
        special = tokenizer.control
    elif isinstance(tokenizer, BPETokenizer):
        vocab = ["".join(BYTE_TO_CHAR[b] for b in token) for token in tokenizer.token_bytes]
        merges = [[vocab[a], vocab[b]] for a, b in tokenizer.merges]
        pre, special = byte_level(tokenizer.pattern), []
    elif isinstance(tokenizer, CharTokenizer):
        vocab, merges, pre, special = tokenizer.chars, [], None, []
    else:
        raise ValueError(f"a {type(tokenizer).__name__} has no tokenizer.json form")
    ids = {token: i for i, token in enumerate(vocab)}
    if len(ids) != len(vocab):  # tokenizer.json maps strings to ids, so each string may have one id only
        raise ValueError("two of its ids stand for the same bytes, which tokenizer.json cannot express")
    # ByteLevel's decoder maps characters back to bytes; the format asks for the pre-tokenizer's fields too
    decoder = {"type": "Fuse"} if isinstance(tokenizer, CharTokenizer) else byte_level(SPLIT_PATTERN)
    added = [
        {"id": i, "content": vocab[i], "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i in special
    ]  # fmt: skip
    tokenizer_json = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre,
        "post_processor": None,
        "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": ids, "merges": merges},
    }  # fmt: skip
    # decode as gradflow does: no spaces removed before punctuation
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False}
    return {"tokenizer.json": tokenizer_json, "tokenizer_config.json": config}


def byte_level(pattern):
    """The ByteLevel pre-tokenizer: GPT-2's split pattern (or no split), then bytes as characters."""
    if pattern not in (SPLIT_PATTERN, None):
        raise ValueError(f"its split pattern {short(pattern)} is not GPT-2's, which tokenizer.json's ByteLevel applies")
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": pattern is not None}
