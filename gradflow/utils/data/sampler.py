"""Samplers: the order in which a DataLoader reads a dataset's examples (indices), and BatchSampler,
which groups an order into batches. A random order is drawn from gradflow's generator or generator=."""

from gradflow.engine.rng import Generator
from gradflow.engine.rng import generator as draws_from


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
        """PyTorch's draws: without generator=, a generator of its own seeded from gradflow's (one 63-bit
        draw); then randint in pieces of 32, or a randperm per pass (and one more for a last, partial
        pass: its first num_samples mod n)."""
        n, left, draws = len(self.data_source), self.num_samples, self.generator
        if draws is None:
            draws = Generator().manual_seed(int(draws_from().words64(1)[0] % 2**63))
        while left > 0:  # in pieces, so that num_samples may be huge (an endless loader)
            piece = draws.integers(0, n, (min(left, 32),)) if self.replacement else draws.permutation(n)
            yield from piece[:left].tolist()
            left -= min(left, len(piece))
        if not self.replacement and self.num_samples % n == 0:
            draws.permutation(n)  # the last, empty, partial pass, drawn all the same

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
