"""torch.nn.modules.loss: the losses, under the path PyTorch gives them (gradflow's own classes)."""

from gradflow.nn.losses import BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss

__all__ = ["BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "KLDivLoss", "L1Loss", "MSELoss", "NLLLoss"]
