"""Datasets and the DataLoader that cuts them into batches, as PyTorch's torch.utils.data, in plain Python.

A Dataset answers len(ds) and ds[i] (one example: a tensor, an array, a number, or a tuple or dict
of them). A sampler says in which order to read the examples: SequentialSampler 0, 1, 2, ...;
RandomSampler a random order (a fresh permutation each pass, or draws with replacement), drawn from
gradflow's generator, so gf.manual_seed(s) makes the batches reproducible, or from generator= (a
gf.Generator). The DataLoader reads batch_size examples at a time in the sampler's order and
collates them: default_collate stacks the examples' tensors along a new first axis.

    loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True, drop_last=True)
    for xb, yb in loader: ...                  # xb: (32, ...), the rows of X at 32 sampled indices

Examples are read in this process: num_workers= (PyTorch's worker processes), the workers' options
(worker_init_fn=, timeout=, prefetch_factor=, persistent_workers=) and pin_memory= are accepted and
change nothing, since the workers would give the same batches in the same order.
The random draws are PyTorch's (engine/rng.py), so after the same seed a shuffled order is PyTorch's.

The files are PyTorch's modules, so that `from torch.utils.data.dataloader import DataLoader` runs:
dataset.py (Dataset, IterableDataset, TensorDataset, Subset, random_split), sampler.py (the orders) and
dataloader.py (DataLoader, default_collate).
"""

from gradflow.utils.data.dataloader import DataLoader, default_collate, get_worker_info
from gradflow.utils.data.dataset import Dataset, IterableDataset, Subset, TensorDataset, random_split
from gradflow.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["BatchSampler", "DataLoader", "Dataset", "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler"]
__all__ += ["Subset", "TensorDataset", "default_collate", "get_worker_info", "random_split"]
