"""Losses as Modules, as PyTorch model code builds them once and calls them: each is one call to F."""

from gradflow.nn import functional as F
from gradflow.nn.module import Module


class CrossEntropyLoss(Module):
    """loss(logits, targets) = F.cross_entropy(logits, targets, ignore_index=..., reduction=...,
    label_smoothing=...): -log softmax(logits)[target], ignoring targets equal to ignore_index (-100,
    PyTorch's default)."""

    def __init__(self, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__()
        F._check_reduction("CrossEntropyLoss", reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing}")
        self.ignore_index, self.reduction, self.label_smoothing = ignore_index, reduction, label_smoothing

    def forward(self, logits, targets):
        return F.cross_entropy(
            logits,
            targets,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
            label_smoothing=self.label_smoothing,
        )

    def extra_repr(self):
        smoothing = f", label_smoothing={self.label_smoothing}" if self.label_smoothing else ""
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}{smoothing}"


class NLLLoss(CrossEntropyLoss):
    """loss(log_probs, targets) = F.nll_loss(...): -log_probs[target], as CrossEntropyLoss after LogSoftmax."""

    def __init__(self, *, ignore_index=-100, reduction="mean"):
        super().__init__(ignore_index=ignore_index, reduction=reduction)

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


class KLDivLoss(Module):
    """loss(input, target) = F.kl_div(input, target, reduction=..., log_target=...): input holds
    log-probabilities, target probabilities (or their logs with log_target)."""

    def __init__(self, *, reduction="mean", log_target=False):
        super().__init__()
        if reduction not in (*F.REDUCTIONS, "batchmean"):
            raise ValueError(f'KLDivLoss: reduction must be "batchmean", "mean", "sum" or "none", got {reduction!r}')
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)

    def extra_repr(self):
        return f"reduction={self.reduction!r}, log_target={self.log_target}"


class BCELoss(Module):
    """loss(probs, targets) = F.binary_cross_entropy(probs, targets, weight, reduction)."""

    def __init__(self, weight=None, *, reduction="mean"):
        super().__init__()
        F._check_reduction("BCELoss", reduction)
        self.weight, self.reduction = weight, reduction

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class BCEWithLogitsLoss(BCELoss):
    """loss(logits, targets) = F.binary_cross_entropy_with_logits(logits, targets, weight, reduction,
    pos_weight): a sigmoid and the binary cross-entropy in one, stable for large logits."""

    def __init__(self, weight=None, *, reduction="mean", pos_weight=None):
        super().__init__(weight, reduction=reduction)
        self.pos_weight = pos_weight

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)
