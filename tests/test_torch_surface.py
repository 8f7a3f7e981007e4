"""The CPU-only device surface and torch.utils.data: a GPU program's lines run on gradflow as written.

Each idiom beside its PyTorch twin where torch is installed (GRADFLOW_REQUIRE_TORCH=1 makes it
required): devices, the torch.cuda questions, torch.backends switches, mixed precision off,
generators, DataLoader batches. Then every refusal's one line, which needs no torch.
"""

import json
import os
import pickle
import re
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from numpy.testing import assert_array_equal

import gradflow as gf
from gradflow.nn import functional as F_
from gradflow.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
    default_collate,
    random_split,
)

try:
    import torch
except ImportError:
    if os.environ.get("GRADFLOW_REQUIRE_TORCH") == "1":
        raise
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch (pip install torch==2.13.0)")


def as_array(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy())


# --- devices ------------------------------------------------------------------------------------

FACTORIES = [
    "lib.tensor([1.0, 2.0], device=dev)",
    "lib.zeros(2, 3, device=dev)",
    "lib.ones((2,), dtype=lib.long, device=dev)",
    "lib.full((2, 2), 7, device=dev)",
    "lib.arange(5, device=dev)",
    "lib.arange(0, 1, 0.25, device=dev)",
    "lib.empty(2, device=dev).shape",
    "lib.zeros_like(lib.ones(3), device=dev)",
    "lib.ones_like(lib.ones(3), device=dev)",
    "lib.full_like(lib.ones(3), 2.0, device=dev)",
    "lib.empty_like(lib.ones(3), device=dev).shape",
    "lib.rand(2, device=dev).shape",
    "lib.randn(2, device=dev).shape",
    "lib.randint(0, 5, (3,), device=dev).dtype",
    "lib.randperm(4, device=dev).sort().values",
    "lib.linspace(0, 1, 5, device=dev)",
    "lib.zeros(1, device=dev).device.type",
    "str(lib.zeros(1, device=dev).device)",
    "lib.zeros(1, device=dev).is_cuda",
    "lib.zeros(2, device=dev).to(dev).cpu().to(device=dev, non_blocking=True)",
    "lib.zeros((1, 1), dtype=lib.long, device=dev)",
    "lib.ones(2, dtype=lib.float64).new_zeros(2, 3, device=dev)",
    "lib.ones(2, dtype=lib.float64).new_ones((2,), device=dev)",
    "lib.ones(2).new_full((2,), 7, device=dev)",
    "lib.ones(2, dtype=lib.float64).new_tensor([1, 2], device=dev)",
    "lib.ones(2).new_zeros(2, dtype=lib.long, device=dev)",
    "lib.ones(2).new_empty(3, device=dev).shape",
    "lib.as_tensor([1, 2], device=dev)",
    "lib.as_tensor(np.arange(3.0), dtype=lib.float32, device=dev)",
    "lib.as_tensor(lib.tensor([1.0, 2.0]), dtype=lib.float64, device=dev)",
]


@needs_torch
@pytest.mark.parametrize("call", FACTORIES)
@pytest.mark.parametrize("name", ["cpu", "cpu:0", "device"])
def test_every_factory_takes_the_cpu_as_pytorch_does(call, name):
    def run(lib):
        dev = lib.device("cpu") if name == "device" else name
        return eval(call, {"lib": lib, "dev": dev, "np": np})

    ours, theirs = run(gf), run(torch)
    if hasattr(theirs, "numpy"):
        assert_array_equal(as_array(ours), as_array(theirs))
    elif isinstance(theirs, torch.dtype):
        assert str(ours) == str(theirs)  # torch.int64, as PyTorch prints it
    else:
        assert ours == theirs


@needs_torch
def test_as_tensor_shares_memory_where_pytorchs_does():
    for lib in (gf, torch):
        a = np.arange(3.0)
        t = lib.as_tensor(a)
        a[0] = 9
        x = lib.tensor([1.0, 2.0])
        assert t.tolist() == [9.0, 1.0, 2.0] and lib.as_tensor(x) is x and lib.as_tensor(x, dtype=lib.float32) is x


def test_the_one_device():
    x = gf.zeros(2)
    assert x.device == gf.device("cpu") == gf.device("cpu:0") == gf.device("cpu", 0) == "cpu"
    assert repr(x.device) == "device(type='cpu')" and x.get_device() == -1
    assert x.cpu() is x and x.pin_memory() is x and x.to(gf.device("cpu")) is x
    assert x.to("cpu", copy=True) is not x
    assert {gf.device("cpu"): 1}[gf.device(gf.device("cpu"))] == 1
    model = gf.nn.Linear(2, 2)
    assert model.to(gf.device("cpu")) is model and model.to("cpu", non_blocking=True) is model


@pytest.mark.parametrize(
    "call, line",
    [
        (lambda: gf.zeros(2, device="cuda"), "zeros: gradflow runs on numpy on the CPU; there is no device 'cuda'"),
        (
            lambda: gf.tensor([1], device="cuda:0"),
            "tensor: gradflow runs on numpy on the CPU; there is no device 'cuda:0'",
        ),
        (lambda: gf.arange(3, device="mps"), "arange: gradflow runs on numpy on the CPU; there is no device 'mps'"),
        (lambda: gf.randn(2, device="cuda"), "randn: gradflow runs on numpy on the CPU; there is no device 'cuda'"),
        (
            lambda: gf.randint(0, 2, (2,), device="cuda"),
            "randint: gradflow runs on numpy on the CPU; there is no device 'cuda'",
        ),
        (
            lambda: gf.zeros_like(gf.ones(1), device="cuda"),
            "zeros: gradflow runs on numpy on the CPU; there is no device 'cuda'",
        ),
        (lambda: gf.device("cuda"), "device: gradflow runs on numpy on the CPU; there is no device 'cuda'"),
        (lambda: gf.device("cuda", 1), "device: gradflow runs on numpy on the CPU; there is no device 'cuda:1'"),
        (lambda: gf.zeros(2).cuda(), "cuda: gradflow runs on numpy on the CPU; there is no device 'cuda'"),
        (
            lambda: gf.zeros(2).to("cuda", non_blocking=True),
            "to: gradflow runs on numpy on the CPU; there is no device 'cuda'",
        ),
        (
            lambda: gf.ones(2).new_zeros(2, device="cuda"),
            "new_zeros: gradflow runs on numpy on the CPU; there is no device 'cuda'",
        ),
        (
            lambda: gf.Generator(device="cuda"),
            "Generator: gradflow runs on numpy on the CPU; there is no device 'cuda'",
        ),
    ],
)
def test_another_device_is_refused_in_one_line_naming_op_and_device(call, line):
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        call()


# --- torch.cuda, torch.backends, set_float32_matmul_precision -----------------------------------


