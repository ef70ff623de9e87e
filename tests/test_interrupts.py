"""Ctrl-C handling: a deferred block runs to its end, the interrupt comes right after."""
import os
import signal
import sys
import types

import pytest

from albert import interrupts


@pytest.fixture
def remembering_handler(monkeypatch):
    monkeypatch.setattr(interrupts, "_requested", False)
    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)  # handle_ctrl_c chains one
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupts.handle_ctrl_c()
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_inside_a_deferred_block_waits_for_its_end(remembering_handler):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("after the signal")
            with interrupts.deferred():  # nested: only the outermost block raises
                done.append("inner")
            done.append("end of block")
    assert done == ["after the signal", "inner", "end of block"]


def test_ctrl_c_outside_a_deferred_block_interrupts_at_once(remembering_handler):
    done = []
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        done.append("not reached")
    assert done == []


def test_a_block_without_ctrl_c_returns_normally(remembering_handler):
    with interrupts.deferred():
        value = 1
    assert value == 1


def test_after_a_reported_ctrl_c_only_tensorflow_finalizer_errors_are_dropped(monkeypatch):
    # What Python hands sys.unraisablehook for "Exception ignored in <obj.__del__>".
    def tensorflow_del():
        pass
    tensorflow_del.__module__ = "tensorflow.python.eager.polymorphic_function.atomic_function"

    def own_del():
        pass

    printed = []
    monkeypatch.setattr(sys, "unraisablehook", printed.append)
    interrupts.quiet_tensorflow_finalizers()
    for finalizer in (tensorflow_del, own_del):
        sys.unraisablehook(types.SimpleNamespace(object=finalizer, exc_type=KeyError))
    assert [u.object for u in printed] == [own_del]


def test_a_ctrl_c_swallowed_by_a_finalizer_is_remembered_and_not_printed(monkeypatch):
    printed = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: printed.append(
        unraisable.exc_type))
    monkeypatch.setattr(interrupts, "_requested", False)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupts.handle_ctrl_c()

        class InterruptedFinalizer:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGINT)  # lands inside the finalizer

        class FailingFinalizer:
            def __del__(self):
                raise ValueError("a real error in a finalizer")

        InterruptedFinalizer()  # collected at once: Python swallows the interrupt
        FailingFinalizer()
        with pytest.raises(KeyboardInterrupt):
            interrupts.raise_if_requested()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert printed == [ValueError]


SCRIPT_WHOSE_FINALIZER_SWALLOWS_A_CTRL_C = """
import os, signal
from albert import cli

class InterruptedFinalizer:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)

def main(argv):
    InterruptedFinalizer()   # Python swallows the KeyboardInterrupt raised in __del__
    print("work done")

cli.run(main)
"""


def test_a_script_whose_ctrl_c_was_swallowed_exits_interrupted_not_successfully():
    import subprocess

    result = subprocess.run([sys.executable, "-c", SCRIPT_WHOSE_FINALIZER_SWALLOWS_A_CTRL_C],
                            capture_output=True, text=True, timeout=300,
                            # A child started with SIGINT ignored would keep ignoring it.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert result.returncode == 130, result.stderr[-2000:]
    assert "Interrupted:" in result.stderr
    assert "Exception ignored" not in result.stderr


SCRIPT_SENDING_ITSELF_SIGTERM = """
import os, signal, time
from albert import cli, interrupts

def main(argv):
    if os.environ.get("IN_TRAINING"):
        with interrupts.termination_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.5)
            print("deferred: requested =", interrupts.termination_requested(), flush=True)
        print("after the block")
        return
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
    print("still running")

cli.run(main)
"""


@pytest.mark.parametrize("in_training", [False, True])
def test_sigterm_ends_a_script_at_once_except_inside_the_training_loop(in_training):
    """Outside the loop's steps SIGTERM kills as by default; inside, the loop is told, and a
    block that then ends without acting on it ends the process."""
    import os
    import subprocess

    env = dict(os.environ, IN_TRAINING="1" if in_training else "")
    result = subprocess.run([sys.executable, "-c", SCRIPT_SENDING_ITSELF_SIGTERM],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == -signal.SIGTERM, result.stderr[-2000:]
    assert "after the block" not in result.stdout
    if in_training:
        assert "deferred: requested = True" in result.stdout
    else:
        assert "still running" not in result.stdout


SCRIPT_REPORTING_ITS_DATA_WORKERS_SIGTERM = """
import signal, sys
from albert import cli
from albert.pretraining_data import creation
from albert.pretraining_data.instances import InstanceConfig

def _worker_sigterm_is_default():
    return signal.getsignal(signal.SIGTERM) is signal.SIG_DFL

def main(argv):
    config = creation.DataConfig(instance=InstanceConfig(), spm_model_file=argv[1])
    jobs = creation._Jobs(config, 2, None)
    assert "tensorflow" not in sys.modules
    try:
        print("workers default:", [jobs.submit(_worker_sigterm_is_default).get(timeout=60)
                                   for _ in range(4)], flush=True)
    finally:
        jobs.close(success=True)

cli.run(main)
"""


def test_data_creation_workers_die_at_once_when_their_pool_terminates(synthetic_corpus):
    """The scripts' SIGTERM handler runs only between bytecodes: a forked data worker that
    kept it could miss `Pool.terminate()`'s SIGTERM while blocked on its task queue, and the
    script hung at its end (seen in CI, and in 1 of 3 runs of one loop). Workers take the
    default action."""
    import os
    import subprocess

    _, spm = synthetic_corpus
    # As create_pretraining_data.py starts: without TensorFlow, so its workers are forked.
    env = dict(os.environ, ALBERT_LIGHTWEIGHT_IMPORT="1")
    result = subprocess.run([sys.executable, "-c", SCRIPT_REPORTING_ITS_DATA_WORKERS_SIGTERM,
                             spm], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "workers default: [True, True, True, True]" in result.stdout, result.stdout


SCRIPT_WHOSE_LIBRARY_TURNS_A_CTRL_C_INTO_ITS_OWN_ERROR = """
import os, signal
from albert import cli

def library_call():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        signal.pause()  # the handler runs and raises KeyboardInterrupt here
    except KeyboardInterrupt:
        raise ValueError("interrupted while tracing")  # as a library may do

def main(argv):
    library_call()
    print("work done")

cli.run(main)
"""


def test_a_ctrl_c_a_library_turned_into_its_own_error_still_ends_as_interrupted():
    import subprocess

    result = subprocess.run([sys.executable, "-c",
                             SCRIPT_WHOSE_LIBRARY_TURNS_A_CTRL_C_INTO_ITS_OWN_ERROR],
                            capture_output=True, text=True, timeout=300,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert result.returncode == 130, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1].startswith("Interrupted:"), result.stderr
    assert "Traceback" not in result.stderr and "work done" not in result.stdout
