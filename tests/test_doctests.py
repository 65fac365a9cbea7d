"""The examples of the modules whose imports or examples need torch, triton or transformers.

``python -m pytest`` runs every other module's examples with ``--doctest-modules`` (pyproject.toml);
the root conftest.py leaves these modules out there, so each example runs exactly once, here.
Without CUDA the Triton interpreter is switched on before the kernels are first imported
(``triton.jit`` reads TRITON_INTERPRET when a kernel is defined), as in tests/reference_gpu.
"""
import doctest
import importlib
import importlib.util
import os

import pytest

#: module -> the optional packages its examples need (skipped when one is missing)
MODULES = {
    "reference_gpu": ("torch",),
    "reference_gpu.reference": ("torch",),
    "reference_gpu.kernels": ("torch", "triton"),
    "reference_gpu.api": ("torch", "triton"),
    "specsim.real": ("torch", "transformers"),
    "specsim.testing.adapters": ("torch", "transformers"),
    "specsim.testing.language_models": ("torch", "transformers"),
    "specsim.testing.engines": ("torch",),
    "specsim.testing.uniforms": ("torch",),
}


@pytest.mark.parametrize("name", list(MODULES))
def test_examples(name, doctest_namespace):
    missing = [pkg for pkg in MODULES[name] if importlib.util.find_spec(pkg) is None]
    if missing:
        pytest.skip(f"{name} examples need {', '.join(missing)}")
    if "triton" in MODULES[name]:
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    module = importlib.import_module(name)
    # the namespace the root conftest.py gives --doctest-modules; ELLIPSIS is pytest's default flag
    result = doctest.testmod(module, extraglobs=dict(doctest_namespace), optionflags=doctest.ELLIPSIS,
                             report=False)
    if result.attempted == 0:
        pytest.skip(f"{name} has no >>> examples")
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples of {name} failed (output above)"