@needs_torch
def test_the_cuda_questions_are_answered_as_pytorchs_on_a_computer_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("PyTorch sees a GPU on this computer")
    for lib in (gf, torch):
        assert not lib.cuda.is_available() and lib.cuda.device_count() == 0 and not lib.cuda.is_bf16_supported()
        lib.cuda.manual_seed(1)
        lib.cuda.manual_seed_all(1)
        x = lib.zeros(1)
        assert (str(x.device), repr(x.device), x.get_device(), x.is_cuda) == ("cpu", "device(type='cpu')", -1, False)
        assert not lib.distributed.is_initialized()


def test_a_gpu_program_asks_and_takes_the_cpu_path():
    assert gf.cuda.is_available() is False and gf.cuda.device_count() == 0 and gf.cuda.is_bf16_supported() is False
    dtype = "bfloat16" if gf.cuda.is_available() and gf.cuda.is_bf16_supported() else "float16"  # nanoGPT's line
    ptdtype = {"float32": gf.float32, "bfloat16": gf.bfloat16, "float16": gf.float16}[dtype]
    assert ptdtype is gf.float16 is gf.half and np.zeros(1, dtype=gf.half).dtype == np.float16
    device = "cuda" if gf.cuda.is_available() else "cpu"
    assert gf.arange(3, device=device).tolist() == [0, 1, 2]


def test_cuda_seeds_are_accepted_and_leave_gradflows_generator_alone():
    gf.manual_seed(5)
    expected = gf.rand(3).numpy()
    gf.manual_seed(5)
    gf.cuda.manual_seed(1337)
    gf.cuda.manual_seed_all(1337)
    assert_array_equal(gf.rand(3).numpy(), expected)
    with pytest.raises(ValueError, match=re.escape("cuda.manual_seed: seed must be a non-negative integer, got 'x'")):
        gf.cuda.manual_seed("x")


@pytest.mark.parametrize("op", ["synchronize", "current_device", "get_device_name"])
def test_what_needs_a_gpu_is_refused(op):
    with pytest.raises(
        RuntimeError, match=re.escape(f"cuda.{op}: gradflow has no GPU (gf.cuda.is_available() is False)")
    ):
        getattr(gf.cuda, op)()


@needs_torch
def test_backend_switches_are_set_as_in_pytorch_and_change_nothing():
    x = gf.randn(4, 4, dtype=gf.float32)
    before = (x @ x).numpy()
    for lib in (gf, torch):
        lib.backends.cuda.matmul.allow_tf32 = True
        lib.backends.cudnn.allow_tf32 = True
        lib.backends.cudnn.benchmark = True
        lib.set_float32_matmul_precision("high")
        assert lib.get_float32_matmul_precision() == "high"
        assert lib.backends.mps.is_available() is False
        lib.set_float32_matmul_precision("highest")
    assert gf.backends.cuda.matmul.allow_tf32 is True
    model = gf.nn.Linear(4, 4)
    assert gf.compile(model) is model and gf.compile(mode="max-autotune")(len) is len and gf.compile(len) is len
    assert_array_equal((x @ x).numpy(), before)
    with pytest.raises(ValueError, match="^set_float32_matmul_precision: precision must be one of .*got 'low'$"):
        gf.set_float32_matmul_precision("low")


# --- float16, bfloat16, mixed precision ----------------------------------------------------------


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize(
    "op, call",
    [
        ("zeros", lambda d: gf.zeros(2, dtype=d)),
        ("tensor", lambda d: gf.tensor([1.0], dtype=d)),
        ("to", lambda d: gf.ones(2).to(d)),
        ("randn", lambda d: gf.randn(2, dtype=d)),
    ],
)
def test_a_tensor_in_a_narrow_float_is_refused_naming_it(name, op, call):
    line = f"{op}: gradflow's tensors hold float32, float64, integers or bool, not {name}"
    with pytest.raises(TypeError, match="^" + re.escape(line) + "$"):
        call(getattr(gf, name))


def test_half_and_bfloat16_methods_are_refused():
    with pytest.raises(
        TypeError, match=re.escape("half: gradflow's tensors hold float32, float64, integers or bool, not float16")
    ):
        gf.ones(2).half()
    with pytest.raises(
        TypeError, match=re.escape("bfloat16: gradflow's tensors hold float32, float64, integers or bool, not bfloat16")
    ):
        gf.ones(2).bfloat16()


@needs_torch
def test_a_disabled_grad_scaler_passes_through_as_pytorchs():
    def step(lib, scaler):
        lib.manual_seed(0)
        w = lib.nn.Parameter(lib.tensor([1.0, -2.0]))
        opt = lib.optim.SGD([w], lr=0.1)
        with lib.autocast(device_type="cpu", enabled=False):
            loss = (w * w).sum()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        scaler.step(opt)
        scaler.update()
        return as_array(w), scaler.get_scale(), scaler.is_enabled(), scaler.state_dict()

    ours = step(gf, gf.amp.GradScaler(enabled=False))
    theirs = step(torch, torch.amp.GradScaler(enabled=False))
    assert_array_equal(ours[0], theirs[0])
    assert ours[1:] == theirs[1:]


def test_an_enabled_scaler_or_cuda_autocast_warns_and_is_off_as_pytorchs_without_cuda():
    with pytest.warns(UserWarning, match="^GradScaler: gradflow's float32 gradients need no scaling; it is off"):
        scaler = gf.cuda.amp.GradScaler(enabled=True)  # nanoGPT's: enabled=(dtype == 'float16')
    with pytest.warns(UserWarning) as warned:
        gf.amp.GradScaler(enabled=True)
    assert warned[0].filename == __file__  # the warning points at the program's line
    loss = gf.tensor(3.0)
    assert scaler.scale(loss) is loss and scaler.get_scale() == 1.0 and not scaler.is_enabled()
    with pytest.warns(UserWarning, match="^autocast: gradflow has no CUDA device; autocast is off"):
        gf.amp.autocast(device_type="cuda", dtype=gf.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with (
            gf.autocast("cpu", dtype=gf.float32),
            gf.autocast("cuda", enabled=False),
            gf.cuda.amp.autocast(enabled=False),
        ):
            assert (gf.ones(2) @ gf.ones(2)).dtype == np.float32
        assert gf.autocast("cpu", enabled=False)(lambda: 7)() == 7


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: gf.autocast(device_type="cpu", dtype=gf.bfloat16), "bfloat16"),  # build-nanogpt's, on the CPU
        (lambda: gf.autocast("cpu"), "bfloat16"),  # PyTorch's CPU default
        (lambda: gf.amp.autocast("cpu", dtype=gf.float16), "float16"),
    ],
)
def test_autocast_on_the_cpu_in_a_narrow_float_warns_and_computes_as_written(make, name):
    model = gf.nn.Linear(3, 2)
    x = gf.randn(4, 3)
    expected = model(x).numpy()
    line = f"autocast: gradflow has no {name}; the region computes as written, in float32 or float64"
    with pytest.warns(UserWarning, match="^" + re.escape(line) + "$") as warned, make():
        y = model(x)
    assert warned[0].filename == __file__ and y.dtype == np.float32
    assert_array_equal(y.numpy(), expected)


