"""Worker processes for the data pipelines, started without TensorFlow.

Creating pretraining data and writing fine-tuning feature caches are pure
Python (tokenization and record encoding), so they run in worker processes
that must not import Keras or TensorFlow: that costs seconds of start-up and
hundreds of MB each. Workers are forked where that is safe (Linux, and the
parent has not loaded TensorFlow, whose runtime threads must not be forked);
otherwise they are spawned with `ALBERT_LIGHTWEIGHT_IMPORT=1`, which keeps
`import albert` from loading the model code.
"""

import itertools
import multiprocessing
import os
import signal
import sys
import types
from collections import deque
from typing import Callable, Iterable, Iterator, Optional, Sequence

# Set in worker processes so that `import albert` skips Keras / TensorFlow.
LIGHTWEIGHT_IMPORT_VARIABLE = "ALBERT_LIGHTWEIGHT_IMPORT"


def start_pool(num_workers: int, initializer: Callable, initargs: Sequence = ()):
    """A `multiprocessing` pool whose workers run `initializer(*initargs)` first."""
    can_fork = sys.platform.startswith("linux") and "tensorflow" not in sys.modules
    previous = os.environ.get(LIGHTWEIGHT_IMPORT_VARIABLE)
    os.environ[LIGHTWEIGHT_IMPORT_VARIABLE] = "1"
    main = sys.modules["__main__"]
    if not can_fork:
        # A spawned worker imports the parent's main script first (run_classifier.py, which
        # loads TensorFlow: seconds and ~700 MB a worker). The workers' functions live in
        # the package, so the workers are started with a bare main module instead.
        sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        return multiprocessing.get_context("fork" if can_fork else "spawn").Pool(
            num_workers, initializer=_initialise, initargs=(initializer, tuple(initargs)))
    finally:
        sys.modules["__main__"] = main
        if previous is None:
            del os.environ[LIGHTWEIGHT_IMPORT_VARIABLE]
        else:
            os.environ[LIGHTWEIGHT_IMPORT_VARIABLE] = previous


def _initialise(initializer: Callable, initargs: tuple) -> None:
    # `Pool.terminate()` ends the workers with SIGTERM. A forked worker inherits the
    # script's Python SIGTERM handler, which runs only between bytecodes: a signal
    # landing just before the worker blocks on the task queue's semaphore left it
    # waiting forever and the script hung at its end (seen in CI, and in 1 of 3 runs
    # of one test loop). The default action kills the worker in the kernel, whatever it
    # is doing.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    initializer(*initargs)


_FUNCTION: Optional[Callable] = None


def _set_function(function: Callable) -> None:
    global _FUNCTION
    _FUNCTION = function


def _apply_to_chunk(chunk: list) -> list:
    return [_FUNCTION(item) for item in chunk]


def ordered_map(function: Callable, items: Iterable, num_workers: int,
                chunk_size: int = 512) -> Iterator:
    """`function(item)` for every item, in the items' order, computed by `num_workers`
    processes. `function` must be picklable (a module-level function, or an instance of a
    module-level class). The items are read as the workers need them, with at most two
    chunks a worker in flight, so memory stays flat however many items there are
    (`Pool.imap` would read them all ahead)."""
    pool = start_pool(num_workers, _set_function, (function,))
    try:
        in_flight: deque = deque()
        iterator = iter(items)
        while True:
            while len(in_flight) < 2 * num_workers:
                chunk = list(itertools.islice(iterator, chunk_size))
                if not chunk:
                    break
                in_flight.append(pool.apply_async(_apply_to_chunk, (chunk,)))
            if not in_flight:
                break
            yield from in_flight.popleft().get()
        pool.close()
    finally:
        pool.terminate()
        pool.join()
