"""Programs written for PyTorch run on gradflow with only their import lines changed, and match PyTorch.

Each tests/program_<name>.py is a PyTorch program (`import torch`) in the idiom of a well-known teaching
program: nanoGPT's model.py, train.py and sample.py; the GPT-2 reproduction lecture's train_gpt2.py;
makemore with its six models, and its lectures' bigram counts, backprop by hand, layers by hand with
their histograms (part 3) and the WaveNet hierarchy (part 5); ng-video-lecture's gpt.py and bigram.py;
minGPT's model, trainer and adder; "The Annotated Transformer"; "Build a Large Language Model (From
Scratch)"; PyTorch's word language model example (main.py with LSTM, GRU, RNN or a Transformer, the model
saved whole, and generate.py); llama2.c's pretokenize, train.py, model.bin export and sample.py; the
tutorials' hand-written SGD step; "Dive into Deep Learning"'s linear and softmax regression from
scratch. `program(name, lib)` reads its source and, for gradflow, rewrites the import lines and nothing
else (`import torch` -> `import gradflow as torch`, `import torch.nn as nn` -> `import gradflow.nn as nn`,
`from torch.x import y` -> `from gradflow.x import y`, `import torch.onnx` -> `import gradflow.onnx`).

Each program runs whole on gradflow, and its loss goes down. Beside PyTorch it starts from the same
weights (gradflow's, loaded into PyTorch's model) and sees the same batches (gradflow's, recorded and
replayed), and the losses agree to float32 rounding; samples drawn where one token is certain are the
same tokens. The PyTorch half needs torch (pip install torch==2.13.0): skipped without it, a failure
when GRADFLOW_REQUIRE_TORCH=1 (CI sets it).
"""

import json
import os
import pickle
import random
import re
import struct
import sys
import types
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
PROGRAMS = sorted(p.stem.removeprefix("program_") for p in HERE.glob("program_*.py"))

# an import of torch or of one of its modules, at any indentation
IMPORT = re.compile(r"^(?P<indent>[ \t]*)(?P<keyword>import|from) torch(?P<module>[.\w]*)(?P<rest>.*)$", re.M)


def to_gradflow(source):
    """The program with `torch` replaced by `gradflow` in its import lines, the name `torch` kept."""

    def swap(m):
        indent, keyword, module, rest = m.group("indent", "keyword", "module", "rest")
        if keyword == "import" and not module:
            assert not rest.strip(), f"write 'import torch' alone on its line: {m.group(0)!r}"
            return f"{indent}import gradflow as torch"
        if keyword == "import" and " as " not in rest:  # import torch.onnx: loads the module, binds `gradflow`
            assert re.search(r"^import torch$", source, re.M), f"{m.group(0)!r} without 'import torch' binds no torch"
        return f"{indent}{keyword} gradflow{module}{rest}"

    return IMPORT.sub(swap, source)