@pytest.mark.parametrize(
    "call, line",
    [
        (lambda: gf.autocast("mps"), "autocast: gradflow runs on numpy on the CPU; there is no device 'mps'"),
        (lambda: gf.amp.GradScaler("mps"), "GradScaler: gradflow runs on numpy on the CPU; there is no device 'mps'"),
    ],
)
def test_mixed_precision_on_another_device_is_refused(call, line):
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        call()


# --- generators ---------------------------------------------------------------------------------


def test_a_generator_of_ones_own_draws_the_same_whatever_else_is_drawn():
    def draws(g):
        return [
            gf.randn(3, generator=g).numpy(),
            gf.rand(2, generator=g).numpy(),
            gf.randint(0, 10, (4,), generator=g).numpy(),
            gf.randperm(5, generator=g).numpy(),
            gf.multinomial(gf.tensor([0.2, 0.8]), 3, replacement=True, generator=g).numpy(),
        ]

    g = gf.Generator().manual_seed(2147483647)  # makemore's lectures' idiom
    first = draws(g)
    gf.manual_seed(0)
    gf.randn(10)  # draws from gradflow's generator do not move g's stream
    assert g.initial_seed() == 2147483647
    again = draws(g.manual_seed(2147483647))
    for a, b in zip(first, again):
        assert_array_equal(a, b)
    state = g.get_state()
    after = gf.randn(2, generator=g).numpy()
    assert_array_equal(gf.randn(2, generator=g.set_state(state)).numpy(), after)
    assert_array_equal(gf.randn(2, generator=gf.Generator()).numpy(), gf.randn(2, generator=gf.Generator()).numpy())
    with pytest.raises(TypeError, match=re.escape("generator= takes a gf.Generator, got int")):
        gf.randn(2, generator=3)


# --- torch.utils.data ---------------------------------------------------------------------------

X = np.arange(26.0).reshape(13, 2)
Y = np.arange(13)


def batches(loader):
    return [[as_array(t) for t in batch] for batch in loader]


@needs_torch
@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (4, False), (4, True), (13, False), (20, True)])
def test_dataloader_batches_as_pytorchs_in_order(batch_size, drop_last):
    ours = DataLoader(TensorDataset(gf.tensor(X), gf.tensor(Y)), batch_size=batch_size, drop_last=drop_last)
    data = torch.utils.data
    theirs = data.DataLoader(
        data.TensorDataset(torch.tensor(X), torch.tensor(Y)), batch_size=batch_size, drop_last=drop_last
    )
    assert len(ours) == len(theirs)
    got, expected = batches(ours), batches(theirs)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert len(a) == len(b) == 2 and all(np.array_equal(p, q) and p.dtype == q.dtype for p, q in zip(a, b))


def test_shuffled_batches_hold_every_example_once_and_repeat_under_a_seed():
    loader = DataLoader(TensorDataset(gf.tensor(X), gf.tensor(Y)), batch_size=4, shuffle=True)
    gf.manual_seed(7)
    first = batches(loader)
    second = batches(loader)
    gf.manual_seed(7)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(first, batches(loader)))
    for epoch in (first, second):
        assert [len(b[1]) for b in epoch] == [4, 4, 4, 1]
        assert sorted(np.concatenate([b[1] for b in epoch]).tolist()) == list(range(13))
        assert all(np.array_equal(x, X[y]) for x, y in epoch[0:1])
    assert any(not np.array_equal(a[1], b[1]) for a, b in zip(first, second))  # a fresh order each pass
    g = gf.Generator().manual_seed(1)
    with_g = batches(DataLoader(TensorDataset(gf.tensor(Y)), batch_size=13, shuffle=True, generator=g))
    expected = gf.Generator().manual_seed(1)
    expected.words64(1)  # the pass's worker seed, drawn first, as PyTorch's DataLoader draws it
    assert_array_equal(with_g[0][0], gf.randperm(13, generator=expected).numpy())


