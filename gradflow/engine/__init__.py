"""The engine: Tensor, Function and the backward walk, creation, dtypes, random numbers, gradcheck.

Read autograd.py first (the graph and the reverse walk), then ops/elementwise.py (one op's forward
and backward side by side), then tensor.py (how operators record ops). engine/ops holds the plain
tier: every differentiable op, formula for formula. The engine imports numpy only; nothing above
it (nn, training, ...). Its one reach upward is kernels.py, which loads gradflow.fast, the tuned
tier of these same ops, only when that tier is chosen.
"""
