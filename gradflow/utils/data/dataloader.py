"""The DataLoader: a dataset's examples, read in a sampler's order, batch_size at a time, collated into
batches by default_collate (see gradflow/utils/data/__init__.py)."""

from collections.abc import Mapping, Sequence

import numpy as np

from gradflow.engine.creation import tensor
from gradflow.engine.functions import stack
from gradflow.engine.rng import generator as draws_from
from gradflow.engine.tensor import Tensor
from gradflow.utils.data.dataset import IterableDataset
from gradflow.utils.data.sampler import BatchSampler, RandomSampler, SequentialSampler


def get_worker_info():
    """None, PyTorch's answer in the main process: the examples are read here, never by worker processes,
    so an IterableDataset that splits its stream between workers reads all of it, once."""
    return None


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
    else in order (or in sampler='s); an IterableDataset is read in the order it yields its examples.
    batch_size=None gives the examples one by one, uncollated."""

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
        stream = isinstance(dataset, IterableDataset)
        if stream and (shuffle or sampler is not None or batch_sampler is not None):
            raise ValueError(
                "DataLoader: an IterableDataset sets its own order: leave out shuffle, sampler, batch_sampler"
            )
        if sampler is None and not stream:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        sampler = dataset if stream else sampler  # a stream's examples stand where the indices would
        self._read = _as_read if stream else dataset.__getitem__
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.num_workers = sampler, batch_sampler, num_workers
        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None else _as_read)
        self.generator = generator

    def __iter__(self):
        # PyTorch draws the seed of its worker processes as each pass starts, workers or not (one 64-bit
        # draw): drawn here too, so that what a program draws after a pass is what PyTorch draws
        draws_from(self.generator).words64(1)
        if self.batch_sampler is None:
            return (self.collate_fn(self._read(i)) for i in self.sampler)
        return (self.collate_fn([self._read(i) for i in batch]) for batch in self.batch_sampler)

    def __len__(self):
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


def _as_read(example):
    """An example as the dataset gave it: uncollated (batch_size=None), or read from a stream."""
    return example