def test_makemores_endless_loader():
    """A RandomSampler with replacement and ten billion samples is drawn lazily, num_workers=4 accepted."""

    class Words(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return gf.full((3,), i, dtype=gf.long), gf.tensor(float(i))

    sampler = RandomSampler(Words(), replacement=True, num_samples=int(1e10))
    loader = DataLoader(Words(), sampler=sampler, batch_size=8, pin_memory=True, num_workers=4)
    it = iter(loader)
    x, y = next(it)
    assert x.shape == (8, 3) and x.dtype == np.int64 and y.shape == (8,) and y.dtype == np.float32
    assert_array_equal(x.numpy()[:, 0], y.numpy()) and set(y.tolist()) <= set(range(5))
    assert len(sampler) == int(1e10) and len(loader) == int(1e10) // 8


@needs_torch
def test_default_collate_as_pytorchs():
    examples = [(np.ones(2) * i, float(i), i, True, {"k": i}) for i in range(3)]
    ours, theirs = default_collate(examples), torch.utils.data.default_collate(examples)
    assert len(ours) == len(theirs)
    for a, b in zip(ours[:4], theirs[:4]):
        assert_array_equal(as_array(a), as_array(b))
        assert str(a.dtype) == str(b.dtype)
    assert_array_equal(ours[4]["k"].numpy(), theirs[4]["k"].numpy())


@needs_torch
def test_an_iterable_dataset_is_batched_in_the_order_it_yields_as_pytorchs():
    def stream(lib, base):
        class Tokens(base):
            def __iter__(self):
                for i in range(7):
                    yield lib.tensor([i, i + 1]), i

        return Tokens()

    ours = batches(DataLoader(stream(gf, gf.utils.data.IterableDataset), batch_size=3))
    theirs = batches(torch.utils.data.DataLoader(stream(torch, torch.utils.data.IterableDataset), batch_size=3))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert all(np.array_equal(p, q) for p, q in zip(a, b))
    with pytest.raises(ValueError, match="^DataLoader: an IterableDataset sets its own order: leave out shuffle"):
        DataLoader(stream(gf, gf.utils.data.IterableDataset), shuffle=True)


def test_samplers_and_split():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]
    assert list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=True)) == [[0, 1], [2, 3]]
    assert sorted(RandomSampler(range(6))) == list(range(6))
    assert sorted(np.bincount(list(RandomSampler(range(3), num_samples=7)))) == [2, 2, 3]  # whole passes first
    a, b = random_split(range(10), [7, 3], generator=gf.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3 and sorted(list(a) + list(b)) == list(range(10))
    assert [len(s) for s in random_split(range(10), [0.5, 0.25, 0.25])] == [6, 2, 2]  # as PyTorch's
    loose = list(DataLoader(TensorDataset(gf.tensor(Y)), batch_size=None))
    assert loose[3][0].item() == 3


@pytest.mark.parametrize(
    "call, error, line",
    [
        (
            lambda: DataLoader(range(3), num_workers=-1),
            ValueError,
            "DataLoader: num_workers must be a non-negative integer, got -1",
        ),
        (
            lambda: DataLoader(range(3), shuffle=True, sampler=SequentialSampler(range(3))),
            ValueError,
            "DataLoader: give shuffle=True or a sampler, not both (the sampler sets the order)",
        ),
        (
            lambda: TensorDataset(gf.zeros(2), gf.zeros(3)),
            ValueError,
            "TensorDataset: the tensors must have the same number of rows, got [2, 3]",
        ),
        (
            lambda: random_split(range(4), [1, 2]),
            ValueError,
            "random_split: lengths [1, 2] do not add up to the dataset's 4 examples",
        ),
        (lambda: default_collate([object()]), TypeError, "default_collate: cannot batch examples of type object"),
        (lambda: Dataset()[0], NotImplementedError, "Dataset: a Dataset defines __getitem__(index)"),
    ],
)
def test_data_refusals(call, error, line):
    with pytest.raises(error, match="^" + re.escape(line) + "$"):
        call()


# --- the modules a multi-GPU program imports at its top ------------------------------------------


MPI_RUN = "`gradflow train --processes N` (docs/mpi.md)"


def test_distributed_and_ddp_import_and_refuse_in_one_line():
    from gradflow.distributed import destroy_process_group, init_process_group
    from gradflow.nn.parallel import DistributedDataParallel as DDP

    assert not gf.distributed.is_available() and not gf.distributed.is_initialized()
    for op, call in [
        ("init_process_group", lambda: init_process_group(backend="nccl")),
        ("destroy_process_group", destroy_process_group),
        ("DistributedDataParallel", lambda: DDP(gf.nn.Linear(2, 2), device_ids=[0])),
    ]:
        line = f"{op}: gradflow has no process groups; its data parallelism is MPI's, run by " + MPI_RUN
        with pytest.raises(RuntimeError, match="^" + re.escape(line) + "$"):
            call()


def test_summary_writer_appends_scalars_as_json_lines(tmp_path):
    from gradflow.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=tmp_path / "run")
    writer.add_scalar("Loss/train", gf.tensor(2.5), 10)
    writer.add_scalars("Loss", {"test": 3.0}, global_step=11)
    writer.flush()
    records = [json.loads(line) for line in (tmp_path / "run" / "scalars.jsonl").read_text().splitlines()]
    assert [(r["tag"], r["value"], r["step"]) for r in records] == [("Loss/train", 2.5, 10), ("Loss/test", 3.0, 11)]
    with pytest.raises(
        AttributeError, match=re.escape("SummaryWriter.add_image: gradflow's writer records scalars only")
    ):
        writer.add_image("x", None)
    writer.close()


def test_import_gradflow_as_torch_reaches_the_submodules_pytorch_has():
    import gradflow as torch_
    from gradflow.utils.data.dataloader import DataLoader as from_its_module  # makemore's import line

    assert torch_.utils.data.DataLoader is DataLoader is from_its_module and torch_.nn.utils.clip_grad_norm_ is not None
    assert torch_.cuda.amp.GradScaler is not None and torch_.amp.autocast is torch_.autocast


# --- torch.save and torch.load as checkpoints call them ----------------------------------------------


def checkpoint_round_trip(lib, path, **load_args):
    model = lib.nn.Linear(2, 3)
    lib.save({"model": model.state_dict(), "iter_num": 4, "best_val_loss": lib.tensor(1.5)}, path)
    loaded = lib.load(path, **load_args)
    return loaded["iter_num"], float(loaded["best_val_loss"]), sorted(loaded["model"]), loaded["model"]["weight"].shape


LOAD_ARGS = [
    {"map_location": "cpu"},
    {"map_location": "cpu", "weights_only": True},
    {"map_location": "cpu", "weights_only": False},
    {"map_location": "device"},
    {"map_location": {"cuda:0": "cpu"}},
    {"map_location": lambda storage, location: storage},
]


@needs_torch
@pytest.mark.parametrize(
    "load_args", LOAD_ARGS, ids=lambda args: str({k: "fn" if callable(v) else v for k, v in args.items()})
)
def test_load_takes_map_location_and_weights_only_as_pytorch(tmp_path, load_args):
    results = []
    for lib in (gf, torch):
        args = {k: lib.device("cpu") if v == "device" else v for k, v in load_args.items()}
        iter_num, loss, names, shape = checkpoint_round_trip(lib, tmp_path / f"ckpt_{lib.__name__}.pt", **args)
        results.append((iter_num, loss, names, tuple(shape)))
    assert results[0] == results[1]


@pytest.mark.parametrize("where", ["cuda", "cuda:1", {"cpu": "mps"}])
def test_load_refuses_to_map_to_another_device(tmp_path, where):
    gf.save({"w": gf.ones(2)}, tmp_path / "w.pt")
    name = where["cpu"] if isinstance(where, dict) else where
    line = f"load: gradflow runs on numpy on the CPU; there is no device {name!r}"
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        gf.load(tmp_path / "w.pt", map_location=where)


# --- activations, normalization and initialisers that learners' programs name --------------------------

NN_CALLS = [
    "F.leaky_relu(x)",
    "F.leaky_relu(x, 0.2)",
    "F.leaky_relu(x, negative_slope=0.1)",
    "lib.nn.LeakyReLU()(x)",
    "lib.nn.LeakyReLU(0.3, inplace=False)(x)",
    "F.normalize(x)",
    "F.normalize(x, dim=-1)",
    "F.normalize(x, p=1.0, dim=0)",
    "F.normalize(x * 0, dim=1)",
]


