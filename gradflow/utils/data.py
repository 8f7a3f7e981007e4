"""Datasets and the DataLoader that cuts them into batches, as PyTorch's torch.utils.data, in plain Python.

A Dataset answers len(ds) and ds[i] (one example: a tensor, an array, a number, or a tuple or dict
of them). A sampler says in which order to read the examples: SequentialSampler 0, 1, 2, ...;
RandomSampler a random order (a fresh permutation each pass, or draws with replacement), drawn from
gradflow's generator, so gf.manual_seed(s) makes the batches reproducible, or from generator= (a
gf.Generator). The DataLoader reads batch_size examples at a time in the sampler's order and
collates them: default_collate stacks the examples' tensors along a new first axis.

    loader = DataLoader(TensorDataset(X, Y), batch_size=32, shuffle=True, drop_last=True)
    for xb, yb in loader: ...                  # xb: (32, ...), the rows of X at 32 sampled indices

Examples are read in this process: num_workers= (PyTorch's worker processes) and pin_memory= are
accepted and change nothing, since the workers would give the same batches in the same order.
gradflow's random numbers are numpy's, so a shuffled order is not the one PyTorch draws.
"""

import math
from collections.abc import Mapping, Sequence

import numpy as np

from gradflow.engine.creation import tensor
from gradflow.engine.functions import stack
from gradflow.engine.rng import generator as draws_from
from gradflow.engine.tensor import Tensor


class Dataset:
    """A dataset of examples: a subclass defines __getitem__(i) (and __len__ for a DataLoader)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: a Dataset defines __getitem__(index)")


class TensorDataset(Dataset):
    """Example i is (t[i] for each tensor t): the tensors' rows, side by side; all have as many rows."""

    def __init__(self, *tensors):
        if not tensors or any(len(t) != len(tensors[0]) for t in tensors):
            raise ValueError(
                f"TensorDataset: the tensors must have the same number of rows, got {[len(t) for t in tensors]}"
            )
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class Subset(Dataset):
    """The examples of dataset at the given indices, in that order."""

    def __init__(self, dataset, indices):
        self.dataset, self.indices = dataset, indices

    def __getitem__(self, index):
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def random_split(dataset, lengths, generator=None):
    """Subsets of the given lengths (or fractions of len(dataset) adding up to 1) of one random permutation."""
    n = len(dataset)
    if lengths and all(isinstance(f, float) for f in lengths) and math.isclose(sum(lengths), 1):
        counts = [math.floor(n * f) for f in lengths]
        for i in range(n - sum(counts)):  # what rounding down left over goes one each to the first subsets
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError(f"random_split: lengths {list(lengths)} do not add up to the dataset's {n} examples")
    order = draws_from(generator).permutation(n).tolist()
    ends = np.cumsum(lengths).tolist()
    return [Subset(dataset, order[end - k : end]) for k, end in zip(lengths, ends)]


class Sampler:
    """An order in which to read a dataset's examples: iterating gives indices."""


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """num_samples indices (len(data_source) by default) in a random order: without replacement, each pass
    over the data is a fresh permutation; with replacement, each index is drawn uniformly and independently.
    Drawn when iteration starts, from gradflow's generator or generator=."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement, self.generator = data_source, replacement, generator
        self._num_samples = num_samples
        if isinstance(num_samples, bool) or not isinstance(num_samples, (int, type(None))) or self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples must be a positive integer, got {num_samples!r}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, left, draws = len(self.data_source), self.num_samples, draws_from(self.generator)
        while left > 0:  # in pieces, so that num_samples may be huge (an endless loader)
            piece = draws.integers(0, n, min(left, 1024)) if self.replacement else draws.permutation(n)[:left]
            yield from piece.tolist()
            left -= len(piece)

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """The sampler's indices in lists of batch_size; the last, shorter list is dropped with drop_last=True."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchSampler: batch_size must be a positive integer, got {batch_size!r}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        whole, part = divmod(len(self.sampler), self.batch_size)
        return whole + (part > 0 and not self.drop_last)


def default_collate(batch):
    """A list of examples as one batch, by the examples' kind (PyTorch's rules): tensors and numpy arrays
    are stacked along a new first axis; Python floats become a float64 tensor, ints an int64 one; strings
    stay a list; a dict gives a dict and a tuple or list a list, each entry collated across the examples."""
    first = batch[0]
    if isinstance(first, Tensor):
        return stack(batch)
    if isinstance(first, (np.ndarray, np.generic)):
        return tensor(np.stack(batch))
    if isinstance(first, float):
        return tensor(np.array(batch, dtype=np.float64))
    if isinstance(first, (bool, int)):
        return tensor(np.array(batch, dtype=np.bool_ if isinstance(first, bool) else np.int64))
    if isinstance(first, (str, bytes)):
        return list(batch)
    if isinstance(first, Mapping):
        return {key: default_collate([example[key] for example in batch]) for key in first}
    if isinstance(first, Sequence):
        if any(len(example) != len(first) for example in batch):
            raise ValueError("default_collate: the examples of a batch must all have the same number of parts")
        columns = [default_collate(list(part)) for part in zip(*batch)]
        return type(first)(*columns) if hasattr(first, "_fields") else columns  # a namedtuple keeps its type
    raise TypeError(f"default_collate: cannot batch examples of type {type(first).__name__}")


class DataLoader:
    """Batches of a dataset (see this file's docstring). shuffle=True reads in a RandomSampler's order,
    else in order (or in sampler='s); batch_size=None gives the examples one by one, uncollated."""

    def __init__(
        self,
        dataset,
        batch_size=1,
        shuffle=None,
        sampler=None,
        batch_sampler=None,
        num_workers=0,
        collate_fn=None,
        pin_memory=False,
        drop_last=False,
        timeout=0,
        worker_init_fn=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers=False,
    ):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers must be a non-negative integer, got {num_workers!r}")
        if shuffle and sampler is not None:
            raise ValueError("DataLoader: give shuffle=True or a sampler, not both (the sampler sets the order)")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError(
                "DataLoader: batch_sampler sets the batches: leave out batch_size, shuffle, sampler, drop_last"
            )
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.num_workers = sampler, batch_sampler, num_workers
        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None else _as_read)
        self.generator = generator

    def __iter__(self):
        if self.batch_sampler is None:
            return (self.collate_fn(self.dataset[i]) for i in self.sampler)
        return (self.collate_fn([self.dataset[i] for i in batch]) for batch in self.batch_sampler)

    def __len__(self):
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


def _as_read(example):
    """With batch_size=None, an example goes out as the dataset gave it."""
    return example
