"""torch.onnx: gradflow writes no ONNX files. Importing it works, so that a program that exports only when
asked (`--onnx-export`) runs; each export refuses in one line, saying what to save instead."""


def export(model, *args, **kwargs):
    """Refused: there is no ONNX writer here; the weights save with gf.save(model.state_dict(), path)."""
    raise NotImplementedError(
        "torch.onnx.export: gradflow does not write ONNX files; save the weights with "
        "gf.save(model.state_dict(), path), or export from PyTorch"
    )


def is_in_onnx_export():
    """False: no export is ever under way (models ask, to trace a different path while exporting)."""
    return False
