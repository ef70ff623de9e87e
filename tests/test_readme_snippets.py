"""The README's snippets work as written (a user pastes them first).

- Its Python snippets run from the repository root.
- Every `--flag` of a shell command in README.md or docs/*.md that runs one of the project's
  scripts (a top-level `*.py`, `benchmarks/*.py`, or `python -m albert.<module>`) is a flag that
  script defines: absl flags (with `--no<flag>` for booleans) or argparse options, a
  subcommand's included. The flags are read in this process without running a script's main:
  the script runs as `__main__` until it hands its command line to absl (`app.run`) or argparse
  (`parse_known_args`), where the test stops it and reads the flags it has defined.
"""

import argparse
import glob
import os
import re
import runpy
import shlex
import sys
import warnings

import pytest

from conftest import REPO


def _python_blocks(path):
    with open(path, encoding="utf-8") as handle:
        return re.findall(r"```python\n(.*?)```", handle.read(), flags=re.DOTALL)


def test_the_readmes_python_snippets_run_from_the_repository_root(monkeypatch):
    blocks = _python_blocks(os.path.join(REPO, "README.md"))
    assert blocks, "the README has no Python snippet"
    monkeypatch.chdir(REPO)
    for block in blocks:
        namespace = {}
        exec(compile(block, "README.md", "exec"), namespace)   # noqa: S102 - our own README
    # The last snippet builds base from its config and runs it on one 4-piece sequence.
    outputs = namespace["outputs"]
    assert tuple(outputs["sequence_output"].shape) == (1, 4, 768)
    assert tuple(outputs["pooled_output"].shape) == (1, 768)
    assert len(outputs["encoder_outputs"]) == 12


# ----------------------------------------------------------------- flags in shell commands
# A command that runs python or python3 (after optional VAR=value assignments), at the start
# of a line or after &&, ||, | or ;.
_COMMAND_START = re.compile(r"(?:^|[;&|]\s*)(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:\S*/)?python3?\s")
_INLINE_COMMAND = re.compile(r"`((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*python3? [^`]+)`")
# absl's parser takes these itself; they are not in the flag registry.
_ABSL_SPECIAL = {"flagfile", "undefok"}


def _pages():
    pages = sorted(glob.glob(os.path.join(REPO, "docs", "*.md")))
    return ["README.md"] + [os.path.relpath(page, REPO) for page in pages]


_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S.*)$")


def _command_lines(text):
    """Shell command lines (continuations joined) in code blocks and inline code spans, with
    the page's shell variables (`B="--flag=x ..."` on a line of its own) expanded."""
    lines = text.splitlines()
    in_python_fence = False
    variables = {}
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        index += 1
        if line.startswith("```"):
            in_python_fence = not in_python_fence and line[3:].strip() in ("python", "py")
            continue
        if in_python_fence:
            continue
        while line.endswith("\\") and index < len(lines):
            line = line[:-1] + " " + lines[index].strip()
            index += 1
        assignment = _ASSIGNMENT.match(line)
        if assignment and not _COMMAND_START.search(line):
            try:
                value = shlex.split(assignment.group(2))
            except ValueError:
                continue
            if len(value) == 1:
                variables[assignment.group(1)] = value[0]
            continue
        if _COMMAND_START.search(line):
            yield re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                         lambda m: variables.get(m.group(1), m.group(0)), line)
    for span in _INLINE_COMMAND.findall(text):
        yield " ".join(span.split())


