"""The engine: Tensor, Function and the backward walk, creation, dtypes, random numbers, gradcheck.

The reading order (README.md) starts here: autograd.py (Function, and backward, the chain rule node
by node), then ops/elementwise.py (one op's forward and backward side by side) and ops/norm.py (a
fused op), before leaving the engine for nn/layers.py, nn/attention.py, models/gpt.py and
training/trainer.py. Beside the walk, each in a file of its own: tensor.py (how operators record
ops; tensor_torch.py, PyTorch's names for them), saved.py (the guards of what forward saved),
naming.py (how errors name ops, tensors and modules) and hooks.py (the one extension point, where
the profiler, detect_anomaly in anomaly.py, retain_grads and module scopes watch ops run).

engine/ops holds the plain tier, every differentiable op formula for formula, and the library runs
it by default, so a debugger steps into the formula; kernels.py is the switch to the fast tier
(gradflow/fast), which the Trainer, the `gradflow` commands and the benchmarks choose. The engine
imports numpy only, nothing above it (nn, training, ...): the fast tier offers its kernels to
kernels.py from above.
"""
