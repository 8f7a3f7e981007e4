"""PyTorch's torch.nn.parallel names, for the programs that import them at the top and use them only
under a multi-process launcher (nanoGPT's train.py wraps its model in DistributedDataParallel when
torchrun set RANK). gradflow's data parallelism is MPI's, behind the Trainer (`gradflow train
--processes N`, docs/mpi.md); wrapping a model of one's own loop is refused in one line.
"""


class DistributedDataParallel:
    """Refused: gradflow has no process groups (see this file's docstring)."""

    def __init__(self, module, device_ids=None, *args, **kwargs):
        raise RuntimeError(
            "DistributedDataParallel: gradflow has no process groups; its data parallelism is MPI's, run by "
            "`gradflow train --processes N` (docs/mpi.md)"
        )


class DataParallel(DistributedDataParallel):
    """Refused: there is one device, the CPU."""

    def __init__(self, module, device_ids=None, *args, **kwargs):
        raise RuntimeError("DataParallel: gradflow has one device, the CPU; call the module itself")
