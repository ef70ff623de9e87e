"""Ctrl-C that is never lost in the training loop.

Python turns SIGINT into a `KeyboardInterrupt` raised wherever the main
thread is. If that is inside a finalizer (`__del__` of one of TensorFlow's
many objects, run by the garbage collector), Python prints "Exception
ignored" and drops it: the run goes on as if nothing happened. The scripts
install `handle_ctrl_c`, which also remembers the request, and the training
loop calls `raise_if_requested` between steps, so a dropped interrupt still
stops the run at the next step. Evaluation and prediction batches check it
too, and the scripts check it once more when their work is done, so a run
that got a Ctrl-C never ends as a success. Since it is not lost, Python's
"Exception ignored ... KeyboardInterrupt" message for it is not printed
either: the user sees only the one line that reports where the run stopped.

Some work must finish once begun: a checkpoint whose files are on disk but
not yet listed in the `checkpoint` state file would be invisible to the next
run. `deferred()` holds a Ctrl-C until such a block is done.

A Ctrl-C can also land inside TensorFlow's own bookkeeping (between
registering a traced function and counting its reference, say). The run is
stopped and reported either way, but at interpreter exit the finalizer of
such an object then fails ("Exception ignored in AtomicFunction.__del__ ...
KeyError"), a traceback after the one line the user should see.
`quiet_tensorflow_finalizers()` drops those, and only those, once the run
has been reported as interrupted.
"""

import contextlib
import os
import signal
import sys

_requested = False
_deferring = False
_termination_requested = False
_termination_deferred = False
_handler_pid = None


def _on_sigint(signum, frame):
    global _requested
    _requested = True
    if not _deferring:
        raise KeyboardInterrupt


@contextlib.contextmanager
def deferred():
    """Runs the block to its end even when Ctrl-C comes in the middle; the interrupt is
    raised right after it (with the remembering handler installed)."""
    global _deferring
    outer = _deferring
    _deferring = True
    try:
        yield
    finally:
        _deferring = outer
    if not outer:
        raise_if_requested()


def _on_sigterm(signum, frame):
    global _termination_requested
    _termination_requested = True
    if not _termination_deferred or os.getpid() != _handler_pid:
        # Outside the training loop, and in any child process that inherited the
        # handler (a data worker its pool terminates), SIGTERM ends the process
        # as it always did.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


@contextlib.contextmanager
def termination_deferred():
    """Within the block (the training loop's steps) SIGTERM only sets the flag that
    `termination_requested()` reads: the loop saves a checkpoint and stops."""
    global _termination_deferred
    outer = _termination_deferred
    _termination_deferred = True
    try:
        yield
    finally:
        _termination_deferred = outer
    if not outer and _termination_requested and os.getpid() == _handler_pid:
        # A SIGTERM after the loop's last check (during the final checkpoint, say):
        # the block ended normally, so end the process now, as SIGTERM would have.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def handle_termination() -> None:
    """Installs a SIGTERM handler that remembers the request while training.

    Spot / preemptible VMs, TPU maintenance and cluster schedulers send
    SIGTERM some seconds before they kill a process. Inside the training
    loop's steps (`termination_deferred`) the handler only remembers it: the
    loop checks `termination_requested()` after every host loop, saves a
    checkpoint at the step reached and ends the run (all workers together:
    see `albert.training.loop`). Anywhere else SIGTERM ends the process at
    once, as by default. A process whose SIGTERM handler is not the default
    keeps its own."""
    global _handler_pid
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _on_sigterm):
        _handler_pid = os.getpid()
        signal.signal(signal.SIGTERM, _on_sigterm)


def handle_termination_again() -> None:
    """Installs the SIGTERM handler once more if `handle_termination` installed it.

    The training loop calls this once its strategy exists: under
    MultiWorkerMirroredStrategy TensorFlow's coordination service sets a
    SIGTERM handler of its own in C++ (its preemption notifier), which
    replaces Python's without Python knowing."""
    if signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, _on_sigterm)


def termination_requested() -> bool:
    return _termination_requested


def handle_ctrl_c() -> None:
    """Installs the remembering SIGINT handler (main thread only; a process whose SIGINT
    is ignored, e.g. started in the background by a shell, keeps ignoring it), and stops
    Python printing the interrupts it remembers when a finalizer swallows them."""
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
        _drop_unraisable_if(_is_keyboard_interrupt)


def _is_keyboard_interrupt(unraisable) -> bool:
    # With `_on_sigint` installed every KeyboardInterrupt was remembered before it was
    # raised, so one a finalizer swallowed still stops the run at the next step.
    return isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type,
                                                                KeyboardInterrupt)


def _drop_unraisable_if(condition) -> None:
    """Chains a `sys.unraisablehook` that does not print what `condition` matches."""
    previous = sys.unraisablehook

    # Bound now: module globals may already be cleared when finalizers run at exit.
    def hook(unraisable, previous=previous, condition=condition):
        if not condition(unraisable):
            previous(unraisable)

    sys.unraisablehook = hook


def requested() -> bool:
    """Whether a Ctrl-C came (remembered by the handler `handle_ctrl_c` installs)."""
    return _requested


def raise_if_requested() -> None:
    """Raises the `KeyboardInterrupt` of a Ctrl-C that was dropped on its way."""
    if _requested:
        raise KeyboardInterrupt


def _raised_by_a_tensorflow_finalizer(unraisable) -> bool:
    module = getattr(unraisable.object, "__module__", None) or ""
    return module.split(".")[0] == "tensorflow"


def quiet_tensorflow_finalizers() -> None:
    """After a reported Ctrl-C: errors raised by TensorFlow objects' finalizers while the
    interpreter shuts down are not printed; every other "Exception ignored" still is."""
    _drop_unraisable_if(_raised_by_a_tensorflow_finalizer)
