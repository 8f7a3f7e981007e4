"""Losses as Modules, as PyTorch model code builds them once and calls them: each is one call to F."""

from gradflow.nn import functional as F
from gradflow.nn.module import Module


class CrossEntropyLoss(Module):
    """loss(logits, targets) = F.cross_entropy(logits, targets, ignore_index=..., reduction=...):
    -log softmax(logits)[target], ignoring targets equal to ignore_index (-100, PyTorch's default)."""

    def __init__(self, *, ignore_index=-100, reduction="mean"):
        super().__init__()
        F._check_reduction("CrossEntropyLoss", reduction)
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, logits, targets):
        return F.cross_entropy(logits, targets, ignore_index=self.ignore_index, reduction=self.reduction)

    def extra_repr(self):
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}"


class NLLLoss(CrossEntropyLoss):
    """loss(log_probs, targets) = F.nll_loss(...): -log_probs[target], as CrossEntropyLoss after LogSoftmax."""

    def forward(self, log_probs, targets):
        return F.nll_loss(log_probs, targets, ignore_index=self.ignore_index, reduction=self.reduction)


class MSELoss(Module):
    """loss(input, target) = F.mse_loss(input, target, reduction=...): the mean of (input - target)^2."""

    def __init__(self, *, reduction="mean"):
        super().__init__()
        F._check_reduction("MSELoss", reduction)
        self.reduction = reduction

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class L1Loss(MSELoss):
    """loss(input, target) = F.l1_loss(input, target, reduction=...): the mean of |input - target|."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)
