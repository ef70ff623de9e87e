"""Runs the repository's scripts as a user would: in this process, or in a new one.

`run_script` runs a script's `__main__` in the test process, with its own
flags, argv, working directory, captured stdout/stderr and exit status, and
returns what `subprocess.run` would (returncode, stdout, stderr). A Python
start and the TensorFlow import cost about 6 s a script on 2 quiet cores; in-process
the suite pays them once. What only a process shows (native stderr, exit by
signal, environment variables, several TensorFlow devices or workers, a
hang caught by a timeout) goes through `run_script_process`, or through
`run_script` with `env=` or `timeout=`, which start one.

In-process runs start from what a new process starts from where it matters
to results: no flags defined or parsed by an earlier script (the absl flag
registry is restored afterwards), a cleared Keras session (layer names,
dtype policy) and the default signal handlers; the interrupt module's
remembered requests are reset after the run.
"""

import contextlib
import copy
import io
import logging
import os
import runpy
import signal
import subprocess
import sys
import traceback

from conftest import REPO


class ScriptResult(subprocess.CompletedProcess):
    """What `subprocess.run(..., capture_output=True, text=True)` returns."""


def run_script(*args, env=None, timeout=None, cwd=REPO):
    """Runs `python <args>` from `cwd` (script paths are relative to the repository root);
    returns a CompletedProcess.

    In this process unless it needs what only a new one gives: `env`, a `timeout`, or
    several devices (`--cpu_devices`, `--strategy=mirrored`: TensorFlow's collectives keep
    their keys per process, so two mirrored strategies in one process can collide).
    """
    if env is not None or timeout is not None or _uses_several_devices(args):
        return run_script_process(*args, env=env, timeout=timeout or 600, cwd=cwd)
    return _run_in_process(list(args), cwd)


def run_script_process(*args, env=None, timeout=600, cwd=REPO):
    """Runs `python <args>` in a new process from `cwd`."""
    full_env = dict(os.environ, **(env or {}))
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, full_env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)


def assert_clean_failure(result, *fragments):
    """A user mistake: non-zero exit, one ERROR line naming the problem, no traceback."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "ERROR:" in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def _uses_several_devices(args) -> bool:
    return any(str(arg).startswith(("--cpu_devices=", "--strategy=mirrored",
                                    "--strategy=multi_worker")) and str(arg) != "--cpu_devices=1"
               for arg in args)


# ------------------------------------------------------------------ in-process
def _run_in_process(args, cwd):
    if args[0] == "-m":
        argv0, run = args[1], lambda: runpy.run_module(
            args[1], run_name="__main__", alter_sys=True)
        rest = args[2:]
    else:
        path = os.path.join(REPO, args[0])
        argv0, run = path, lambda: runpy.run_path(path, run_name="__main__")
        rest = args[1:]
    stdout, stderr = io.StringIO(), io.StringIO()
    with _fresh_process_state(argv=[argv0, *rest], stderr=stderr, cwd=cwd):
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            returncode = _exit_status(run, stderr)
    return ScriptResult(args=[sys.executable, *args], returncode=returncode,
                        stdout=stdout.getvalue(), stderr=stderr.getvalue())


def _exit_status(run, stderr) -> int:
    """The status a process running `run` would exit with; an uncaught error's traceback
    goes to the captured stderr, as Python prints it."""
    try:
        run()
        return 0
    except SystemExit as exit_:
        if exit_.code is None:
            return 0
        if isinstance(exit_.code, int):
            return exit_.code
        print(exit_.code, file=stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc(file=stderr)
        return 130
    except BaseException:  # noqa: B902 - a crash of the script is its exit status 1
        traceback.print_exc(file=stderr)
        return 1


@contextlib.contextmanager
def _fresh_process_state(argv, stderr, cwd):
    import keras
    from absl import app, flags
    from absl import logging as absl_logging

    from albert import interrupts

    # absl defines --help, --helpshort, ... once per process: before the snapshot, so they stay.
    app.define_help_flags()
    saved_flags = _flag_registry(flags.FLAGS)
    # A new process starts with every flag at its default. absl's --verbosity matters most:
    # TensorFlow's SavedModel writer sets it (to silence itself, then back), after which it is
    # no longer the default, and app.run raises only a default --verbosity to INFO; a script's
    # absl INFO lines were then lost in every later run of the test process.
    for flag in flags.FLAGS._flags().values():
        flag.unparse()
    saved_argv, saved_cwd, saved_path = sys.argv, os.getcwd(), list(sys.path)
    # A script another one imports (run_squad_v1.py imports run_squad) defines its flags
    # when imported: it is imported anew in every run, as in a new process.
    for name in [name for name, module in sys.modules.items() if _is_top_level_script(module)]:
        del sys.modules[name]
    saved_modules = set(sys.modules)
    saved_signals = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    saved_unraisablehook = sys.unraisablehook
    saved_levels = {name: logging.getLogger(name).level
                    for name in ("albert", "tensorflow", "absl", None)}
    saved_filters = {name: list(logging.getLogger(name).filters) for name in ("albert", "absl")}
    absl_handler = absl_logging.get_absl_handler().python_handler
    saved_absl_stream = absl_handler.stream
    saved_root_handlers = list(logging.root.handlers)
    # A new process has Python's default handlers; pytest's own are put back afterwards.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    keras.backend.clear_session()
    sys.argv = argv
    sys.path.insert(0, REPO)
    os.chdir(cwd)
    absl_handler.stream = stderr
    # absl's app.run does some things only on its first call in a process (installs its log
    # handler, raises --verbosity to INFO): each run here is a first call.
    saved_once = app._run_init.done, app._register_and_parse_flags_with_usage.done
    app._run_init.done = app._register_and_parse_flags_with_usage.done = False
    try:
        yield
    finally:
        absl_handler.stream = saved_absl_stream
        app._run_init.done, app._register_and_parse_flags_with_usage.done = saved_once
        logging.root.handlers[:] = saved_root_handlers
        os.chdir(saved_cwd)
        sys.argv, sys.path[:] = saved_argv, saved_path
        for number, handler in saved_signals.items():
            signal.signal(number, handler)
        sys.unraisablehook = saved_unraisablehook
        for name, kept in saved_filters.items():
            logging.getLogger(name).filters[:] = kept
        interrupts._requested = interrupts._termination_requested = False
        interrupts._deferring = interrupts._termination_deferred = False
        interrupts._handler_pid = None
        _restore_flag_registry(flags.FLAGS, saved_flags)
        # After the flags: restoring --verbosity sets logger levels of its own.
        for name, level in saved_levels.items():
            logging.getLogger(name).setLevel(level)
        for name in set(sys.modules) - saved_modules:
            if _is_top_level_script(sys.modules[name]):
                del sys.modules[name]
        keras.backend.clear_session()


def _is_top_level_script(module) -> bool:
    path = getattr(module, "__file__", None) or ""
    return os.path.dirname(os.path.abspath(path)) == REPO if path else False


def _flag_registry(flag_values):
    """The flags defined so far (names, modules) and each one's value and parse state."""
    internals = {key: copy.copy(value) for key, value in flag_values.__dict__.items()}
    states = {name: (flag, flag.value, flag.present, flag.using_default_value)
              for name, flag in flag_values._flags().items()}
    return internals, states


def _restore_flag_registry(flag_values, saved):
    """Forgets the flags a script defined and puts back the earlier flags' values."""
    internals, states = saved
    for key, value in internals.items():
        flag_values.__dict__[key] = value
    for flag, value, present, using_default in states.values():
        flag.value, flag.present, flag.using_default_value = value, present, using_default