def program(name, lib, as_main=False):
    """Program `name` run as a module on `lib` ("gradflow", or the torch module); as_main runs its
    `if __name__ == "__main__":` part too. Its names are the module's attributes."""
    path = HERE / f"program_{name}.py"
    source = path.read_text(encoding="utf-8")
    if lib == "gradflow":
        source = to_gradflow(source)
    module = types.ModuleType(f"program_{name}_{'gradflow' if lib == 'gradflow' else 'torch'}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # dataclasses look their module up there
    if as_main:
        module.__name__ = "__main__"
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def torch():
    """PyTorch, on one thread: these models are too small to share out, and on a busy machine its
    threads waiting for each other made one test take 20 s instead of 1. What the programs set for the
    whole process (matmul precision, TF32 switches, the seed) is put back for the tests after these."""
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        import torch
    else:
        torch = pytest.importorskip("torch")
    threads, precision, rng = torch.get_num_threads(), torch.get_float32_matmul_precision(), torch.get_rng_state()
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.set_num_threads(1)
    yield torch
    torch.set_num_threads(threads)
    torch.set_float32_matmul_precision(precision)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    torch.set_rng_state(rng)


def load_into(reference, model, torch):
    """PyTorch's model given the gradflow model's weights and buffers."""
    state = {k: torch.from_numpy(np.array(v)) for k, v in model.state_dict().items()}
    reference.load_state_dict(state)


class Recorded:
    """A batch function whose batches are kept (as arrays, in order) to be replayed on PyTorch."""

    def __init__(self, get_batch):
        self.get_batch, self.batches = get_batch, []

    def __call__(self, *args):
        batch = self.get_batch(*args)
        self.batches.append((args, [np.array(t) for t in batch]))
        return batch

    def replay(self, torch):
        batches = iter(self.batches)

        def get_batch(*args):
            recorded_args, arrays = next(batches)
            assert args == recorded_args, f"PyTorch's program asked for {args}, gradflow's for {recorded_args}"
            return tuple(torch.from_numpy(a) for a in arrays)

        return get_batch


def close(ours, theirs, what, rtol=2e-5):
    np.testing.assert_allclose(
        np.array(ours, dtype=np.float64), np.array(theirs, dtype=np.float64), rtol=rtol, err_msg=what
    )


# --- the programs are PyTorch's, changed in their import lines only ----------------------------------


@pytest.mark.parametrize("name", PROGRAMS)
def test_only_import_lines_change(name):
    source = (HERE / f"program_{name}.py").read_text(encoding="utf-8")
    rewritten = to_gradflow(source)
    assert "gradflow" not in source, "a program is PyTorch's: it names torch only"
    changed = [(a, b) for a, b in zip(source.splitlines(), rewritten.splitlines()) if a != b]
    assert changed, "the program imports torch"
    assert all(re.match(r"\s*(import|from) gradflow\b", b) for _, b in changed), changed
    assert len(source.splitlines()) == len(rewritten.splitlines())


# --- nanoGPT: model.py, train.py, sample.py ----------------------------------------------------------


def nanogpt(lib, **settings):
    p = program("nanogpt", lib)
    for k, v in settings.items():
        setattr(p, k, v)
    return p


def test_nanogpt_trains_resumes_and_samples_on_gradflow():
    p = nanogpt("gradflow", compile=True)
    losses, evaluations, texts = p.main()
    assert evaluations[p.max_iters]["val"] < evaluations[0]["val"] - 0.3
    assert len(losses) == p.max_iters and all(t.startswith(p.start) for t in texts)
    assert len(texts) == p.num_samples and all(len(t) == len(p.start) + p.max_new_tokens for t in texts)

    saved = p.torch.load(os.path.join(p.out_dir, "ckpt.pt"), map_location="cpu")
    assert saved["iter_num"] == p.max_iters and set(saved["model_args"]) >= {"n_layer", "vocab_size"}
    p.init_from, p.max_iters = "resume", p.max_iters + 4
    model, _, checkpoint = p.build_model()
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(np.array(value), np.array(saved["model"][name]), err_msg=name)
    losses, evaluations, _ = p.main()
    assert len(losses) == 4 and sorted(evaluations) == [p.max_iters - 4, p.max_iters]


@pytest.mark.parametrize("flash", [True, False], ids=["scaled_dot_product_attention", "attention written out"])
def test_nanogpt_matches_pytorch(torch, flash):
    ours, theirs = nanogpt("gradflow", flash=flash, bias=True), nanogpt(torch, flash=flash, bias=True)
    theirs.out_dir = "out_torch"
    ours.prepare()
    for p in (ours, theirs):
        os.makedirs(p.out_dir, exist_ok=True)
    model, model_args, _ = ours.build_model()
    reference, _, _ = theirs.build_model()
    load_into(reference, model, torch)
    assert model.get_num_params() == reference.get_num_params()
    assert model.estimate_mfu(8, 0.5) == pytest.approx(reference.estimate_mfu(8, 0.5))

    ours.get_batch = Recorded(ours.get_batch)
    theirs.get_batch = ours.get_batch.replay(torch)
    losses, evaluations = ours.train(model, model_args)
    reference_losses, reference_evaluations = theirs.train(reference, model_args)
    close(losses, reference_losses, "training losses, step by step")
    for it, split in evaluations.items():
        close([split["train"], split["val"]], [reference_evaluations[it][s] for s in ("train", "val")], f"eval at {it}")

    ours.top_k = theirs.top_k = 1  # one certain token at each step: the samples must be the same
    assert ours.sample() == theirs.sample()

    x = np.array(ours.get_batch.batches[0][1][0])[:, :8]
    for m in (model, reference):
        m.crop_block_size(8)
    logits, _ = model(ours.torch.from_numpy(x))
    reference_logits, _ = reference(torch.from_numpy(x))
    np.testing.assert_allclose(np.array(logits.detach()), reference_logits.detach().numpy(), rtol=1e-4, atol=1e-5)


# --- makemore: six models, a Dataset of words, an endless DataLoader ---------------------------------

NAMES = """emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily elizabeth mila ella
avery sofia camila aria scarlett victoria madison luna grace chloe penelope layla riley zoey nora lily eleanor
hannah lillian addison aubrey ellie stella natalie zoe leah hazel violet aurora savannah audrey brooklyn bella
claire skylar lucy paisley""".split()
MAKEMORE_TYPES = ["transformer", "bigram", "mlp", "rnn", "gru", "bow"]


@pytest.fixture
def names_file():
    Path("names.txt").write_text("\n".join(NAMES) + "\n")
    return "names.txt"


@pytest.mark.parametrize("kind", MAKEMORE_TYPES)
def test_makemore_trains_saves_and_samples_on_gradflow(names_file, kind):
    p = program("makemore", "gradflow")
    history = p.main(["--type", kind, "--max-steps", "20", "--learning-rate", "3e-2"])
    assert history[20][0] < history[0][0] - 0.1, history
    with pytest.raises(SystemExit):  # resumes from out/model.pt, samples, stops
        p.main(["--type", kind, "--sample-only"])


@pytest.mark.parametrize("kind", MAKEMORE_TYPES)
def test_makemore_matches_pytorch(torch, names_file, kind):
    ours, theirs = program("makemore", "gradflow"), program("makemore", torch)
    args = ours.parse_args(["--type", kind])
    train_dataset, test_dataset = ours.create_datasets(names_file)
    datasets = [theirs.CharDataset(d.words, d.chars, d.max_word_length) for d in (train_dataset, test_dataset)]
    for i in range(len(train_dataset)):  # the same examples, built by each library's tensors
        for ours_t, theirs_t in zip(train_dataset[i], datasets[0][i]):
            np.testing.assert_array_equal(np.array(ours_t), theirs_t.numpy())
    model, reference = ours.build(args, train_dataset), theirs.build(args, datasets[0])
    load_into(reference, model, torch)
    optimizer, reference_optimizer = ours.make_optimizer(model, args), theirs.make_optimizer(reference, args)

    loader = ours.InfiniteDataLoader(train_dataset, batch_size=args.batch_size)
    for step in range(4):
        batch = loader.next()
        loss = ours.train_step(model, optimizer, batch)
        reference_loss = theirs.train_step(
            reference, reference_optimizer, [torch.from_numpy(np.array(t)) for t in batch]
        )
        close(loss.item(), reference_loss.item(), f"loss at step {step}")
    # one batch holds the whole test set, so the shuffled order does not change the mean
    close(ours.evaluate(model, test_dataset, 100), theirs.evaluate(reference, datasets[1], 100), "test loss")
    greedy = ours.print_samples(model, train_dataset, test_dataset, num=3, do_sample=False)
    assert greedy == theirs.print_samples(reference, *datasets, num=3, do_sample=False)
    drawn = ours.generate(model, ours.torch.zeros(4, 1, dtype=ours.torch.long), 5, do_sample=True, top_k=3)
    assert drawn.shape == (4, 6) and drawn.dtype == ours.torch.long


# --- the GPT-from-scratch lecture: gpt.py and bigram.py --------------------------------------------

TEXT = (
    """When the river rose in spring, the miller opened every gate and let the water run.
The wheel turned all day and all night, and the stones ground the grain into flour so fine
that the baker said it fell like snow. In summer the river slept, the wheel stood still,
and the miller mended the gates, counted his sacks, and waited for the rain to come back.
"""
    * 3
)
LECTURE = ["lecture_gpt", "lecture_bigram"]


@pytest.fixture
def input_txt():
    Path("input.txt").write_text(TEXT, encoding="utf-8")


def lecture_model(p):
    return p.GPTLanguageModel() if hasattr(p, "GPTLanguageModel") else p.BigramLanguageModel(p.vocab_size)


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
@pytest.mark.parametrize("name", LECTURE)
def test_lecture_programs_run_whole_and_learn(request, input_txt, name, lib):
    p = program(name, "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), as_main=True)
    first, last = p.estimates[0], p.estimates[max(p.estimates)]
    assert last["train"] < first["train"] - 0.3, p.estimates
    assert len(p.sample) == 41 and set(p.sample) <= set(p.chars)


@pytest.mark.parametrize("name", LECTURE)
def test_lecture_programs_match_pytorch(torch, input_txt, name):
    ours, theirs = program(name, "gradflow"), program(name, torch)
    for p in (ours, theirs):
        p.dropout = 0.0  # the same weights and batches, and no random masks
        p.model = lecture_model(p)
    load_into(theirs.model, ours.model, torch)
    for p in (ours, theirs):
        p.optimizer = p.torch.optim.AdamW(p.model.parameters(), lr=p.learning_rate)
    ours.get_batch = Recorded(ours.get_batch)
    theirs.get_batch = ours.get_batch.replay(torch)
    (losses, estimates), (reference_losses, reference_estimates) = ours.train(), theirs.train()
    close(losses, reference_losses, "training losses, step by step")
    for it, split in estimates.items():
        close([split["train"], split["val"]], [reference_estimates[it][s] for s in ("train", "val")], f"eval at {it}")

    # scaled up, the output layer is sure of every next token, so multinomial draws the same on both
    sure = {
        k: np.array(v) * (1e4 if k.startswith(("lm_head", "token_embedding")) else 1)
        for k, v in ours.model.state_dict().items()
    }
    ours.model.load_state_dict(sure)
    load_into(theirs.model, ours.model, torch)
    samples = [
        p.model.generate(p.torch.zeros((2, 1), dtype=p.torch.long), max_new_tokens=30).tolist() for p in (ours, theirs)
    ]
    assert samples[0] == samples[1]


# --- gradient descent by hand: w -= learning_rate * w.grad under no_grad -----------------------------


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_manual_sgd_runs_whole_and_learns(request, lib):
    p = program("manual_sgd", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), as_main=True)
    for losses in (p.by_hand, p.zeroed, p.with_module):
        assert losses[-1] < losses[0] / 100 and losses[-1] < 2, losses[::50]


@pytest.mark.parametrize("forget", ["none", "zero_"])
def test_manual_sgd_matches_pytorch(torch, forget):
    ours, theirs = program("manual_sgd", "gradflow"), program("manual_sgd", torch)
    weights = ours.coefficients()
    reference_weights = [torch.tensor(w.item(), requires_grad=True) for w in weights]
    close(ours.fit(*weights, forget=forget), theirs.fit(*reference_weights, forget=forget), "losses")
    close([w.item() for w in weights], [w.item() for w in reference_weights], "coefficients")

    model, reference = ours.polynomial_model(), theirs.polynomial_model()
    load_into(reference, model, torch)
    close(ours.fit_module(model), theirs.fit_module(reference), "losses of the module")


# --- the makemore notebooks: bare tensors, batch norm and every gradient by hand ----------------------


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_makemore_notebooks_run_whole_and_learn(request, names_file, lib):
    p = program("makemore_notebooks", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), True)
    assert all(p.verdicts.values()), p.verdicts  # every gradient by hand is autograd's
    assert np.mean(p.lossi[-20:]) < np.mean(p.lossi[:20]) - 0.05
    assert p.losses["train"] < 2.8 and all(n.endswith(".") or len(n) == 21 for n in p.names)


