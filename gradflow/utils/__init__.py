"""PyTorch's torch.utils for gradflow: data (Dataset, DataLoader, samplers: batches drawn from
gradflow's seeded generator) and tensorboard (a SummaryWriter that logs scalars as JSON lines).
After `import gradflow as torch`, `torch.utils.data.DataLoader` is gradflow's. (torch.nn.utils,
clipping and the like, is gradflow.nn.utils.)
"""

from gradflow.utils import data

__all__ = ["data"]