@needs_torch
@pytest.mark.parametrize("call", NN_CALLS)
def test_activations_and_normalize_beside_pytorch(call):
    rng = np.random.default_rng(0)
    a, u = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    results = []
    for lib in (gf, torch):
        x = lib.tensor(a, requires_grad=True)
        y = eval(call, {"lib": lib, "F": lib.nn.functional, "x": x})
        y.backward(lib.tensor(u))
        results.append((as_array(y), as_array(x.grad)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "fn", [lambda x: F_.leaky_relu(x, 0.2), lambda x: F_.normalize(x, dim=-1)], ids=["leaky_relu", "normalize"]
)
def test_activations_and_normalize_gradcheck(float64, fn):
    x = gf.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    assert gf.gradcheck(fn, x)


def test_constant_and_trunc_normal_fill_in_place():
    w = gf.nn.Parameter(gf.zeros(200, 50))
    assert gf.nn.init.constant_(w, 0.5) is w and (np.asarray(w.data) == 0.5).all()
    gf.manual_seed(0)
    gf.nn.init.trunc_normal_(w, std=0.02)  # bounds -2 and 2, far beyond 0.02: a plain N(0, 0.02^2)
    assert abs(float(np.asarray(w.data).std()) - 0.02) < 1e-3
    gf.nn.init.trunc_normal_(w, mean=1.0, std=1.0, a=0.5, b=1.5)
    values = np.asarray(w.data)
    assert values.min() >= 0.5 and values.max() <= 1.5 and abs(values.mean() - 1.0) < 0.02


@needs_torch
def test_trunc_normal_keeps_pytorchs_bounds():
    for lib in (gf, torch):
        w = lib.nn.Parameter(lib.zeros(1000))
        lib.nn.init.trunc_normal_(w, mean=0.0, std=1.0, a=-0.5, b=0.25)
        values = as_array(w)
        assert values.min() >= -0.5 and values.max() <= 0.25 and values.dtype == np.float32


def test_trunc_normal_refuses_an_interval_without_mass():
    line = "trunc_normal_: [a, b] = [5.0, 6.0] holds 2.9e-07 of N(0.0, 1.0^2); it needs 1e-4"
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        gf.nn.init.trunc_normal_(gf.nn.Parameter(gf.zeros(3)), a=5.0, b=6.0)


# --- recurrent layers: RNN, GRU, LSTM with PyTorch's weights and gate order --------------------------

RECURRENT = [
    ("RNN", {}),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    ("RNN", {"bias": False, "batch_first": True}),
    ("GRU", {}),
    ("GRU", {"num_layers": 2, "batch_first": True}),
    ("LSTM", {}),
    ("LSTM", {"num_layers": 2, "batch_first": True, "bias": False}),
]


def recurrent_state(kind, lib, rng, layers, batch):
    shape = (layers, 4) if batch is None else (layers, batch, 4)
    make = [lib.tensor(rng.standard_normal(shape), requires_grad=True) for _ in range(2 if kind == "LSTM" else 1)]
    return (tuple(make) if kind == "LSTM" else make[0]), make


@needs_torch
@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zero state", "given state"])
@pytest.mark.parametrize("kind, options", RECURRENT, ids=[f"{k}{o}" for k, o in RECURRENT])
def test_recurrent_layers_beside_pytorch(float64, kind, options, with_state, unbatched):
    reference = getattr(torch.nn, kind)(3, 4, dtype=torch.float64, **options)
    layer = getattr(gf.nn, kind)(3, 4, **options)
    assert [n for n, _ in layer.named_parameters()] == [n for n, _ in reference.named_parameters()]
    layer.load_state_dict({k: v.detach().numpy() for k, v in reference.state_dict().items()})
    batch = None if unbatched else 2
    shape = (5, 3) if unbatched else ((2, 5, 3) if options.get("batch_first") else (5, 2, 3))
    results = []
    for lib, module in ((gf, layer), (torch, reference)):
        rng = np.random.default_rng(0)
        x = lib.tensor(rng.standard_normal(shape), requires_grad=True)
        state, leaves = recurrent_state(kind, lib, rng, options.get("num_layers", 1), batch)
        out, final = module(x, state) if with_state else module(x)
        finals = final if kind == "LSTM" else (final,)
        (out.sum() + sum((f * f).sum() for f in finals)).backward()
        weights = [as_array(p.grad) for p in module.parameters()]
        grads = [as_array(x.grad)] + ([as_array(t.grad) for t in leaves] if with_state else [])
        results.append(([as_array(out)] + [as_array(f) for f in finals], grads + weights))
    for ours, theirs in zip(*results):
        for a, b in zip(ours, theirs):
            assert a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_recurrent_layers_gradcheck(float64, kind):
    layer = getattr(gf.nn, kind)(2, 3, num_layers=2)
    x = gf.tensor(np.random.default_rng(3).standard_normal((4, 2, 2)), requires_grad=True)
    assert gf.gradcheck(lambda x: layer(x)[0], x)


@pytest.mark.parametrize(
    "call, line",
    [
        (
            lambda: gf.nn.LSTM(3, 4, bidirectional=True),
            "LSTM: bidirectional=True is not supported; run a second LSTM on the reversed sequence",
        ),
        (lambda: gf.nn.RNN(3, 4, nonlinearity="gelu"), "RNN: nonlinearity must be 'tanh' or 'relu', got 'gelu'"),
        (lambda: gf.nn.GRU(3, 4, dropout=1.0), "GRU: dropout must be in [0, 1), got 1.0"),
        (
            lambda: gf.nn.GRU(3, 4)(gf.zeros(5, 2, 6)),
            "GRU: input must be (seq, batch, 3), (batch, seq, 3) with batch_first, or (seq, 3); got shape (5, 2, 6)",
        ),
        (
            lambda: gf.nn.RNN(3, 4)(gf.zeros(5, 2, 3), gf.zeros(2, 2, 4)),
            "RNN: hx must have shape (1, 2, 4), got (2, 2, 4)",
        ),
        (
            lambda: gf.nn.LSTM(3, 4)(gf.zeros(5, 2, 3), (gf.zeros(1, 2, 4), gf.zeros(1, 3, 4))),
            "LSTM: c_0 must have shape (1, 2, 4), got (1, 3, 4)",
        ),
    ],
)
def test_recurrent_refusals(call, line):
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        call()


# --- label smoothing and the KL divergence ---------------------------------------------------------------

LOSS_CALLS = [
    "F.cross_entropy(z, t, label_smoothing=0.1)",
    "F.cross_entropy(z, t, label_smoothing=0.2, reduction='sum')",
    "F.cross_entropy(z, t, label_smoothing=0.3, reduction='none')",
    "F.cross_entropy(z, t_ignored, label_smoothing=0.1, ignore_index=-1)",
    "F.cross_entropy(z, t_ignored, label_smoothing=0.1, ignore_index=-1, reduction='none')",
    "F.cross_entropy(z3, t3, label_smoothing=0.1)",
    "lib.nn.CrossEntropyLoss(label_smoothing=0.1)(z, t)",
    "F.kl_div(F.log_softmax(z, dim=1), p, reduction='batchmean')",
    "F.kl_div(F.log_softmax(z, dim=1), p)",
    "F.kl_div(F.log_softmax(z, dim=1), p, reduction='sum')",
    "F.kl_div(F.log_softmax(z, dim=1), p, reduction='none')",
    "F.kl_div(F.log_softmax(z, dim=1), p.log(), reduction='batchmean', log_target=True)",
    "lib.nn.KLDivLoss(reduction='batchmean')(F.log_softmax(z, dim=1), p_sparse)",
]


@needs_torch
@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides")  # PyTorch's advice to use batchmean
@pytest.mark.parametrize("call", LOSS_CALLS)
def test_label_smoothing_and_kl_div_beside_pytorch(call):
    rng = np.random.default_rng(0)
    arrays = {"z": rng.standard_normal((4, 5)), "z3": rng.standard_normal((2, 5, 3))}
    probs = np.exp(arrays["z"][::-1]) / np.exp(arrays["z"][::-1]).sum(1, keepdims=True)
    sparse = np.where(probs > 0.2, probs, 0.0)  # zeros, which count for nothing
    ids = {"t": [1, 0, 4, 2], "t_ignored": [1, -1, 4, -1], "t3": [[0, 1, 2], [4, 4, 0]]}
    results = []
    for lib in (gf, torch):
        leaves = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
        names = dict(leaves, p=lib.tensor(probs), p_sparse=lib.tensor(sparse))
        names |= {k: lib.tensor(v) for k, v in ids.items()}
        y = eval(call, {"lib": lib, "F": lib.nn.functional, **names})
        y.sum().backward()
        results.append([as_array(y)] + [as_array(t.grad) for t in leaves.values() if t.grad is not None])
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_label_smoothing_and_kl_div_refusals():
    z, t = gf.zeros(2, 3), gf.tensor([0, 1])
    with pytest.raises(ValueError, match=re.escape("cross_entropy: label_smoothing must be in [0, 1], got 1.5")):
        gf.nn.functional.cross_entropy(z, t, label_smoothing=1.5)
    line = 'kl_div: reduction must be "batchmean", "mean", "sum" or "none", got \'avg\''
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        gf.nn.functional.kl_div(z, z, reduction="avg")


def test_label_smoothing_and_kl_div_gradcheck(float64):
    rng = np.random.default_rng(4)
    z = gf.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    p = gf.tensor(np.array([[0.5, 0.5, 0.0, 0.0], [0.1, 0.2, 0.3, 0.4], [0.0, 0.0, 0.0, 1.0]]))
    assert gf.gradcheck(lambda z: F_.cross_entropy(z, gf.tensor([1, -100, 3]), label_smoothing=0.2), z)
    assert gf.gradcheck(lambda z: F_.kl_div(F_.log_softmax(z, dim=1), p, reduction="batchmean"), z)


@needs_torch
@pytest.mark.parametrize("target", ["bytes in memory", "an open file"])
def test_save_and_load_through_file_objects_as_pytorch(tmp_path, target):
    import io

    results = []
    for lib in (gf, torch):
        state = {"model": lib.nn.Linear(2, 3).state_dict(), "step": 7}
        if target == "an open file":
            with open(tmp_path / f"{lib.__name__}.pt", "wb") as f:
                lib.save(state, f)
            with open(tmp_path / f"{lib.__name__}.pt", "rb") as f:
                loaded = lib.load(f, map_location="cpu", weights_only=True)
        else:
            buffer = io.BytesIO()
            lib.save(state, buffer)
            buffer.seek(0)
            loaded = lib.load(buffer, weights_only=True)
        results.append((loaded["step"], sorted(loaded["model"]), tuple(loaded["model"]["weight"].shape)))
    assert results[0] == results[1]


def test_a_whole_model_saves_and_loads_as_pytorchs_does(tmp_path):
    """torch.save pickles a model; torch.load refuses it by default, naming its class, and loads it when
    the class is allowed or weights_only=False is asked for (tests/test_save_load.py: the rules in full)."""
    model = gf.nn.Linear(2, 2)
    gf.save({"model": model}, tmp_path / "model.pt")
    with pytest.raises(pickle.UnpicklingError, match=r"holds the global gradflow\.nn\.layers\.Linear, "):
        gf.load(tmp_path / "model.pt")
    with gf.serialization.safe_globals([gf.nn.modules.linear.Linear]):
        loaded = gf.load(tmp_path / "model.pt")["model"]
    assert type(loaded) is gf.nn.Linear and np.array_equal(loaded.weight.data, model.weight.data)
    assert type(gf.load(tmp_path / "model.pt", weights_only=False)["model"]) is gf.nn.Linear


# --- BatchNorm1d ---------------------------------------------------------------------------------------

BATCHNORM = [((6, 4), {}), ((5, 4, 3), {}), ((6, 4), {"momentum": None}), ((6, 4), {"affine": False})]
BATCHNORM += [((6, 4), {"track_running_stats": False}), ((6, 4), {"eps": 1e-3, "momentum": 0.3})]


@needs_torch
@pytest.mark.parametrize("shape, options", BATCHNORM, ids=[f"{s}{o}" for s, o in BATCHNORM])
def test_batchnorm1d_beside_pytorch(float64, shape, options):
    """Three training steps (outputs, input gradients, running statistics), then eval, from the same state."""
    reference = torch.nn.BatchNorm1d(4, dtype=torch.float64, **options)
    layer = gf.nn.BatchNorm1d(4, **options)
    rng = np.random.default_rng(0)
    start = {k: v.numpy() + (0.1 * rng.standard_normal(v.shape) if v.is_floating_point() else 0)
             for k, v in reference.state_dict().items()}  # fmt: skip
    reference.load_state_dict({k: torch.tensor(v) for k, v in start.items()})
    layer.load_state_dict(start)
    assert list(layer.state_dict()) == list(reference.state_dict())
    for step in [*range(3), "eval"]:
        if step == "eval":
            layer.eval(), reference.eval()
        a, u = 2 * rng.standard_normal(shape) + 1, rng.standard_normal(shape)
        results = []
        for lib, module in ((gf, layer), (torch, reference)):
            x = lib.tensor(a, requires_grad=True)
            y = module(x)
            y.backward(lib.tensor(u))
            state = [v if isinstance(v, np.ndarray) else v.numpy() for v in module.state_dict().values()]
            results.append([as_array(y), as_array(x.grad), *state])
        for ours, theirs in zip(*results, strict=True):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14, err_msg=f"step {step}")


