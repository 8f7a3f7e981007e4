"""A dataset answers len(ds) and ds[i], one example (an IterableDataset yields its examples instead);
TensorDataset pairs tensors' rows, Subset and random_split take some of a dataset's examples."""

import math

import numpy as np

from gradflow.engine.rng import generator as draws_from


class Dataset:
    """A dataset of examples: a subclass defines __getitem__(i) (and __len__ for a DataLoader)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__}: a Dataset defines __getitem__(index)")


class IterableDataset(Dataset):
    """A dataset read as a stream: a subclass defines __iter__, yielding examples; a DataLoader batches
    them in the order they come (no sampler, no shuffle)."""

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__}: an IterableDataset defines __iter__()")


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
