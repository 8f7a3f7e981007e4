"""A word-level language model with a recurrent network (LSTM, GRU or a plain RNN), written for PyTorch in
the idiom of PyTorch's word language model example: a Dictionary and Corpus read from train/valid/test
files, batchify into columns, truncated backpropagation through time with the hidden state detached
between batches, clipping, SGD written by hand (`p.add_(p.grad, alpha=-lr)` under no_grad), and the
learning rate divided by 4 when validation stops improving.

tests/test_programs.py runs it as written and with only its import lines changed; the sizes are tiny.
"""

import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F


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
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train_epoch(model, train_data, batch_size, criterion, lr, clip=0.25, log_interval=5):
    """One pass over train_data; the loss of every batch."""
    model.train()
    losses = []
    hidden = model.init_hidden(batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, bptt)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)
        losses.append(loss.item())
        if batch % log_interval == 0:
            print(f"| {batch:5d} batches | lr {lr:02.2f} | loss {loss.item():5.2f} | ppl {math.exp(loss.item()):8.2f}")
    return losses


def main(data="data", model_type="LSTM", epochs=4, lr=20.0, batch_size=4, emsize=16, nhid=16, nlayers=2, dropout=0.2):
    torch.manual_seed(1111)
    corpus = Corpus(data)
    eval_batch_size = 2
    train_data = batchify(corpus.train, batch_size)
    val_data = batchify(corpus.valid, eval_batch_size)
    ntokens = len(corpus.dictionary)
    model = RNNModel(model_type, ntokens, emsize, nhid, nlayers, dropout, tie_weights=True)
    criterion = nn.NLLLoss()
    best_val_loss, history = None, []
    for epoch in range(1, epochs + 1):
        losses = train_epoch(model, train_data, batch_size, criterion, lr)
        val_loss = evaluate(model, val_data, eval_batch_size, criterion)
        history.append((sum(losses) / len(losses), val_loss))
        print(f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}")
        if not best_val_loss or val_loss < best_val_loss:
            torch.save(model.state_dict(), "model.pt")
            best_val_loss = val_loss
        else:
            lr /= 4.0  # no better on validation: smaller steps
    model.load_state_dict(torch.load("model.pt"))
    test_loss = evaluate(model, batchify(corpus.test, eval_batch_size), eval_batch_size, criterion)
    print(f"| end of training | test loss {test_loss:5.2f} | test ppl {math.exp(test_loss):8.2f}")
    return history, test_loss


if __name__ == "__main__":
    history, test_loss = main()