def test_batchnorm1d_gradcheck(float64):
    layer = gf.nn.BatchNorm1d(3)
    x = gf.tensor(np.random.default_rng(5).standard_normal((4, 3, 2)), requires_grad=True)
    assert gf.gradcheck(lambda x: layer(x), x)


@pytest.mark.parametrize(
    "shape, line",
    [
        ((4, 5), "BatchNorm1d(3): input must be (N, C) or (N, C, L), got (4, 5)"),
        ((1, 3), "BatchNorm1d: a batch of one value per channel has no variance, got (1, 3)"),
    ],
)
def test_batchnorm1d_refusals(shape, line):
    with pytest.raises(ValueError, match="^" + re.escape(line) + "$"):
        gf.nn.BatchNorm1d(3)(gf.zeros(*shape))


# --- PyTorch's MultiheadAttention and TransformerEncoder ----------------------------------------------

MHA = [
    ({}, {}),
    ({"batch_first": True}, {}),
    ({}, {"average_attn_weights": False}),
    ({}, {"attn_mask": "bool"}),
    ({}, {"attn_mask": "float"}),
    ({}, {"attn_mask": "per head"}),
    ({}, {"key_padding_mask": "bool"}),
    ({"bias": False}, {"need_weights": False}),
    ({"unbatched": True}, {"key_padding_mask": "bool"}),
]


