"""`python -m albert.paper <command> --help` shows every option's default, and `speed --quick`
resolves to a first try's small settings (measurements replaced: nothing is timed here)."""

import argparse
import json

import pytest

from albert.paper import speed
from albert.paper.__main__ import build_parser, main


def _subcommands():
    parser = build_parser()
    (commands,) = [action for action in parser._actions
                   if isinstance(action, argparse._SubParsersAction)]
    return commands.choices


def _help(capsys, command) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"])
    assert exit_.value.code == 0
    return " ".join(capsys.readouterr().out.split())   # one line: no wrapping inside a default


def _shows_a_default(action) -> bool:
    return action.default is not None and action.default is not False \
        and action.default is not argparse.SUPPRESS


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_subcommands_help_shows_every_options_default(command, capsys):
    shown = _help(capsys, command)
    assert "default" in shown
    for action in _subcommands()[command]._actions:
        if _shows_a_default(action):
            # In argparse's words, or in the option's own (which then says "default").
            assert action.help, action.option_strings
            assert (f"(default: {action.default})" in shown
                    or "default" in action.help.lower()), action.option_strings


def _speed_args(*argv):
    args = build_parser().parse_args(["speed", *argv])
    speed.resolve_quick(args)
    return args


def test_quick_picks_the_two_base_models_on_one_process_with_a_small_batch():
    quick = _speed_args("--quick")
    assert (quick.models, quick.batch_size, quick.workers) == ("albert-base,bert-base", 4, "1")
    assert (quick.steps, quick.warmup_steps, quick.seq_length) == (3, 1, 64)
    # A flag given beside --quick wins.
    assert _speed_args("--quick", "--batch_size=8", "--workers=1,2").batch_size == 8
    assert _speed_args("--quick", "--models=albert-base").models == "albert-base"
    # Without it, the full measurement.
    full = _speed_args()
    assert (full.models.split(","), full.batch_size, full.workers) == (
        list(speed.PAPER_SPEEDUP), 8, "1,2")


def test_quick_measures_those_settings_and_its_command_spells_them_out(tmp_path, monkeypatch):
    launched = []

    def measure_model(model, settings, workers, scratch):
        launched.append((model.name, workers, settings.batch_size, settings.steps))
        raise speed.MeasurementFailed("not measured in this test")

    monkeypatch.setattr(speed, "measure_model", measure_model)
    output = tmp_path / "speed.json"
    assert main(["speed", "--quick", f"--output={output}"]) == 1   # every measurement failed
    assert launched == [("albert-base", 1, 4, 3), ("bert-base", 1, 4, 3)]
    assert json.loads(output.read_text())["command"].startswith(
        "python -m albert.paper speed --models=albert-base,bert-base --batch_size=4 ")
