"""Text for language models: tokenizers (characters, byte-level BPE), corpora, and batches of token ids.

Plain Python and numpy: it imports nothing else of gradflow, so a tokenizer can be read alone.

from gradflow.text import BPETokenizer, default_corpus, get_batch, split
text = default_corpus()
tok = BPETokenizer.train(text, vocab_size=512)
train, val = split(tok.encode(text), val_fraction=0.1)
x, y = get_batch(train, batch_size=8, block_size=64, rng=np.random.default_rng(0))
"""

from gradflow.text.batches import get_batch, split
from gradflow.text.bpe import SPLIT_PATTERN, BPETokenizer
from gradflow.text.char import CharTokenizer
from gradflow.text.chat_data import chat_example, chatml, load_examples, read_chat_jsonl, text_example
from gradflow.text.corpus import default_corpus, load_text
from gradflow.text.pretrained_bpe import PretrainedBPETokenizer
from gradflow.text.tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "BPETokenizer", "CharTokenizer", "PretrainedBPETokenizer", "SPLIT_PATTERN", "Tokenizer", "default_corpus",
    "chat_example", "chatml", "get_batch", "load_examples", "load_text", "load_tokenizer", "read_chat_jsonl", "split",
    "text_example",
]  # fmt: skip
