"""PyTorch's torch.distributed, as far as a program run in one process needs it.

nanoGPT's train.py and its kind import init_process_group and destroy_process_group at the top and
call them only when a launcher (torchrun) has set RANK in the environment. gradflow's data
parallelism runs under MPI instead, behind the Trainer: `gradflow train --processes N` (see
docs/mpi.md and gradflow/training/distributed.py). Its ranks split each batch and sum gradients
with one all-reduce per step; a program's own loop does not attach to it, so joining a process
group is refused in one line, and the questions a single process may ask are answered.
"""


def is_available():
    """False: this module cannot join a process group (gradflow's MPI training is `gradflow train --processes N`)."""
    return False


def is_initialized():
    return False


def _refuse(op):
    raise RuntimeError(
        f"{op}: gradflow has no process groups; its data parallelism is MPI's, run by "
        "`gradflow train --processes N` (docs/mpi.md)"
    )


def init_process_group(backend=None, **kwargs):
    _refuse("init_process_group")


def destroy_process_group(group=None):
    _refuse("destroy_process_group")


def get_rank(group=None):
    _refuse("get_rank")


def get_world_size(group=None):
    _refuse("get_world_size")


def barrier(group=None, **kwargs):
    _refuse("barrier")


def all_reduce(tensor, op=None, group=None, async_op=False):
    _refuse("all_reduce")
