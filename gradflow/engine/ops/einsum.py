"""einsum: a sum of products named by index letters, "bij,bjk->bik" for a batched matrix product.

One op rather than a composition of permute, reshape, matmul and sum, because its backward is the
same formula again: the output is linear in each input, so each input's gradient is the einsum of
the upstream gradient with the other inputs, written back to that input's letters.
"""

import numpy as np

from gradflow.engine.autograd import Function


class Einsum(Function):
    """y[out] = sum over the letters not in out of  x_1[in_1] * x_2[in_2] * ...   (spec "in_1,in_2->out")

    y is linear in each x_k, so  dL/dx_k[in_k] = sum over the other letters of  g[out] * (product of the
    other x_j[in_j]):  einsum("out,in_j...->in_k", g, other inputs). A letter of in_k that appears nowhere
    else was summed over alone: g does not depend on it, so the gradient is the same along it (broadcast).
    """

    @staticmethod
    def forward(ctx, *xs, letters, output):
        ctx.save_for_backward(*xs)
        ctx.letters, ctx.output = letters, output
        return np.einsum(f"{','.join(letters)}->{output}", *xs)

    @staticmethod
    def backward(ctx, grad):
        xs = ctx.saved_tensors
        grads = []
        for k, (x, letters) in enumerate(zip(xs, ctx.letters)):
            if not ctx.needs_input_grad[k]:
                grads.append(None)
                continue
            others = [j for j in range(len(xs)) if j != k]
            known = set(ctx.output).union(*(ctx.letters[j] for j in others))
            reached = "".join(c for c in letters if c in known)  # the letters of x_k the others give
            spec = ",".join([ctx.output] + [ctx.letters[j] for j in others]) + "->" + reached
            partial = np.einsum(spec, grad, *(xs[j] for j in others))
            shape = tuple(n if c in known else 1 for c, n in zip(letters, x.shape))
            grads.append(np.broadcast_to(partial.reshape(shape), x.shape))
        return tuple(grads)