@needs_torch
@pytest.mark.parametrize("options, call", MHA, ids=[f"{o}{c}" for o, c in MHA])
def test_multihead_attention_beside_pytorch(float64, options, call):
    options = dict(options)
    unbatched = options.pop("unbatched", False)
    E, H, L, S, N = 8, 2, 4, 5, 3
    reference = torch.nn.MultiheadAttention(E, H, dtype=torch.float64, **options)
    layer = gf.nn.MultiheadAttention(E, H, **options)
    assert list(layer.state_dict()) == list(reference.state_dict())
    layer.load_state_dict({k: v.detach().numpy() for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(0)

    def shape(T):
        return (T, E) if unbatched else ((N, T, E) if options.get("batch_first") else (T, N, E))

    a, b = rng.standard_normal(shape(L)), rng.standard_normal(shape(S))
    masks = {"bool": rng.random((L, S)) < 0.3, "float": rng.standard_normal((L, S))}
    masks["per head"] = rng.standard_normal((N * H, L, S))
    padding = rng.random((S,) if unbatched else (N, S)) < 0.3
    results = []
    for lib, module in ((gf, layer), (torch, reference)):
        q, kv = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        args = dict(call)
        if "attn_mask" in args:
            args["attn_mask"] = lib.tensor(masks[args["attn_mask"]])
        if "key_padding_mask" in args:
            args["key_padding_mask"] = lib.tensor(padding)
        out, weights = module(q, kv, kv, **args)
        (out.sum() + (0 if weights is None else (weights * weights).sum())).backward()
        kept = [out] + ([] if weights is None else [weights])
        results.append([as_array(t) for t in kept] + [as_array(q.grad), as_array(kv.grad)])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


ENCODER = [{}, {"norm_first": True}, {"activation": "gelu", "batch_first": True}, {"bias": False}]


@needs_torch
@pytest.mark.parametrize("masks", ["causal mask", "is_causal", "padding"])
@pytest.mark.parametrize("options", ENCODER, ids=str)
def test_transformer_encoder_beside_pytorch(float64, options, masks):
    reference_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, dtype=torch.float64, **options)
    reference = torch.nn.TransformerEncoder(
        reference_layer, 2, norm=torch.nn.LayerNorm(8, dtype=torch.float64), enable_nested_tensor=False
    )
    encoder = gf.nn.TransformerEncoder(gf.nn.TransformerEncoderLayer(8, 2, 16, 0.0, **options), 2, gf.nn.LayerNorm(8))
    assert list(encoder.state_dict()) == list(reference.state_dict())
    encoder.load_state_dict({k: v.detach().numpy() for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 5, 8))
    T = 5 if options.get("batch_first") else 3
    causal = np.triu(np.full((T, T), -np.inf), 1)
    padding = np.zeros((3, 5) if options.get("batch_first") else (5, 3), dtype=bool)
    padding[:, -1] = True
    results = []
    for lib, module in ((gf, encoder), (torch, reference)):
        x = lib.tensor(a, requires_grad=True)
        if masks == "padding":
            y = module(x, src_key_padding_mask=lib.tensor(padding))
        else:
            y = module(x, mask=lib.tensor(causal), is_causal=masks == "is_causal")
        y.sum().backward()
        results.append([as_array(y), as_array(x.grad)])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("masks", ["causal target", "padding"])
@pytest.mark.parametrize("options", ENCODER, ids=str)
def test_the_whole_transformer_beside_pytorch(float64, options, masks):
    """nn.Transformer (encoder and decoder stacks, each with its final LayerNorm) from PyTorch's weights: the
    output and the gradients of the source and the target, with a causal target mask or padding."""
    torch.manual_seed(0)
    reference = torch.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, dtype=torch.float64, **options)
    model = gf.nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, **options)
    assert list(model.state_dict()) == list(reference.state_dict())
    model.load_state_dict({k: v.detach().numpy() for k, v in reference.state_dict().items()})
    rng = np.random.default_rng(2)
    first = options.get("batch_first")
    src, tgt = (
        rng.standard_normal((3, 5, 8) if first else (5, 3, 8)),
        rng.standard_normal((3, 4, 8) if first else (4, 3, 8)),
    )
    padding = np.zeros((3, 5), dtype=bool)
    padding[:, -1] = True
    results = []
    for lib, module in ((gf, model), (torch, reference)):
        s, t = lib.tensor(src, requires_grad=True), lib.tensor(tgt, requires_grad=True)
        if masks == "padding":
            y = module(s, t, src_key_padding_mask=lib.tensor(padding), memory_key_padding_mask=lib.tensor(padding))
        else:
            y = module(s, t, tgt_mask=lib.nn.Transformer.generate_square_subsequent_mask(4, dtype=lib.float64))
        (y * y).sum().backward()
        results.append([as_array(y), as_array(s.grad), as_array(t.grad)])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_the_transformers_mask_and_decoder_gradcheck(float64):
    """generate_square_subsequent_mask is PyTorch's (-inf above the diagonal, float32); a decoder layer
    gradchecks in its target and its memory."""
    mask = gf.nn.Transformer.generate_square_subsequent_mask(3)
    assert mask.dtype == np.float32 and mask.tolist() == [[0.0, -np.inf, -np.inf], [0.0, 0.0, -np.inf], [0.0] * 3]
    decoder = gf.nn.TransformerDecoder(gf.nn.TransformerDecoderLayer(4, 2, 8, dropout=0.0), 2, gf.nn.LayerNorm(4))
    rng = np.random.default_rng(7)
    tgt, memory = (gf.tensor(rng.standard_normal(s), requires_grad=True) for s in ((3, 2, 4), (5, 2, 4)))
    causal = gf.nn.Transformer.generate_square_subsequent_mask(3, dtype=np.float64)
    assert gf.gradcheck(lambda t, m: decoder(t, m, tgt_mask=causal), tgt, memory)


def test_transformer_encoder_gradcheck_and_copies(float64):
    layer = gf.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0)
    encoder = gf.nn.TransformerEncoder(layer, 2)
    assert encoder.layers[0].linear1.weight is not layer.linear1.weight  # copies, each learning its own
    np.testing.assert_array_equal(
        np.asarray(encoder.layers[1].linear1.weight.data), np.asarray(layer.linear1.weight.data)
    )
    x = gf.tensor(np.random.default_rng(6).standard_normal((3, 2, 4)), requires_grad=True)
    assert gf.gradcheck(lambda x: encoder(x), x)


