"""LoRA fine-tuning: the Trainer, teaching a frozen pretrained model through small adapters, from chat examples.

    lora.apply(model, targets, r, alpha)                    frozen weights; B = 0, so the model starts as it was
    x, y = batch_size random conversations, padded          y = -100 on prompts, template and padding
    loss = mean over the replies' tokens of -log P(y_t | x_<=t)
    loss.backward(); AdamW steps A and B alone

The checkpoint holds the adapters, their Adam moments, the step and both random states: a few
megabytes for SmolLM2-135M, not its 540 MB of weights, and enough to resume exactly. Its meta
records the LoRA settings, so `load_adapter` can rebuild the adapted model from the base model.

Everything else is the Trainer's: the learning-rate schedule, clipping, the stop before a
non-finite update, the refusal to start a fresh run over a checkpoint, Ctrl-C, metrics.jsonl and
loss.png.
"""

import numpy as np

from gradflow.nn import lora
from gradflow.optim import AdamW
from gradflow.text.chat_data import IGNORE_INDEX, batches, pad
from gradflow.training.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from gradflow.training.trainer import Trainer


class FineTuner(Trainer):
    """Trains the LoRA adapters of `model` (already adapted by lora.apply) on (ids, targets) examples.

    train, val: lists of (ids, targets) from gradflow.text.chat_data (chat_example, load_examples).
    pad_id: the token that fills a short example's row (its targets are -100, so it is never learned).
    meta: JSON facts for the checkpoint; the LoRA settings are added to it.
    """

    adapters_only = True

    def __init__(self, model, train, val, config, pad_id, meta=None, **options):
        found = lora.adapters(model)
        if not found:
            raise ValueError("finetune: the model has no LoRA adapters; apply them first with nn.lora.apply")
        self.pad_id = pad_id
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = AdamW(trainable, lr=config.lr, betas=(config.beta1, config.beta2), weight_decay=config.weight_decay)
        _, first = found[0]
        settings = {
            "targets": sorted({name.rsplit(".", 1)[-1] for name, _ in found}),
            "r": first.r,
            "alpha": first.alpha,
            "dropout": first.dropout,
        }
        meta = {**(meta or {}), "lora": settings}
        super().__init__(model, train, val, config, optimizer=optimizer, meta=meta, **options)

    def take_data(self, train, val):
        """Keep the examples; each split needs one, and every example a reply token within block_size."""
        for name, examples in (("training", train), ("validation", val)):
            if not examples:
                raise ValueError(f"finetune: the {name} split holds no example")
            for i, (_, targets) in enumerate(examples):
                if np.all(np.asarray(targets[: self.config.block_size]) == IGNORE_INDEX):
                    raise ValueError(
                        f"finetune: {name} example {i} has no reply token within block_size "
                        f"{self.config.block_size}; raise --block-size"
                    )
        self.train_examples, self.val_examples = list(train), list(val)

    def training_batch(self):
        """batch_size examples drawn at random (none twice in a batch), padded to the longest."""
        n = len(self.train_examples)
        rows = self.batch_rng.choice(n, size=min(self.config.batch_size, n), replace=False)
        return pad([self.train_examples[i] for i in rows], self.pad_id, self.config.block_size)

    def evaluation_batches(self, split):
        """The split's first eval_iters * batch_size examples, in order: the same at every evaluation."""
        examples = self.train_examples if split == "train" else self.val_examples
        count = self.config.eval_iters * self.config.batch_size
        return batches(examples[:count], self.config.batch_size, self.pad_id, self.config.block_size)


def adapter_settings(ckpt):
    """The LoRA settings (targets, r, alpha, dropout) a loaded Checkpoint holds, checked: a checkpoint
    of a whole model, or settings of the wrong kind, are refused before any model is built."""
    settings = ckpt.meta.get("lora")
    if not isinstance(settings, dict) or set(settings) != {"targets", "r", "alpha", "dropout"}:
        raise CheckpointError(f"{ckpt.path} is not a LoRA adapter checkpoint (gradflow finetune writes those)")
    targets = settings["targets"]
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise CheckpointError(f"checkpoint {ckpt.path}: lora.targets must be a list of layer names, got {targets!r}")
    return settings


def load_adapter(model, path):
    """Adapt `model` (the base model the adapters were trained on) as the checkpoint at path (or a loaded
    Checkpoint) says, load the adapters, and return the Checkpoint. A checkpoint of a whole model is refused."""
    ckpt = path if isinstance(path, Checkpoint) else load_checkpoint(path)
    settings = adapter_settings(ckpt)
    lora.apply(model, **settings)
    ckpt.restore(model, adapters=True)
    return ckpt