def test_makemore_notebooks_match_pytorch(torch, names_file):
    ours, theirs = program("makemore_notebooks", "gradflow"), program("makemore_notebooks", torch)
    np.testing.assert_array_equal(np.array(ours.Xtr), theirs.Xtr.numpy())  # the same words, split the same
    parameters = ours.init_parameters()
    reference = [torch.tensor(np.array(p.detach()), requires_grad=True) for p in parameters]
    ours.get_batch = Recorded(ours.get_batch)
    theirs.get_batch = ours.get_batch.replay(torch)
    assert ours.check_gradients(parameters) == theirs.check_gradients(reference)
    (lossi, ud), (reference_lossi, reference_ud) = ours.train(parameters, 100), theirs.train(reference, 100)
    close(lossi, reference_lossi, "log10 of the loss, step by step", rtol=1e-4)
    # b1 (index 2) feeds batch norm, which subtracts it again: its gradient is zero up to float rounding,
    # so the log of its update's size is the log of rounding noise and differs between any two engines
    ud, reference_ud = np.delete(np.array(ud), 2, axis=1), np.delete(np.array(reference_ud), 2, axis=1)
    np.testing.assert_allclose(ud, reference_ud, atol=1e-3, err_msg="update to weight ratios")
    for split in ("train", "val"):
        close(ours.split_loss(parameters, split), theirs.split_loss(reference, split), split, rtol=1e-4)


