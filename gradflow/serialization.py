"""torch.serialization: saving and loading (gf.save, gf.load), and the globals a weights-only load allows.

`torch.load(f)` loads tensors, containers, numbers and strings, and refuses any other object a file
names, since building it could run code; a program that trusts its own files names the classes it
saved, as PyTorch's word language model does with its model:

    with torch.serialization.safe_globals([RNNModel, torch.nn.modules.rnn.LSTM, ...]):
        model = torch.load(f)

add_safe_globals allows them for the rest of the process; get_safe_globals lists what was allowed.
How a file is read without running its code, and within bounds: gradflow/engine/unpickle.py.
"""

from gradflow.engine.serialize import load, save
from gradflow.engine.unpickle import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals

__all__ = ["add_safe_globals", "clear_safe_globals", "get_safe_globals", "load", "safe_globals", "save"]
