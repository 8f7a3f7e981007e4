"""The Mersenne Twister MT19937 (Matsumoto and Nishimura, "Mersenne Twister: a 623-dimensionally
equidistributed uniform pseudo-random number generator", ACM TOMACS 1998): the stream of 32-bit words
behind PyTorch's CPU generator, and so behind gradflow's.

The state is 624 words x[0..623]. Seeding from s keeps its low 32 bits (PyTorch's seeds are 64-bit,
its twister's state is not):

    x[0] = s mod 2^32,    x[j] = 1812433253 (x[j-1] xor (x[j-1] >> 30)) + j   (mod 2^32)

Each new block of 624 words x' follows from the last one; each word mixes the top bit of one word
with the low 31 of the next, a shift and a conditional xor:

    x'[i] = x[i + 397] xor T(x[i], x[i + 1]),   T(u, v) = (u_31 v_30..0 >> 1) xor (0x9908b0df if v odd)

where an index past 623 means the new block's word (x'[i + 397 - 624], x'[0]): the first 227 words
come from the old block alone, the next 227 from those, and so on. A word leaves through the tempering
y <- y ^ y >> 11, y ^ (y << 7 & 0x9d2c5680), y ^ (y << 15 & 0xefc60000), y ^ y >> 18. PyTorch's 64-bit
draws are two words, the first one high.
"""

import numpy as np

N, M = 624, 397  # the state's length, and how far ahead the word mixed in sits
_UPPER, _LOWER, _A = np.uint32(0x80000000), np.uint32(0x7FFFFFFF), np.uint32(0x9908B0DF)
_ONE = np.uint32(1)


def seeded_state(seed):
    """The 624 words the seed starts from (its low 32 bits), by Knuth's multiplier 1812433253."""
    x = [seed & 0xFFFFFFFF]
    for j in range(1, N):
        x.append((1812433253 * (x[-1] ^ (x[-1] >> 30)) + j) & 0xFFFFFFFF)
    return np.array(x, dtype=np.uint32)


def twist(u, v):
    """T(u, v): the top bit of u and the low 31 of v shifted right, xor the matrix row if v is odd."""
    return (((u & _UPPER) | (v & _LOWER)) >> _ONE) ^ ((v & _ONE) * _A)


def next_block(x):
    """The 624 words after block x (see the docstring): three slices of numpy ops, and the last word alone."""
    new = np.empty(N, np.uint32)
    t = twist(x[:-1], x[1:])  # T of each old pair, all known at once; only the last one needs a new word
    k = N - M  # 227
    new[:k] = x[M:] ^ t[:k]
    new[k : 2 * k] = new[:k] ^ t[k : 2 * k]
    new[2 * k : N - 1] = new[k : N - 1 - k] ^ t[2 * k :]
    new[N - 1] = new[M - 1] ^ twist(x[N - 1], new[0])
    return new


def temper(y):
    """The output transformation of the words y (it spreads the state's bits over the word)."""
    y = y ^ (y >> np.uint32(11))
    y ^= (y << np.uint32(7)) & np.uint32(0x9D2C5680)
    y ^= (y << np.uint32(15)) & np.uint32(0xEFC60000)
    return y ^ (y >> np.uint32(18))


class MT19937:
    """A stream of 32-bit words: `words(n)`, `words64(n)`. `block` is the current block of state and
    `next` the index of the next word in it (N: the block is used up, the next draw twists a new one)."""

    def __init__(self, seed):
        self.seed(seed)

    def seed(self, seed):
        self.block, self.next = seeded_state(seed), N

    def words(self, n):
        """The next n words, uint32."""
        out, filled = np.empty(n, np.uint32), 0
        while filled < n:
            if self.next == N:
                self.block, self.next = next_block(self.block), 0
            take = min(n - filled, N - self.next)
            out[filled : filled + take] = self.block[self.next : self.next + take]
            filled, self.next = filled + take, self.next + take
        return temper(out)

    def words64(self, n):
        """The next n 64-bit draws, uint64: two words each, the first high (PyTorch's random64)."""
        w = self.words(2 * n).astype(np.uint64)
        return (w[0::2] << np.uint64(32)) | w[1::2]
