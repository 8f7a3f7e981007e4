"""A word-level language model with a recurrent network (LSTM, GRU or a plain RNN) or a Transformer, written
for PyTorch in the idiom of PyTorch's word language model example (main.py and generate.py): a Dictionary
and Corpus read from train/valid/test files, batchify into columns, truncated backpropagation through time
with the hidden state detached between batches, clipping, SGD written by hand on `.data`
(`p.data.add_(p.grad, alpha=-lr)`), the learning rate divided by 4 when validation stops improving, the
best model saved whole (`torch.save(model, f)`) and loaded back under `torch.serialization.safe_globals`
naming its classes by their torch.nn.modules paths; `class TransformerModel(nn.Transformer)` with a
positional encoding and a float mask; generate() samples words from the saved model.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny.
"""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.onnx


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, "train.txt"))
        self.valid = self.tokenize(os.path.join(path, "valid.txt"))
        self.test = self.tokenize(os.path.join(path, "test.txt"))

    def tokenize(self, path):
        """The file's words, each line ended by <eos>, as one long tensor of ids."""
        with open(path, encoding="utf8") as f:
            idss = []
            for line in f:
                words = line.split() + ["<eos>"]
                idss.append(torch.tensor([self.dictionary.add_word(w) for w in words], dtype=torch.int64))
        return torch.cat(idss)


class RNNModel(nn.Module):
    """Embedding, a recurrent network, and a decoder to the vocabulary (tied to the embedding if asked)."""

    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        if rnn_type in ["LSTM", "GRU"]:
            self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        else:
            nonlinearity = {"RNN_TANH": "tanh", "RNN_RELU": "relu"}[rnn_type]
            self.rnn = nn.RNN(ninp, nhid, nlayers, nonlinearity=nonlinearity, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            assert nhid == ninp, "tied weights need nhid == ninp"
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.encoder.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == "LSTM":
            return (weight.new_zeros(self.nlayers, bsz, self.nhid), weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    """Sines and cosines of the position at geometric frequencies, added to the embeddings, then dropout."""

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        pe = pe.unsqueeze(0).transpose(0, 1)
        self.register_buffer("pe", pe)

    def forward(self, x):
        x = x + self.pe[: x.size(0), :]
        return self.dropout(x)


class TransformerModel(nn.Transformer):
    """nn.Transformer's encoder over embedded words, a causal mask, and a decoder to the vocabulary (the
    container's own decoder replaced by a Linear layer)."""

    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super().__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid, num_encoder_layers=nlayers)
        self.model_type = "Transformer"
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        self.init_weights()

    def _generate_square_subsequent_mask(self, sz):
        return torch.log(torch.tril(torch.ones(sz, sz)))

    def init_weights(self):
        initrange = 0.1
        nn.init.uniform_(self.input_emb.weight, -initrange, initrange)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -initrange, initrange)

    def forward(self, src, has_mask=True):
        if has_mask:
            if self.src_mask is None or self.src_mask.size(0) != len(src):
                self.src_mask = self._generate_square_subsequent_mask(len(src))
        else:
            self.src_mask = None
        src = self.input_emb(src) * math.sqrt(self.ninp)
        src = self.pos_encoder(src)
        output = self.encoder(src, mask=self.src_mask)
        output = self.decoder(output)
        return F.log_softmax(output, dim=-1)


SAFE_GLOBALS = [  # what the saved models are made of, allowed by name for a weights-only load
    PositionalEncoding,
    RNNModel,
    TransformerModel,
    torch.nn.functional.relu,
    torch.nn.modules.activation.MultiheadAttention,
    torch.nn.modules.container.ModuleList,
    torch.nn.modules.dropout.Dropout,
    torch.nn.modules.linear.Linear,
    torch.nn.modules.linear.NonDynamicallyQuantizableLinear,
    torch.nn.modules.normalization.LayerNorm,
    torch.nn.modules.sparse.Embedding,
    torch.nn.modules.rnn.GRU,
    torch.nn.modules.rnn.LSTM,
    torch.nn.modules.rnn.RNN,
    torch.nn.modules.transformer.TransformerEncoder,
    torch.nn.modules.transformer.TransformerEncoderLayer,
]


