"""Batch normalization (Ioffe and Szegedy, "Batch Normalization: Accelerating Deep Network Training by
Reducing Internal Covariate Shift"), as PyTorch's nn.BatchNorm1d:

    training   y = (x - mean_B) / sqrt(var_B + eps) * weight + bias      over the batch (and length) axes
               running_mean <- (1 - momentum) running_mean + momentum mean_B
               running_var  <- (1 - momentum) running_var  + momentum var_B n / (n - 1)
    eval       y = (x - running_mean) / sqrt(running_var + eps) * weight + bias

var_B is the batch's population variance (what normalizes), the running one is unbiased (what
estimates the data's); momentum=None averages every batch seen so far equally. Composed of the
plain ops, so backward flows through the batch's mean and variance as well as through x.
"""

from gradflow.engine.autograd import no_grad
from gradflow.engine.creation import ones, tensor, zeros
from gradflow.nn import init
from gradflow.nn.module import Module


class BatchNorm1d(Module):
    """Normalizes each of num_features channels over the batch: input (N, C) or (N, C, L)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        self.weight = init.ones_(init.parameter(num_features, dtype=dtype)) if affine else None
        self.bias = init.parameter(num_features, dtype=dtype) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype="int64"))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, x):
        if x.ndim not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(f"BatchNorm1d({self.num_features}): input must be (N, C) or (N, C, L), got {x.shape}")
        axes = (0,) if x.ndim == 2 else (0, 2)
        channels = (1, -1) if x.ndim == 2 else (1, -1, 1)  # a per-channel vector, broadcast along x
        if self.training or not self.track_running_stats:
            n = x.numel() // x.shape[1]  # values per channel
            if self.training and n == 1:
                raise ValueError(f"BatchNorm1d: a batch of one value per channel has no variance, got {x.shape}")
            mean = x.mean(axis=axes, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
            if self.training and self.track_running_stats:
                self.update_running_stats(mean.reshape(-1), var.reshape(-1) * (n / (n - 1)))
        else:
            mean, var = self.running_mean.reshape(*channels), self.running_var.reshape(*channels)
        y = (x - mean) / (var + self.eps).sqrt()
        if self.affine:
            y = y * self.weight.reshape(*channels) + self.bias.reshape(*channels)
        return y

    def update_running_stats(self, mean, unbiased_var):
        with no_grad():
            self.num_batches_tracked = self.num_batches_tracked + 1
            m = 1.0 / self.num_batches_tracked.item() if self.momentum is None else self.momentum
            self.running_mean = (1 - m) * self.running_mean + m * mean.detach()
            self.running_var = (1 - m) * self.running_var + m * unbiased_var.detach()

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}"
