"""Data parallelism: each process computes the gradient of its shard of the batch, and the shards' sum is the batch's.

The loss of a batch of n rows is the mean of its rows' losses, so cut into shards of n_s rows

    L = sum_s (n_s / n) L_s        and so        dL/dtheta = sum_s (n_s / n) dL_s/dtheta

Each process runs forward and backward on its own shard with the same weights, its loss scaled by
n_s / n, and the shards' gradients are summed (an all-reduce). The sum is the whole batch's
gradient, up to float rounding, as long as every row has the same number of counted targets (true
of language-model batches, where every position has a target). The shards are shards(n, parts),
the same cut wherever the processes run; shard s draws its dropout masks from a generator seeded
with the s-th of shard_seeds(parts), drawn from gradflow's generator, which so advances the same
way in every process and is the one state a checkpoint needs to save.

Why processes and not threads: numpy runs LayerNorm, GELU, softmax and the rest on one core, and
Python threads running them side by side keep waiting for each other at every call (the GIL):
measured on 2 cores, two threads made a baby-GPT step no faster. Processes have a GIL each.

This file holds that math (shards, shard_seeds, own_stream, shard_loss) and the fork-based
processes of one machine; gradflow.training.distributed runs the same math over MPI.

How the fork mode is done, on Linux (it needs fork):
  - The weights move into memory shared with the worker processes (an anonymous shared mapping
    made before they are forked), so when the optimizer updates them in place, every process
    sees the new values at once: nothing is sent but the shard's token ids.
  - Each worker writes its gradients into its own shared block; the main process computes the
    first shard itself and adds the workers' blocks into its parameters' .grad.
  - BLAS runs one thread per process: the cores go to the shards instead.
"""

import contextlib
import mmap
import multiprocessing
import signal
import traceback
import weakref

import numpy as np

from gradflow.engine.autograd import no_grad
from gradflow.engine.rng import generator, get_rng_state, manual_seed, set_rng_state

ALIGN = 64  # bytes: each array starts on its own cache line


