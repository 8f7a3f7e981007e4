"""Training a language model: the Trainer and its config, checkpoints, progress, data parallelism.

from gradflow.training import TrainConfig, Trainer
Trainer(model, tokenizer, text, TrainConfig(max_iters=200)).fit()

Built on engine, nn, optim and text; it never imports a particular model (the caller passes one)
nor the command line.
"""

from gradflow.training.trainer import TrainConfig, Trainer, TrainingDiverged, default_optimizer

__all__ = ["TrainConfig", "Trainer", "TrainingDiverged", "default_optimizer"]
