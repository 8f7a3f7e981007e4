"""torch.nn.modules.rnn: the recurrent networks, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.recurrent import GRU, LSTM, RNN

__all__ = ["GRU", "LSTM", "RNN"]