def shared_arrays(like):
    """Zeroed arrays shaped like those in `like`, in one anonymous mapping that forked children share."""
    offsets, end = [], 0
    for a in like:
        offsets.append(end)
        end += -(-a.nbytes // ALIGN) * ALIGN
    memory = mmap.mmap(-1, max(end, 1))  # MAP_SHARED: a child's writes are the parent's too
    return [np.ndarray(a.shape, a.dtype, buffer=memory, offset=o) for a, o in zip(like, offsets)]


def shards(n, parts):
    """Row slices cutting range(n) into at most `parts` nearly equal, non-empty pieces."""
    parts = max(1, min(parts, n))
    bounds = [n * i // parts for i in range(parts + 1)]
    return [slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]


def shard_seeds(parts):
    """One seed per shard, drawn from gradflow's generator (the one a checkpoint saves)."""
    return [int(s) for s in generator().integers(2**63, size=parts)]


@contextlib.contextmanager
def own_stream(seed):
    """Inside, gradflow's random draws (dropout masks) come from a generator seeded with `seed`;
    after, gradflow's generator is back where it was."""
    state = get_rng_state()
    manual_seed(seed)
    try:
        yield
    finally:
        set_rng_state(state)


def shard_loss(model, x, y, weight, backward):
    """weight * loss of model(x, y), a float; with backward, weight * its gradient lands in the params' .grad."""
    if not backward:
        with no_grad():
            return weight * model(x, y)[1].item()
    _, loss = model(x, y)
    loss.backward(np.full(loss.shape, weight, loss.dtype))
    return weight * loss.item()


def serve(conn, model, params, grads, main_ends):
    """A worker's loop: compute each shard it is sent, put its gradients in `grads`, reply with the
    loss and which parameters have a gradient (as in one process, an unused parameter has none)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    for end in main_ends:  # the main process's ends of the pipes, copied by fork: closed, so that
        end.close()  # when the main process dies this worker reads EOF instead of waiting forever
    limit_blas_threads()
    while (request := next_request(conn)) is not None:
        try:
            for p in params:
                p.grad = None
            x, y, weight, training, seed, backward = request
            model.train(training)
            with own_stream(seed):
                loss = shard_loss(model, x, y, weight, backward)
            for p, g in zip(params, grads):
                if p.grad is not None:
                    g[...] = p.grad
            conn.send(("ok", loss, [p.grad is not None for p in params]))
        except Exception:  # reported to the main process, which raises it there
            conn.send(("error", traceback.format_exc(), None))


def next_request(conn):
    """The next shard to compute, or None: told to stop, or the main process is gone."""
    try:
        return conn.recv()
    except EOFError:
        return None


def limit_blas_threads(threads=1):
    """`threads` BLAS threads in this process; returns the limiter that can restore the previous number."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=threads, user_api="blas")


class DataParallel:
    """Compute a model's loss and gradients over `processes` processes, one shard of the batch each.

        dp = DataParallel(model, processes=2)
        optimizer.zero_grad()
        loss = dp.forward_backward(x, y)   # the batch's mean loss; each .grad holds dL/dtheta
        optimizer.step()                   # in place: the workers see the new weights
        dp.loss(x, y)                      # the loss alone (no graph), also shared out
        dp.close()                         # or use it as a context manager

    The model must be called as model(x, y) -> (logits, mean loss) with x and y batched over their
    first axis. The workers are copies of the model made when it starts: they share its parameters'
    values and follow its train()/eval() mode, nothing else. Keep updating the parameters in place
    (every gradflow optimizer does); a parameter whose array is replaced (load_state_dict) is copied
    back into shared memory at the next call.
    """

    def __init__(self, model, processes=2):
        if isinstance(processes, bool) or not isinstance(processes, int) or processes < 1:
            raise ValueError(f"DataParallel: processes must be a positive integer, got {processes!r}")
        if processes > 1 and "fork" not in multiprocessing.get_all_start_methods():
            raise RuntimeError("DataParallel: processes > 1 needs the fork start method (Linux); use processes=1")
        self.model, self.processes = model, processes
        self.params = model.parameters()
        self.shared = shared_arrays([p.data for p in self.params])
        for p, s in zip(self.params, self.shared):
            s[...] = p.data
            p.data = s
        self._blas = limit_blas_threads() if processes > 1 else None
        self.conns, self.workers, self.grads = [], [], []
        fork = multiprocessing.get_context("fork")
        for _ in range(processes - 1):
            grads = shared_arrays([p.data for p in self.params])
            ours, theirs = fork.Pipe()
            main_ends = [*self.conns, ours]
            worker = fork.Process(target=serve, args=(theirs, model, self.params, grads, main_ends), daemon=True)
            worker.start()
            theirs.close()
            self.conns.append(ours)
            self.workers.append(worker)
            self.grads.append(grads)
        self._finalizer = weakref.finalize(self, stop, self.conns, self.workers, self._blas)

    def forward_backward(self, x, y):
        """The mean loss over the batch (a float); its gradient is added to every parameter's .grad."""
        return self._run(x, y, backward=True)

    def loss(self, x, y):
        """The mean loss over the batch, without recording a graph (for evaluation)."""
        return self._run(x, y, backward=False)

    def close(self):
        """Stop the workers and give BLAS back its threads; the parameters stay in shared memory."""
        self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _run(self, x, y, backward):
        if not self._finalizer.alive:
            raise RuntimeError("DataParallel: closed; make a new one")
        x, y = np.asarray(x), np.asarray(y)
        if len(x) != len(y):
            raise ValueError(f"DataParallel: x and y must have the same number of rows, got {x.shape} and {y.shape}")
        self._reshare()
        n, training = len(x), self.model.training
        pieces = shards(n, self.processes)
        seeds = shard_seeds(len(pieces))
        sent = []
        for i, (conn, rows, seed) in enumerate(zip(self.conns, pieces[1:], seeds[1:])):
            try:
                conn.send((x[rows], y[rows], (rows.stop - rows.start) / n, training, seed, backward))
            except OSError:  # the worker is gone; take the answers of those already sent a shard
                for j, sent_to in enumerate(sent):
                    self._reply(j, sent_to)
                raise WorkerError(f"DataParallel: worker {i + 1} {self._exited(i)}") from None
            sent.append(conn)
        rows = pieces[0]
        try:
            with own_stream(seeds[0]):
                loss = shard_loss(self.model, x[rows], y[rows], (rows.stop - rows.start) / n, backward)
        finally:  # every worker answers, even when the main shard failed: no reply is left in a pipe
            replies = [self._reply(i, conn) for i, conn in enumerate(sent)]
        for i, (status, value, _) in enumerate(replies):
            if status != "ok":  # the first line says what went wrong; the worker's traceback follows
                cause = f": {value.strip().splitlines()[-1]}\n{value}" if value else ""
                raise WorkerError(f"DataParallel: worker {i + 1} {status}{cause}")
        for (_, shard, has_grad), grads in zip(replies, self.grads):
            loss += shard
            for p, g, has in zip(self.params, grads, has_grad):
                if has:
                    p._accumulate_grad(g)  # as backward does: a copy the first time, then added in place
        return loss

    def _reply(self, i, conn):
        """(status, loss or traceback, which parameters have a gradient) from worker i."""
        try:
            status, value, has_grad = conn.recv()
        except (EOFError, OSError):
            return self._exited(i) + " during a step", None, None
        return ("ok" if status == "ok" else "failed on its shard"), value, has_grad

    def _exited(self, i):
        self.workers[i].join(timeout=1)
        return f"exited (exit code {self.workers[i].exitcode})"

    def _reshare(self):
        """Put back into shared memory any parameter whose array was replaced since the last call."""
        for p, s in zip(self.params, self.shared):
            if p.data is not s:
                if p.data.shape != s.shape:
                    raise ValueError(f"DataParallel: a parameter changed shape from {s.shape} to {p.data.shape}")
                s[...] = p.data
                p.data = s


class WorkerError(RuntimeError):
    """A worker process failed or died; the message's first line says which and how."""


def stop(conns, workers, blas):
    """Tell each worker to finish, wait for it, and restore BLAS's threads."""
    for conn in conns:
        with contextlib.suppress(OSError):  # already gone
            conn.send(None)
    for worker in workers:
        worker.join(timeout=5)
        if worker.is_alive():
            worker.terminate()
    for conn in conns:
        conn.close()
    if blas is not None:
        blas.restore_original_limits()