def _simple_commands(command_line):
    """The argument lists of the commands of one line (split at &&, ||, |, ;), comments dropped."""
    try:
        lexer = shlex.shlex(command_line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        tokens = list(lexer)
    except ValueError:   # an unbalanced quote: a placeholder, not a command to check
        return []
    commands, current = [], []
    for token in tokens:
        if token and set(token) <= set(";&|"):
            commands.append(current)
            current = []
        else:
            current.append(token)
    commands.append(current)
    return [c for c in commands if c]


def _script_and_arguments(words):
    """(script path or `-m` module, the words after it), or None for other commands."""
    while words and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words or not re.fullmatch(r"(?:\S*/)?python3?", words[0]) or len(words) < 2:
        return None
    if words[1] == "-m":
        module = words[2] if len(words) > 2 else ""
        if module.split(".")[0] != "albert" or not re.fullmatch(r"[\w.]+", module):
            return None   # another package's module, or a placeholder (albert.<script>)
        return ("-m", module), words[3:]
    if words[1].startswith("-"):   # python -c, python -u ...
        return None
    path = os.path.normpath(words[1])
    if not path.endswith(".py") or not re.fullmatch(r"[\w-]+\.py|benchmarks/[\w-]+\.py", path):
        return None
    return ("path", path), words[2:]


class _CommandLineReached(BaseException):
    """The script reached its command-line parser; `parser` is argparse's, or None for absl."""

    def __init__(self, parser=None):
        super().__init__()
        self.parser = parser


def _defined_options(script):
    """The options a script accepts: ("absl", {name: is_bool}) or ("argparse", parser)."""
    from absl import app, flags

    from albert import cli
    from scripts import _flag_registry, _is_top_level_script, _restore_flag_registry

    kind, target = script
    if kind == "-m":
        argv0, run = target, lambda: runpy.run_module(target, run_name="__main__", alter_sys=True)
        first_on_path = REPO
    else:
        path = os.path.join(REPO, target)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no script {target}")
        argv0, run = path, lambda: runpy.run_path(path, run_name="__main__")
        first_on_path = os.path.dirname(path)   # as `python path` puts it (benchmarks' imports)

    def stop_at_absl(*args, **kwargs):
        raise _CommandLineReached()

    def stop_at_argparse(parser, *args, **kwargs):
        raise _CommandLineReached(parser)

    # What a new process starts from, as far as defining flags goes (a lighter version of
    # scripts.run_script's set-up: nothing runs here that uses Keras or signals): absl's help
    # flags, no flags of an earlier script, the top-level scripts imported afresh.
    app.define_help_flags()
    saved_flags = _flag_registry(flags.FLAGS)
    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_runs = app.run, cli.run, argparse.ArgumentParser.parse_known_args
    for name in [name for name, module in sys.modules.items() if _is_top_level_script(module)]:
        del sys.modules[name]
    saved_modules = set(sys.modules)
    sys.argv = [argv0]
    sys.path.insert(0, first_on_path)
    app.run = cli.run = stop_at_absl
    argparse.ArgumentParser.parse_known_args = stop_at_argparse
    try:
        with warnings.catch_warnings():
            # runpy's note that `albert` imported the module before it ran as __main__
            warnings.simplefilter("ignore", RuntimeWarning)
            run()
    except _CommandLineReached as reached:
        if reached.parser is not None:
            return "argparse", reached.parser
        return "absl", {name: bool(flag.boolean) for name, flag in flags.FLAGS._flags().items()}
    finally:
        app.run, cli.run, argparse.ArgumentParser.parse_known_args = saved_runs
        sys.argv, sys.path[:] = saved_argv, saved_path
        _restore_flag_registry(flags.FLAGS, saved_flags)
        for name in set(sys.modules) - saved_modules:
            if _is_top_level_script(sys.modules[name]):
                del sys.modules[name]
    raise AssertionError(f"{target} ended without reading a command line")


def _argparse_options(parser, arguments):
    """The option names of `parser` and of the subcommand the arguments name, if any."""
    names = {option for action in parser._actions for option in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = next((word for word in arguments if word in action.choices), None)
            if chosen is not None:
                names |= _argparse_options(action.choices[chosen], arguments)
    return names


def _wrong_flags(script, arguments, defined):
    kind, options = defined
    wrong = []
    for word in arguments:
        if not word.startswith("--") or word == "--":
            continue
        name = word[2:].split("=", 1)[0]
        if kind == "absl":
            known = (name in options or name in _ABSL_SPECIAL
                     or (name.startswith("no") and options.get(name[2:]) is True))
        else:
            known = "--" + name in _argparse_options(options, arguments)
        if not known:
            wrong.append(name)
    return wrong


_DEFINED = {}   # script -> what _defined_options found (or the error), once per test process


def _flag_errors(pages):
    errors, cache = [], _DEFINED
    for page in pages:
        text = open(os.path.join(REPO, page), encoding="utf-8").read()
        for command_line in _command_lines(text):
            for words in _simple_commands(command_line):
                found = _script_and_arguments(words)
                if found is None:
                    continue
                script, arguments = found
                if script not in cache:
                    try:
                        cache[script] = _defined_options(script)
                    except (FileNotFoundError, ImportError) as error:
                        cache[script] = error
                defined = cache[script]
                shown = " ".join(script[1:]) if script[0] == "path" else "-m " + script[1]
                if isinstance(defined, Exception):
                    errors.append(f"{page}: python {shown}: {defined}")
                    continue
                for name in _wrong_flags(script, arguments, defined):
                    errors.append(f"{page}: python {shown} --{name}: not a flag of the script")
    return errors


def test_the_flag_reader_finds_commands_and_wrong_flags():
    """The reader: continuations, variables, inline spans, subcommands, absl's --no<flag>."""
    page = ("Run it:\n\n    B=\"--data_dir=d \\\n       --no_such_flag\"\n"
            "    pip install . && TF_CONFIG=x python3 run_race.py --do_train \\\n"
            "        --nodo_train $B --max_qa_length=1   # comment --not_this\n\n"
            "or `python -m albert.paper criteria --output=o --no_such_option` in prose.\n"
            "```python\npython run_race.py --inside_python_code\n```\n")
    commands = list(_command_lines(page))
    assert len(commands) == 2 and "--no_such_option" in commands[1]
    wrong = []
    for command in commands:
        for found in filter(None, map(_script_and_arguments, _simple_commands(command))):
            script, arguments = found
            wrong += _wrong_flags(script, arguments, _defined_options(script))
    assert wrong == ["no_such_flag", "no_such_option"]
    assert _script_and_arguments(shlex.split("python -m pytest -q --nothing")) is None


@pytest.mark.parametrize("page", _pages())
def test_every_flag_of_a_documented_command_is_defined_by_its_script(page):
    assert _flag_errors([page]) == []
