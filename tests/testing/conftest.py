"""Shared fixtures of the specsim.testing tests."""
import pytest


@pytest.fixture
def one_torch_thread():
    """One intra-op torch thread: the tensors are tiny and thread start-up dominates on a shared machine."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