# --- makemore's lectures on activations (part 3) and WaveNet (part 5): layers by hand, histograms ------


def test_makemore_layers_runs_whole_and_learns(names_file):
    p = program("makemore_layers", "gradflow", True)
    assert np.mean(p.lossi3[-5:]) < np.mean(p.lossi3[:5]) and np.mean(p.lossi5[-10:]) < np.mean(p.lossi5[:10]) - 0.05
    for hy, hx, saturated in (s for s in p.stats if isinstance(s, tuple)):  # densities: they integrate to 1
        assert len(hy) == 100 and len(hx) == 101 and 0 <= saturated <= 100
        assert np.sum(np.array(hy) * np.diff(hx)) == pytest.approx(1.0, rel=1e-5)
    # one example at a time, each (1, vocab) row assigned into logits[i], is the batch's logits (eval mode)
    np.testing.assert_allclose(np.array(p.logits.detach()), np.array(p.batched), rtol=1e-5, atol=1e-6)
    assert len(p.names) == 5 and all(n.endswith(".") or len(n) == 21 for n in p.names)


def test_makemore_layers_matches_pytorch(torch, names_file):
    """From the lecture's seeds, PyTorch's numbers: losses, histograms, ratios, the rows, the names."""
    ours, theirs = program("makemore_layers", "gradflow", True), program("makemore_layers", torch, True)
    close(ours.lossi3, theirs.lossi3, "part 3: log10 of the loss, step by step", rtol=1e-5)
    close(ours.lossi5, theirs.lossi5, "part 5: log10 of the loss, step by step", rtol=1e-5)
    for a, b in zip(ours.stats, theirs.stats):
        if isinstance(a, tuple):  # histogram counts can move by an element at a bin's edge: densities to 1e-3
            span = b[1][-1] - b[1][0]  # an edge near 0 is a difference of two float32 numbers: to the span's rounding
            np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-6 * span, err_msg="histogram bin edges")
            np.testing.assert_allclose(a[0], b[0], rtol=1e-3, atol=1e-3 * max(b[0]), err_msg="histogram densities")
            assert a[2] == b[2], "saturated tanh units"
        else:
            close(a, b, "a weight's gradient to data ratio", rtol=1e-4)
    close(np.array(ours.logits.detach()), theirs.logits.detach().numpy(), "logits[i] = model(Xtr[[7+i]])", rtol=1e-4)
    close(list(ours.losses.values()), list(theirs.losses.values()), "split losses", rtol=1e-5)
    assert ours.names == theirs.names


# --- "Build a Large Language Model (From Scratch)": masks filled in place, config dicts, DataLoaders ----


@pytest.fixture
def story_file():
    Path("the-story.txt").write_text(TEXT, encoding="utf-8")
    return "the-story.txt"


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_llm_from_scratch_runs_whole_and_learns(request, story_file, lib):
    p = program("llm_from_scratch", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), True)
    assert p.train_losses[-1] < p.train_losses[0] - 0.5, p.train_losses
    assert len(p.samples) == p.HPARAMS["num_epochs"] and all(s.startswith("the ") for s in p.samples)
    assert p.tokens_seen[-1] > p.tokens_seen[0] and p.model.training is False


