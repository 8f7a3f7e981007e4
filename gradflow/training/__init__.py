"""Training a language model: the Trainer and its config, the hooks that watch its steps (health, the
stop before a divergence), the picture of a run, checkpoints, progress, data parallelism.

from gradflow.training import TrainConfig, Trainer
Trainer(model, train_ids, val_ids, TrainConfig(max_iters=200)).fit()

Data parallelism: Trainer(..., distributed=True) in each rank of `mpiexec -n N` (mpi.py attaches the
ranks to the loop), or Distributed for a loop of your own (gradflow.training.distributed; the math is
in data_parallel.py). A run's settings and their checks: settings.py.

Built on engine, nn, optim and text; it never imports a particular model (the caller passes one)
nor the command line.
"""

from gradflow.training.distributed import Distributed, RankError
from gradflow.training.divergence import TrainingDiverged
from gradflow.training.trainer import TrainConfig, Trainer, default_optimizer

__all__ = ["Distributed", "RankError", "TrainConfig", "Trainer", "TrainingDiverged", "default_optimizer"]