@pytest.mark.parametrize(
    "call, error, line",
    [
        (
            lambda: gf.nn.MultiheadAttention(6, 4),
            ValueError,
            "MultiheadAttention: embed_dim 6 is not divisible by num_heads 4",
        ),
        (
            lambda: gf.nn.TransformerEncoderLayer(4, 2, activation="tanh"),
            ValueError,
            "TransformerEncoderLayer: activation must be 'relu', 'gelu' or a function, got 'tanh'",
        ),
        (
            lambda: gf.nn.MultiheadAttention(4, 2)(
                gf.zeros(3, 1, 4), gf.zeros(3, 1, 4), gf.zeros(3, 1, 4), attn_mask=gf.zeros(3, 3, dtype=gf.int64)
            ),
            TypeError,
            "MultiheadAttention: attn_mask must be boolean (True = not allowed) or floating-point (added), got int64",
        ),
        (
            lambda: gf.nn.MultiheadAttention(4, 2)(gf.zeros(3, 1, 5), gf.zeros(3, 1, 5), gf.zeros(3, 1, 5)),
            ValueError,
            "MultiheadAttention: the query's last size is 5, expected embed_dim 4",
        ),
    ],
)
def test_encoder_refusals(call, error, line):
    with pytest.raises(error, match="^" + re.escape(line) + "$"):
        call()


@dataclass
class SavedConfig:
    block_size: int = 16
    n_layer: int = 2
    bias: bool = True


@needs_torch
def test_a_saved_dataclass_loads_with_its_fields_as_attributes(tmp_path):
    """build-nanogpt saves its GPTConfig in the checkpoint; PyTorch pickles it (and loads it back only with
    weights_only=False), gradflow stores its fields and gives them back as attributes."""
    loaded = []
    for lib in (gf, torch):
        lib.save({"config": SavedConfig(n_layer=3), "step": 5}, tmp_path / f"{lib.__name__}.pt")
        loaded.append(lib.load(tmp_path / f"{lib.__name__}.pt", weights_only=False))
    for name in ("block_size", "n_layer", "bias"):
        assert getattr(loaded[0]["config"], name) == getattr(loaded[1]["config"], name)
    assert loaded[0]["step"] == loaded[1]["step"] == 5


# --- binary cross-entropy ------------------------------------------------------------------------------

BCE_CALLS = [
    "F.binary_cross_entropy(lib.sigmoid(z), y)",
    "F.binary_cross_entropy(lib.sigmoid(z), y, reduction='sum')",
    "F.binary_cross_entropy(lib.sigmoid(z), y, weight=w, reduction='none')",
    "lib.nn.BCELoss()(lib.sigmoid(z), y)",
    "F.binary_cross_entropy_with_logits(z, y)",
    "F.binary_cross_entropy_with_logits(big, y, reduction='none')",
    "F.binary_cross_entropy_with_logits(z, y, pos_weight=pw)",
    "F.binary_cross_entropy_with_logits(z, y, weight=w, pos_weight=pw, reduction='sum')",
    "lib.nn.BCEWithLogitsLoss(pos_weight=pw)(z, y)",
]


@needs_torch
@pytest.mark.parametrize("call", BCE_CALLS)
def test_binary_cross_entropy_beside_pytorch(call):
    rng = np.random.default_rng(0)
    arrays = {"z": rng.standard_normal((4, 3)), "big": 60 * rng.standard_normal((4, 3))}
    constants = {"y": rng.random((4, 3)), "w": rng.random((4, 3)), "pw": np.array([0.5, 2.0, 3.0])}
    results = []
    for lib in (gf, torch):
        leaves = {k: lib.tensor(v, requires_grad=True) for k, v in arrays.items()}
        names = dict(leaves, **{k: lib.tensor(v) for k, v in constants.items()})
        y = eval(call, {"lib": lib, "F": lib.nn.functional, **names})
        y.sum().backward()
        results.append([as_array(y)] + [as_array(t.grad) for t in leaves.values() if t.grad is not None])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log")  # numpy, before the clamp
def test_binary_cross_entropy_gradcheck_and_its_bounds(float64):
    rng = np.random.default_rng(7)
    z = gf.tensor(rng.standard_normal((3, 2)), requires_grad=True)
    y = gf.tensor(rng.random((3, 2)))
    assert gf.gradcheck(lambda z: F_.binary_cross_entropy_with_logits(z, y, pos_weight=gf.tensor([2.0, 0.5])), z)
    assert gf.gradcheck(lambda z: F_.binary_cross_entropy(z.sigmoid(), y), z)
    certain = F_.binary_cross_entropy(gf.tensor([0.0, 1.0]), gf.tensor([1.0, 0.0]), reduction="none")
    np.testing.assert_array_equal(np.asarray(certain.detach()), [100.0, 100.0])  # the logs stop at -100


# --- more activations ------------------------------------------------------------------------------------

ACTIVATION_CALLS = [
    "F.softplus(x)",
    "F.softplus(x * 30, beta=2.0, threshold=10.0)",
    "F.logsigmoid(x * 50)",
    "F.elu(x)",
    "F.elu(x, alpha=0.5)",
    "F.mish(x)",
    "F.hardtanh(x * 2)",
    "F.hardtanh(x * 2, -0.5, 0.5)",
    "F.relu6(x * 5)",
    "F.glu(x)",
    "F.glu(x, dim=0)",
    "lib.nn.Softplus(beta=0.5)(x)",
    "lib.nn.LogSigmoid()(x)",
    "lib.nn.ELU(alpha=2.0)(x)",
    "lib.nn.Mish()(x)",
    "lib.nn.Hardtanh(-2.0, 2.0)(x * 3)",
    "lib.nn.ReLU6()(x * 5)",
    "lib.nn.GLU(dim=0)(x)",
]


@needs_torch
@pytest.mark.parametrize("call", ACTIVATION_CALLS)
def test_more_activations_beside_pytorch(call):
    rng = np.random.default_rng(0)
    a, u = rng.standard_normal((4, 6)), rng.standard_normal((4, 6))
    results = []
    for lib in (gf, torch):
        x = lib.tensor(a, requires_grad=True)
        y = eval(call, {"lib": lib, "F": lib.nn.functional, "x": x})
        (y * lib.tensor(u[: y.shape[0], : y.shape[1]])).sum().backward()
        results.append((as_array(y), as_array(x.grad)))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["softplus", "logsigmoid", "elu", "mish", "glu"])
def test_more_activations_gradcheck(float64, name):
    x = gf.tensor(np.random.default_rng(8).standard_normal((3, 4)), requires_grad=True)
    assert gf.gradcheck(getattr(F_, name), x)


def test_glu_refuses_an_odd_size():
    with pytest.raises(
        ValueError, match="^" + re.escape("glu: dim -1 has odd size 3; it is cut into two halves") + "$"
    ):
        F_.glu(gf.zeros(2, 3))
