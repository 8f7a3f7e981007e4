"""gradflow's GPT (no biases, head tied to the token embedding) in PyTorch, CPU and eager, starting
from gradflow's initial weights: the reference the benchmarks time gradflow against.

    step = torch_training_step(vocab_size, model, seed)   # model: GPTConfig's fields but vocab_size
    step(x, y)             # forward, backward, clip at 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), decay 0.1)
    step(x, y, lr=3e-4)    # the same with another learning rate
    step.loss(x, y)        # the loss alone
"""

import gradflow as gf
from gradflow.models.gpt import GPT, GPTConfig


def torch_training_step(vocab_size, model, seed, threads=None):
    """One training step of the GPT of size `model` (a dict) in PyTorch, from gradflow's weights of `seed`."""
    import torch
    from torch import nn

    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(seed)
    d, h = model["n_embd"], model["n_head"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d, bias=False), nn.LayerNorm(d, bias=False)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)

        def forward(self, x):
            b, t, _ = x.shape
            a = self.ln1(x)
            q, k, v = (f(a).view(b, t, h, d // h).transpose(1, 2) for f in (self.q, self.k, self.v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class TorchGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab_size, d), nn.Embedding(model["block_size"], d)
            self.blocks = nn.ModuleList(Block() for _ in range(model["n_layer"]))
            self.ln_f = nn.LayerNorm(d, bias=False)

        def forward(self, ids, targets):
            x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.T
            return nn.functional.cross_entropy(logits.view(-1, vocab_size), targets.view(-1))

    net = TorchGPT()
    load_gradflow_weights(net, vocab_size, model, seed)
    decay = [p for p in net.parameters() if p.dim() >= 2]
    rest = [p for p in net.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay}, {"params": rest, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1
    )

    def step(x, y, lr=None):
        if lr is not None:
            for group in opt.param_groups:
                group["lr"] = lr
        loss = net(torch.from_numpy(x), torch.from_numpy(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()

    @torch.no_grad()
    def loss(x, y):
        return float(net(torch.from_numpy(x), torch.from_numpy(y)))

    step.loss = loss
    return step


def load_gradflow_weights(net, vocab_size, model, seed):
    """Start from gradflow's initial weights (GPT-2's init, same seed), so both engines begin equal."""
    import torch

    gf.manual_seed(seed)
    ours = GPT(GPTConfig(vocab_size=vocab_size, **model)).state_dict()
    theirs = {"wte.weight": "wte.weight", "wpe.weight": "wpe.weight", "ln_f.weight": "ln_f.weight"}
    for i in range(model["n_layer"]):
        block = {"ln1": "attn_norm", "ln2": "ffn_norm", "q": "attn.q_proj", "k": "attn.k_proj"}
        block |= {"v": "attn.v_proj", "o": "attn.o_proj", "fc1": "ffn.fc1", "fc2": "ffn.fc2"}
        theirs |= {f"blocks.{i}.{t}.weight": f"blocks.{i}.{g}.weight" for t, g in block.items()}
    with torch.no_grad():
        for name, p in net.named_parameters():
            p.copy_(torch.from_numpy(ours[theirs[name]]))
