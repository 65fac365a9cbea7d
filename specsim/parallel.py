"""Independent tasks on workers, with SciPy's ``workers=`` convention and one seed per task.

The package's long sweeps (the real-tree build, the self-test's power search and mutation table,
policy comparisons, the tree-shape search, ``specsim compare`` and ``python -m paper_figs``) take
``workers=``:

- ``1`` (the default): serial, in this process (the builtin ``map``);
- an integer ``n > 1``: n worker processes through joblib (its default backend, loky, pickles
  tasks with cloudpickle, so models and verifiers built from closures travel);
- ``-1``: joblib's ``n_jobs=-1``, every core (under a cluster backend, every worker of it);
- a map-like callable ``workers(f, iterable)`` that returns the results in the order of the
  tasks, such as ``multiprocessing.Pool(2).imap`` (its tasks must pickle with the standard
  pickle) or a cluster's map.

Anything else (``0``, ``-2``, ``2.5``, ``"2"``, ``True``) is a ``TypeError`` / ``ValueError``
naming ``workers``.  Because integer workers run through joblib, a Dask or Ray cluster is a backend
switch (``with joblib.parallel_config(backend="dask"):`` while a ``distributed.Client`` is
open), not a code change.

Results never depend on the number of workers: every task returns its own result and the caller
combines them in task order, as the serial loop did; a task that draws random numbers draws them
from its own stream, :func:`task_seed` (``seed``, i) = child i of ``SeedSequence(seed)``, which does
not depend on which worker runs it or on how many there are.

>>> from specsim.parallel import map_tasks, task_seed
>>> import numpy as np
>>> draw = lambda i: float(np.random.default_rng(task_seed(7, i)).random())
>>> map_tasks(draw, range(3)) == [draw(i) for i in range(3)]
True
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import numpy as np

from ._validate import check_int, check_seed

__all__ = ["check_workers", "worker_map", "map_tasks", "task_seed", "task_seeds"]


def check_workers(workers, name: str = "workers"):
    """``workers`` checked: ``1``, an integer ``n > 1``, ``-1``, or a map-like callable
    (``name`` is used in the message, e.g. ``"--workers"`` on a command line).

    Returns: the int (a Python ``int``) or the callable as given; ``TypeError`` for a value that
    is neither an integer nor callable (``bool``, a float such as ``2.0``, a string),
    ``ValueError`` for an integer other than -1 below 1.

    >>> from specsim.parallel import check_workers
    >>> check_workers(2), check_workers(-1), check_workers(map) is map
    (2, -1, True)
    >>> check_workers(0)
    Traceback (most recent call last):
    ...
    ValueError: workers must be 1 (serial), n > 1 (processes) or -1 (every core), got 0
    """
    if callable(workers):
        return workers
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)):
        raise TypeError(f"{name} must be an int (1, n > 1, or -1 for every core) or a map-like callable "
                        f"workers(f, iterable) such as multiprocessing.Pool(2).imap, got {workers!r} "
                        f"({type(workers).__name__})")
    workers = int(workers)
    if workers < 1 and workers != -1:
        raise ValueError(f"{name} must be 1 (serial), n > 1 (processes) or -1 (every core), got {workers}")
    return workers


def worker_map(workers) -> Callable[[Callable, Iterable], Iterator]:
    """A map ``m(f, iterable)`` over ``workers`` (:func:`check_workers`), yielding f's results in
    the order of the tasks.

    ``1`` gives the builtin ``map`` (lazy: a consumer that stops early stops the work); n > 1 or
    -1 gives ``joblib.Parallel(n_jobs=n)`` under the active joblib backend, results yielded as
    they come in order (so a progress bar can follow them) where the backend allows it, else
    after the last one, and tasks taken from the iterable as workers free up; a callable is
    returned as given.  Nothing starts until the map is called.
    """
    workers = check_workers(workers)
    if callable(workers):
        return workers
    if workers == 1:
        return map
    try:
        import joblib
    except ImportError as e:  # a dependency of the package; only a broken install lands here
        raise ImportError(f"workers={workers} runs through joblib, which is not installed (pip install joblib); "
                          f"or pass workers=1 or a map-like callable") from e

    def run(f, iterable):
        # tasks are taken from the iterable as workers free up (joblib's pre_dispatch), so a
        # caller may make later tasks from earlier results (the power search's bound)
        tasks = (joblib.delayed(f)(x) for x in iterable)
        try:
            par = joblib.Parallel(n_jobs=workers, return_as="generator")
        except ValueError:  # a backend that cannot stream results (checked before any task is taken)
            return iter(joblib.Parallel(n_jobs=workers)(tasks))
        return par(tasks)
    return run


def map_tasks(f: Callable[[Any], Any], tasks: Iterable, workers=1) -> list:
    """``[f(t) for t in tasks]``, the tasks spread over ``workers`` (:func:`worker_map`); the list
    is in task order whatever the number of workers.

    >>> from specsim.parallel import map_tasks
    >>> map_tasks(abs, [-1, 2, -3], workers=lambda f, it: map(f, it))
    [1, 2, 3]
    """
    return list(worker_map(workers)(f, tasks))


def task_seed(seed, i: int) -> np.random.SeedSequence:
    """The random stream of task ``i`` of a sweep seeded with ``seed``: child ``i`` of
    ``SeedSequence(seed)``, equal to ``SeedSequence(seed).spawn(n)[i]`` for every n > i.

    A task that draws ``numpy.random.default_rng(task_seed(seed, i))`` draws the same numbers
    whichever worker runs it and however many workers there are.

    >>> import numpy as np
    >>> from specsim.parallel import task_seed
    >>> task_seed(3, 1).generate_state(2).tolist() == np.random.SeedSequence(3).spawn(4)[1].generate_state(2).tolist()
    True
    """
    seed = check_seed(seed)
    return np.random.SeedSequence(seed, spawn_key=(check_int(i, "task index", 0),))


def task_seeds(seed, n: int) -> list[np.random.SeedSequence]:
    """The streams of tasks 0..n-1: ``SeedSequence(seed).spawn(n)``, i.e. ``task_seed(seed, i)``.

    >>> from specsim.parallel import task_seeds
    >>> len(task_seeds(0, 3))
    3
    """
    return np.random.SeedSequence(check_seed(seed)).spawn(check_int(n, "n", 0))