def test_llm_from_scratch_matches_pytorch(torch, story_file):
    ours, theirs = program("llm_from_scratch", "gradflow"), program("llm_from_scratch", torch)
    tokenizer = ours.CharTokenizer(TEXT)
    config = {**ours.GPT_CONFIG, "vocab_size": len(tokenizer.chars), "drop_rate": 0.0}
    model, reference = ours.GPTModel(config), theirs.GPTModel(config)
    load_into(reference, model, torch)
    results, split = [], int(0.9 * len(TEXT))
    for p, m in ((ours, model), (theirs, reference)):
        optimizer = p.torch.optim.AdamW(m.parameters(), lr=5e-3, weight_decay=0.1)
        train, val = (p.create_dataloader(t, tokenizer, 4, 16, 16, shuffle=False) for t in (TEXT[:split], TEXT[split:]))
        results.append(p.train_model_simple(m, train, val, optimizer, "cpu", 2, 5, 1, "the "))
    (losses, (train_losses, val_losses, seen), samples), (ref_losses, ref_evaluations, ref_samples) = results
    close(losses, ref_losses, "training losses, step by step")
    close([train_losses, val_losses], ref_evaluations[:2], "evaluations")
    assert seen == ref_evaluations[2] and samples == ref_samples
    start = [p.text_to_token_ids("the ", tokenizer) for p in (ours, theirs)]
    drawn = [
        p.generate(m, s, 12, 16, temperature=1.4, top_k=1) for p, m, s in zip((ours, theirs), (model, reference), start)
    ]
    assert drawn[0].tolist() == drawn[1].tolist()  # top_k=1 leaves one token to draw


# --- PyTorch's word language model example: LSTM, GRU and RNN over word ids ---------------------------


@pytest.fixture
def corpus_folder():
    lines = TEXT.splitlines()
    Path("data").mkdir()
    for name, part in (("train", lines[:9]), ("valid", lines[9:11]), ("test", lines[11:])):
        Path("data", f"{name}.txt").write_text("\n".join(part) + "\n", encoding="utf8")
    return "data"


