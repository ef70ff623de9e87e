"""A flag mistake in any absl script (they all start through `albert.cli.run`) is one `ERROR:`
line on stderr and exit status 1, as every other user mistake: not absl's two lines
("FATAL Flags parsing error: ...", "Pass --helpshort or --helpfull ...")."""

import pytest

from scripts import run_script, run_script_process


def _one_error_line(result) -> str:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), result.stderr
    assert "FATAL" not in result.stderr and "Traceback" not in result.stderr
    return lines[0]


@pytest.mark.parametrize("script, flags, fragments", [
    # A misspelled flag keeps absl's suggestion.
    ("run_pretraining.py", ["--num_train_step=3", "--input_file=x", "--output_dir=y"],
     ["Unknown command line flag 'num_train_step'", "Did you mean: num_train_steps"]),
    ("run_pretraining.py", ["--num_train_steps=many", "--input_file=x", "--output_dir=y"],
     ["--num_train_steps=many", "invalid literal for int()"]),
    ("run_pretraining.py", ["--optimizer=sgd", "--input_file=x", "--output_dir=y"],
     ["--optimizer=sgd", "adamw|lamb"]),
    ("create_pretraining_data.py", ["--output_file=x"], ["--input_file"]),
])
def test_a_flag_mistake_is_one_error_line(script, flags, fragments):
    line = _one_error_line(run_script(script, *flags))
    for fragment in fragments:
        assert fragment in line, line
    assert "--helpshort" in line


def test_a_misspelled_flag_is_one_line_on_a_new_processs_stderr():
    """What a user sees: nothing else reaches the process's stderr (TensorFlow's native start-up
    lines included)."""
    line = _one_error_line(run_script_process("run_pretraining.py", "--num_train_step=3",
                                              "--input_file=x", "--output_dir=y", timeout=300))
    assert "Did you mean: num_train_steps" in line
