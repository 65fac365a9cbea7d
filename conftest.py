"""Doctest collection for ``python -m pytest`` (``--doctest-modules`` over specsim and lp, see
pyproject.toml).

The numpy-only modules' examples are collected here.  Modules whose examples need torch, triton or
transformers are left out and run by ``tests/test_doctests.py`` instead, which switches the Triton
interpreter on before the kernels are imported when there is no CUDA device; so every example is
collected exactly once.
"""
import os
import shutil

import numpy as np
import pytest

# Triton reads TRITON_INTERPRET when a kernel is defined, i.e. at the first import of
# reference_gpu.kernels, whichever test module gets there first: without a CUDA device, switch the
# CPU interpreter on before any test is collected.  (nvidia-smi absent = no device; torch is not
# imported here so that the numpy-only suite stays light.)
if shutil.which("nvidia-smi") is None:
    os.environ.setdefault("TRITON_INTERPRET", "1")

collect_ignore = [
    "reference_gpu",                # torch and triton
    "specsim/real.py",              # torch and transformers
    "specsim/structure/measure.py",  # torch and transformers
    "specsim/testing/adapters.py",  # torch and transformers
    "specsim/testing/language_models.py",  # torch and transformers
    "specsim/testing/engines.py",   # torch
    "specsim/testing/uniforms.py",  # torch (routed_torch's example)
]


@pytest.fixture(autouse=True)
def numpy_in_doctests(doctest_namespace):
    """Examples may use ``np`` (numpy, the package's array type) without importing it."""
    doctest_namespace["np"] = np
