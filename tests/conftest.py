import numpy as np
import pytest

import gradflow as gf


@pytest.fixture
def float64():
    """Build and check in float64 (gradcheck's precision); float32 again afterwards."""
    gf.set_default_dtype(np.float64)
    gf.manual_seed(0)
    try:
        yield
    finally:
        gf.set_default_dtype(np.float32)
