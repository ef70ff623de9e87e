"""Ctrl-C handling: a deferred block runs to its end, the interrupt comes right after."""
import os
import signal

import pytest

from albert import interrupts


@pytest.fixture
def remembering_handler(monkeypatch):
    monkeypatch.setattr(interrupts, "_requested", False)
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