@pytest.mark.parametrize("model_type", ["LSTM", "Transformer"])
@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_word_language_model_runs_whole_and_learns(request, corpus_folder, lib, model_type):
    p = program("word_language_model", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"))
    history, test_loss = p.main(model_type=model_type)  # the model saved whole, loaded under safe_globals
    (first, _), (last, _) = history[0], history[-1]
    assert last < first - 0.3 and test_loss < 4.2, (history, test_loss)
    p.generate(words=30)  # generate.py: the saved model, loaded again, writes 30 words
    words = Path("generated.txt").read_text().split()
    assert len(words) == 30 and set(words) <= set(p.Corpus(corpus_folder).dictionary.word2idx)
    with open("model.pt", "rb") as f, pytest.raises(pickle.UnpicklingError, match="RNNModel|TransformerModel"):
        p.torch.load(f)  # without the classes allowed: refused, naming the first


def test_word_language_model_trains_saves_and_generates_as_pytorch(torch, corpus_folder):
    """The whole run from the same seed: the same losses epoch by epoch, the same test loss, the same words."""
    results = []
    for p in (program("word_language_model", "gradflow"), program("word_language_model", torch)):
        history, test_loss = p.main(model_type="LSTM")
        p.generate(words=30)
        results.append((history, test_loss, Path("generated.txt").read_text()))
    close(results[0][0], results[1][0], "training and validation loss, epoch by epoch", rtol=1e-5)
    close(results[0][1], results[1][1], "test loss", rtol=1e-5)
    assert results[0][2] == results[1][2]


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN_TANH", "Transformer"])
def test_word_language_model_matches_pytorch(torch, corpus_folder, kind):
    ours, theirs = program("word_language_model", "gradflow"), program("word_language_model", torch)
    corpora = [p.Corpus(corpus_folder) for p in (ours, theirs)]
    if kind == "Transformer":  # nn.Transformer's layers keep their dropout (0.1): the same seed draws the same
        models = [
            p.TransformerModel(len(c.dictionary), 16, 2, 16, 2, dropout=0.0) for p, c in zip((ours, theirs), corpora)
        ]
    else:
        models = [
            p.RNNModel(kind, len(c.dictionary), 16, 16, 2, dropout=0.0, tie_weights=True)
            for p, c in zip((ours, theirs), corpora)
        ]
    load_into(models[1], models[0], torch)
    results = []
    for p, corpus, model in zip((ours, theirs), corpora, models):
        criterion = p.nn.NLLLoss()
        p.torch.manual_seed(0)
        lr = 1.0 if kind == "Transformer" else 20.0  # (a transformer at 20 jumps about: rounding would show)
        losses = p.train_epoch(model, p.batchify(corpus.train, 4), 4, criterion, lr=lr)
        results.append((losses, p.evaluate(model, p.batchify(corpus.valid, 2), 2, criterion)))
    close(results[0][0], results[1][0], "training losses, batch by batch")
    close(results[0][1], results[1][1], "validation loss")


# --- llama2.c: pretokenized shards, an IterableDataset asking get_worker_info, model.bin, sample.py ----


def llama2c_run(lib):
    """The whole program on lib: its validation losses by step, training losses, model.bin's floats, samples."""
    p = program("llama2c", lib)
    val_losses, train_losses, texts = p.main(TEXT * 3)
    header, weights = Path("out/model.bin").read_bytes()[:28], np.fromfile("out/model.bin", dtype="<f4", offset=28)
    return p, val_losses, train_losses, (struct.unpack("iiiiiii", header), weights), texts


def test_llama2c_trains_exports_and_samples_on_gradflow():
    p, val_losses, train_losses, (header, weights), texts = llama2c_run("gradflow")
    assert val_losses[p.max_iters] < val_losses[0] - 0.5 and len(train_losses) == p.max_iters + 1
    dim, hidden, n_layers, n_heads, n_kv_heads, vocab_size, seq_len = header
    assert (dim, n_layers, n_heads, n_kv_heads, seq_len) == (p.dim, p.n_layers, p.n_heads, p.n_kv_heads, p.max_seq_len)
    per_layer = 2 * dim + 2 * dim * dim + 2 * dim * (dim // n_heads * n_kv_heads) + 3 * dim * hidden
    assert (
        weights.size == vocab_size * dim + n_layers * per_layer + dim + seq_len * dim // n_heads
    )  # tied: no classifier
    assert len(texts) == 2 and all(len(t) == 41 for t in texts)


def test_llama2c_matches_pytorch(torch):
    """From the same seed, the same run: the same draws make the same weights, the dataset's own random.Random
    the same batches, so the losses, model.bin and the samples agree with PyTorch's."""
    ours, theirs = llama2c_run("gradflow"), llama2c_run(torch)
    close(list(ours[1].values()), list(theirs[1].values()), "validation loss at steps 0, 10 and 20", rtol=1e-5)
    close(ours[2], theirs[2], "training loss, step by step", rtol=1e-5)
    assert ours[3][0] == theirs[3][0]
    np.testing.assert_allclose(ours[3][1], theirs[3][1], rtol=1e-4, atol=1e-6, err_msg="model.bin's weights")
    assert ours[4] == theirs[4]


# --- the GPT-2 reproduction lecture's train_gpt2.py: shards, accumulation, autocast, gather ----------


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_build_nanogpt_runs_whole_and_learns(request, lib):
    p = program("build_nanogpt", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"))
    if lib == "gradflow":
        with pytest.warns(UserWarning, match="autocast: gradflow has no bfloat16"):
            losses, norms, val_losses, accuracies, samples = p.main(TEXT)
    else:
        losses, norms, val_losses, accuracies, samples = p.main(TEXT)
    assert val_losses[-1] < val_losses[0] - 0.5 and losses[-1] < losses[0] - 0.5, (val_losses, losses)
    assert len(norms) == p.max_steps and all(s.startswith("the ") for pair in samples for s in pair)
    checkpoint = p.torch.load(os.path.join(p.log_dir, f"model_{p.max_steps - 1:05d}.pt"), weights_only=False)
    assert checkpoint["config"].n_layer == 2 and checkpoint["step"] == p.max_steps - 1


def test_build_nanogpt_matches_pytorch(torch):
    ours, theirs = program("build_nanogpt", "gradflow"), program("build_nanogpt", torch)
    ours.write_shards(TEXT)
    theirs.log_dir = "log_torch"
    for p in (ours, theirs):
        p.use_autocast = False  # PyTorch's CPU autocast computes in bfloat16, gradflow in float32
        p.top_k = 1  # one token to draw from: the same samples
    model, reference = ours.GPT(ours.GPTConfig()), theirs.GPT(theirs.GPTConfig())
    load_into(reference, model, torch)
    (losses, norms, val_losses, accuracies, samples) = ours.train(model, TEXT)
    (ref_losses, ref_norms, ref_val_losses, ref_accuracies, ref_samples) = theirs.train(reference, TEXT)
    close(losses, ref_losses, "training losses, step by step")
    close(norms, ref_norms, "gradient norms", rtol=2e-4)
    close(val_losses, ref_val_losses, "validation losses")
    assert accuracies == ref_accuracies and samples == ref_samples


# --- makemore's first lecture: counts, then the same bigram as a one-hot linear layer -------------------


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_makemore_bigram_runs_whole_and_learns(request, names_file, lib):
    p = program("makemore_bigram", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), True)
    assert p.losses[-1] < p.losses[0] - 0.5 and p.losses[-1] < p.counted + 0.1, (p.losses[::10], p.counted)
    assert all(n.endswith(".") and set(n) <= set(p.stoi) for n in p.names + p.learned)


def test_makemore_bigram_matches_pytorch(torch, names_file):
    ours, theirs = program("makemore_bigram", "gradflow"), program("makemore_bigram", torch)
    counts = [p.count_bigrams() for p in (ours, theirs)]
    assert counts[0].dtype == ours.torch.int32 and np.array_equal(np.array(counts[0]), counts[1].numpy())
    close(ours.nll(ours.normalize(counts[0])), theirs.nll(theirs.normalize(counts[1])), "the counted model's loss")
    W = ours.init_weights(ours.torch.Generator().manual_seed(1))
    reference = torch.tensor(np.array(W.detach()), requires_grad=True)
    losses = ours.train(W, *ours.training_set())
    close(losses, theirs.train(reference, *theirs.training_set()), "the neural bigram's losses, step by step")


# --- minGPT: a config tree, weight decay chosen by module type, a Trainer with callbacks, the adder ----


@pytest.mark.filterwarnings("ignore:'pin_memory' argument is set as true but no accelerator")  # PyTorch's, no GPU
@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_mingpt_runs_whole_and_learns(request, lib):
    p = program("mingpt", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"))
    losses, scores, top_score = p.main(["--trainer.max_iters=150", "--system.work_dir=out/adder"])
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.5, losses[::10]
    assert sorted(scores) == [0, 50, 100, 149] and top_score.item() > 0, scores
    saved = p.torch.load(os.path.join("out", "adder", "model.pt"))
    assert "lm_head.weight" in saved and "transformer.h.1.attn.bias" in saved
    assert json.loads(Path("out/adder/config.json").read_text())["trainer"]["max_iters"] == 150


def mingpt_built(p, ixes=None):
    """The adder's datasets and a model without dropout, built by program p; the test split's
    problems given (a torch.Generator draws other problems than gradflow's)."""
    C = p.get_config()
    C.model.embd_pdrop = C.model.resid_pdrop = C.model.attn_pdrop = 0.0
    C.trainer.max_iters = 8
    train_dataset, test_dataset = (p.AdditionDataset(C.data, split) for split in ("train", "test"))
    if ixes is not None:
        train_dataset.ixes, test_dataset.ixes = (p.torch.from_numpy(np.array(i)) for i in ixes)
    C.model.vocab_size, C.model.block_size = train_dataset.get_vocab_size(), train_dataset.get_block_size()
    return C, train_dataset, test_dataset, p.GPT(C.model)


def test_mingpt_matches_pytorch(torch):
    ours, theirs = program("mingpt", "gradflow"), program("mingpt", torch)
    C, train_dataset, test_dataset, model = mingpt_built(ours)
    _, reference_train, reference_test, reference = mingpt_built(theirs, (train_dataset.ixes, test_dataset.ixes))
    load_into(reference, model, torch)
    assert [np.array(t).tolist() for t in train_dataset[5]] == [t.tolist() for t in reference_train[5]]
    groups = [[[tuple(q.shape) for q in g["params"]] for g in m.configure_optimizers(C.trainer).param_groups]
              for m in (model, reference)]  # fmt: skip
    assert groups[0] == groups[1] and len(groups[0][0]) == 2 * 4 + 1  # the Linear layers' weights only

    batches, gradflow_loader = [], ours.DataLoader

    def recording(*args, **kwargs):  # the trainer's shuffled batches, kept to be replayed
        for batch in gradflow_loader(*args, **kwargs):
            batches.append([np.array(t) for t in batch])
            yield batch

    def replaying(*args, **kwargs):
        return [[torch.from_numpy(t) for t in batch] for batch in batches]

    losses = []
    for p, m, dataset, loader in (
        (ours, model, train_dataset, recording),
        (theirs, reference, reference_train, replaying),
    ):
        trainer, seen = p.Trainer(C.trainer, m, dataset), []
        trainer.add_callback("on_batch_end", lambda t, seen=seen: seen.append(t.loss.item()))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(p, "DataLoader", loader)
            trainer.run()
        losses.append(seen)
    assert len(losses[0]) == C.trainer.max_iters
    close(losses[0], losses[1], "training losses, step by step")

    score = ours.eval_split(model, test_dataset, C.data.ndigit)
    assert score.item() == theirs.eval_split(reference, reference_test, C.data.ndigit).item()
    prompt = np.array([[1, 2, 3, 4], [9, 9, 0, 5]])
    for kwargs in ({}, {"do_sample": True, "top_k": 1}):  # top_k=1 leaves one token to draw
        drawn = [m.generate(p.torch.from_numpy(prompt), 5, **kwargs) for p, m in ((ours, model), (theirs, reference))]
        assert drawn[0].tolist() == drawn[1].tolist(), kwargs


# --- The Annotated Transformer: an encoder-decoder copying sequences, label smoothing, warmup ---------


@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_annotated_transformer_runs_whole_and_learns(request, lib):
    p = program("annotated_transformer", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), True)
    (first_train, first_eval), (last_train, last_eval) = p.history[0], p.history[-1]
    assert last_train < first_train - 0.3 and last_eval < first_eval - 0.3, p.history
    assert p.copied.shape == (1, 10) and p.copied[0, 0].item() == 1 and p.copied.max().item() < p.V, p.copied


def test_annotated_transformer_matches_pytorch(torch):
    ours, theirs = program("annotated_transformer", "gradflow"), program("annotated_transformer", torch)
    model, reference = ours.make_model(ours.V, ours.V, dropout=0.0), theirs.make_model(theirs.V, theirs.V, dropout=0.0)
    load_into(reference, model, torch)
    batches = list(ours.data_gen(ours.V, 8, 6))
    reference_batches = [theirs.Batch(*[torch.from_numpy(np.array(b.src))] * 2, 0) for b in batches]
    for b, rb in zip(batches, reference_batches):
        np.testing.assert_array_equal(np.array(b.tgt_mask), rb.tgt_mask.numpy())
        assert b.ntokens == rb.ntokens.item()

    results = []
    for p, m, bs in ((ours, model, batches), (theirs, reference, reference_batches)):
        criterion = p.LabelSmoothing(p.V, padding_idx=0, smoothing=0.1)
        optimizer, lr_scheduler = p.make_optimizer(m)
        state, losses, rates = p.TrainState(), [], []
        for batch in bs:  # one batch an epoch: the loss of every step
            rates.append(optimizer.param_groups[0]["lr"])
            loss, _ = p.run_epoch([batch], m, p.SimpleLossCompute(m.generator, criterion), optimizer, lr_scheduler,
                                  train_state=state)  # fmt: skip
            losses.append(float(loss))
        m.eval()
        loss, _ = p.run_epoch(bs[:2], m, p.SimpleLossCompute(m.generator, criterion), p.DummyOptimizer(),
                              p.DummyScheduler(), mode="eval")  # fmt: skip
        src = p.torch.LongTensor([[1, 3, 5, 7, 9, 2, 4, 6, 8, 10]])
        copied = p.greedy_decode(m, src, p.torch.ones(1, 1, 10), max_len=10, start_symbol=1)
        true_dist = np.array(criterion.true_dist.tolist())
        results.append((losses, rates, float(loss), true_dist, int(state.tokens), copied.tolist()))
    (losses, rates, loss, true_dist, tokens, copied), reference_results = results
    close(losses, reference_results[0], "training losses, step by step")
    close(rates, reference_results[1], "learning rates", rtol=1e-12)
    close(loss, reference_results[2], "evaluation loss")
    assert (true_dist == 0).all(axis=1).any()  # a padding target's row emptied by index_fill_
    np.testing.assert_allclose(true_dist, reference_results[3], rtol=1e-6)
    assert tokens == reference_results[4] and copied == reference_results[5]


# --- Dive into Deep Learning: linear and softmax regression from scratch, then with nn and optim ------


# d2l's float(l.sum()) of a loss that requires grad: PyTorch warns, and computes the number all the same
D2L_FLOAT = "ignore:Converting a tensor with requires_grad=True to a scalar"


@pytest.mark.filterwarnings(D2L_FLOAT)
@pytest.mark.parametrize("lib", ["gradflow", "torch"])
def test_d2l_scratch_runs_whole_and_learns(request, lib):
    p = program("d2l_scratch", "gradflow" if lib == "gradflow" else request.getfixturevalue("torch"), True)
    assert p.linreg_losses[-1] < 1e-3 < p.linreg_losses[0], p.linreg_losses
    assert np.abs(np.ravel(p.w_hat.detach().tolist()) - [2, -3.4]).max() < 0.01
    for history in (p.scratch, p.concise):
        assert history[-1][0] < history[0][0] - 0.1 and history[-1][2] > 0.7, history
    assert len(p.predictions) == 6 and all(set(pair) <= set(p.text_labels) for pair in p.predictions)


@pytest.mark.filterwarnings(D2L_FLOAT)
def test_d2l_scratch_matches_pytorch(torch):
    ours, theirs = program("d2l_scratch", "gradflow"), program("d2l_scratch", torch)
    features, labels = ours.synthetic_data(ours.torch.tensor([2, -3.4]), 4.2, 200)
    w, b = ours.init_params()
    reference = [torch.tensor(np.array(t.detach()), requires_grad=True) for t in (w, b)]
    data = [torch.from_numpy(np.array(t)) for t in (features, labels)]
    random.seed(1)  # data_iter's shuffle is Python's: the same minibatches on both
    losses = ours.train_linreg(w, b, features, labels)
    random.seed(1)
    close(losses, theirs.train_linreg(*reference, *data), "linear regression's losses, epoch by epoch")
    for ours_t, theirs_t, name in zip((w, b), reference, "wb"):
        close(np.array(ours_t.detach()), theirs_t.detach().numpy(), name)

    X, y = ours.synthetic_images(300)
    theirs.W, theirs.b = (torch.tensor(np.array(t.detach()), requires_grad=True) for t in (ours.W, ours.b))
    concise = [p.concise_net() for p in (ours, theirs)]
    load_into(concise[1], concise[0], torch)
    histories, predictions = [], []
    for p, images, classes, net in (
        (ours, X, y, concise[0]),
        (theirs, torch.from_numpy(np.array(X)), torch.from_numpy(np.array(y)), concise[1]),
    ):
        train_iter = p.load_array((images[:240], classes[:240]), 32, is_train=False)  # in order: the same batches
        test_iter = p.load_array((images[240:], classes[240:]), 32, is_train=False)
        histories.append(p.train_ch3(p.net, train_iter, test_iter, p.cross_entropy, 3, p.updater))
        predictions.append(p.predict_ch3(p.net, test_iter))
        trainer = p.torch.optim.SGD(net.parameters(), lr=0.1)
        histories.append(p.train_ch3(net, train_iter, test_iter, p.nn.CrossEntropyLoss(reduction="none"), 3, trainer))
    close(histories[0], histories[2], "softmax regression from scratch: loss and accuracies, epoch by epoch")
    close(histories[1], histories[3], "the concise model: loss and accuracies, epoch by epoch")
    assert predictions[0] == predictions[1]