def batchify(data, bsz):
    """The ids cut into bsz columns (seq, bsz), the remainder dropped: each column a stream of its own."""
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def repackage_hidden(h):
    """The hidden state cut from its history, so backward stops at the batch's start."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


bptt = 6


def get_batch(source, i):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def evaluate(model, data_source, eval_batch_size, criterion):
    model.eval()
    total_loss = 0.0
    ntokens = model.decoder.out_features
    if model.__class__.__name__ != "TransformerModel":
        hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i)
            if model.__class__.__name__ == "TransformerModel":
                output = model(data)
                output = output.view(-1, ntokens)
            else:
                output, hidden = model(data, hidden)
                hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train_epoch(model, train_data, batch_size, criterion, lr, clip=0.25, log_interval=5):
    """One pass over train_data; the loss of every batch."""
    model.train()
    losses = []
    ntokens = model.decoder.out_features
    if model.__class__.__name__ != "TransformerModel":
        hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        if model.__class__.__name__ == "TransformerModel":
            output = model(data)
            output = output.view(-1, ntokens)
        else:
            hidden = repackage_hidden(hidden)
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
        if batch % log_interval == 0:
            print(f"| {batch:5d} batches | lr {lr:02.2f} | loss {loss.item():5.2f} | ppl {math.exp(loss.item()):8.2f}")
    return losses


def main(
    data="data",
    model_type="LSTM",
    epochs=4,
    lr=20.0,
    batch_size=4,
    emsize=16,
    nhid=16,
    nlayers=2,
    dropout=0.2,
    nhead=2,
    save="model.pt",
    onnx_export="",
):
    torch.manual_seed(1111)
    corpus = Corpus(data)
    eval_batch_size = 2
    train_data = batchify(corpus.train, batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    test_data = batchify(corpus.test, eval_batch_size)
    ntokens = len(corpus.dictionary)
    if model_type == "Transformer":
        model = TransformerModel(ntokens, emsize, nhead, nhid, nlayers, dropout)
    else:
        model = RNNModel(model_type, ntokens, emsize, nhid, nlayers, dropout, tie_weights=True)
    criterion = nn.NLLLoss()
    best_val_loss, history = None, []
    for epoch in range(1, epochs + 1):
        losses = train_epoch(model, train_data, batch_size, criterion, lr)
        val_loss = evaluate(model, val_data, eval_batch_size, criterion)
        history.append((sum(losses) / len(losses), val_loss))
        print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
        if not best_val_loss or val_loss < best_val_loss:
            with open(save, "wb") as f:
                torch.save(model, f)
            best_val_loss = val_loss
        else:
            lr /= 4.0  # no better on validation: smaller steps
    with open(save, "rb") as f:
        with torch.serialization.safe_globals(SAFE_GLOBALS):
            model = torch.load(f)
        if model_type in ["RNN_TANH", "RNN_RELU", "LSTM", "GRU"]:
            model.rnn.flatten_parameters()
    test_loss = evaluate(model, test_data, eval_batch_size, criterion)
    print(f"| end of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    if len(onnx_export) > 0:
        torch.onnx.export(model, (torch.zeros(bptt, 1, dtype=torch.long),), onnx_export)
    return history, test_loss


def generate(
    data="data", checkpoint="model.pt", outf="generated.txt", words=30, temperature=1.0, seed=1111, log_interval=10
):
    """generate.py: words sampled one at a time from the saved model, written to outf."""
    torch.manual_seed(seed)
    device = torch.device("cpu")
    with open(checkpoint, "rb") as f, torch.serialization.safe_globals(SAFE_GLOBALS):
        model = torch.load(f, map_location=device)
    model.eval()
    corpus = Corpus(data)
    ntokens = len(corpus.dictionary)
    is_transformer_model = hasattr(model, "model_type") and model.model_type == "Transformer"
    if not is_transformer_model:
        hidden = model.init_hidden(1)
    input = torch.randint(ntokens, (1, 1), dtype=torch.long).to(device)
    with open(outf, "w") as outf, torch.no_grad():  # no tracking history
        for i in range(words):
            if is_transformer_model:
                output = model(input, False)
                word_weights = output[-1].squeeze().div(temperature).exp().cpu()
                word_idx = torch.multinomial(word_weights, 1)[0]
                word_tensor = torch.Tensor([[word_idx]]).long().to(device)
                input = torch.cat([input, word_tensor], 0)
            else:
                output, hidden = model(input, hidden)
                word_weights = output.squeeze().div(temperature).exp().cpu()
                word_idx = torch.multinomial(word_weights, 1)[0]
                input.fill_(word_idx)
            word = corpus.dictionary.idx2word[word_idx]
            outf.write(word + ("\n" if i % 20 == 19 else " "))
            if i % log_interval == 0:
                print(f"| Generated {i}/{words} words")


if __name__ == "__main__":
    history, test_loss = main(model_type=os.environ.get("MODEL", "LSTM"))
    generate()
