"""tests/scripts.py's in-process runs begin as a new process would: checks of that helper."""

import os

from absl import flags
from absl import logging as absl_logging

from scripts import run_script


def test_a_scripts_info_lines_survive_a_verbosity_set_earlier_in_the_test_process(
        tmp_path, synthetic_corpus, monkeypatch):
    monkeypatch.delenv("ALBERT_LIGHTWEIGHT_IMPORT", raising=False)
    corpus, model = synthetic_corpus
    documents = open(corpus, encoding="utf-8").read().split("\n\n")
    text = tmp_path / "two-documents.txt"
    text.write_text("\n\n".join(documents[:2]), encoding="utf-8")
    # TensorFlow's SavedModel writer does this while it saves (silence, then back): --verbosity
    # is then no longer at its default, and app.run raises only a default one to INFO.
    absl_logging.set_verbosity(absl_logging.FATAL)
    absl_logging.set_verbosity(absl_logging.WARNING)
    try:
        result = run_script("create_pretraining_data.py", f"--input_file={text}",
                            f"--output_file={tmp_path / 'out.tfrecord'}",
                            f"--spm_model_file={model}", "--max_seq_length=32",
                            "--max_predictions_per_seq=5", "--dupe_factor=1", "--noprogress")
        # The test process gets its own setting back.
        assert not flags.FLAGS["verbosity"].using_default_value
    finally:
        flags.FLAGS["verbosity"].unparse()
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Sentence-order label 1 fraction" in result.stderr
    # The script's light import is its own: processes the caller starts later import in full.
    assert "ALBERT_LIGHTWEIGHT_IMPORT" not in os.environ


def test_help_requests_are_told_from_other_arguments():
    from albert.cli import asks_for_help

    for args in (["--help"], ["-?"], ["--helpshort"], ["-helpfull"], ["--x=1", "--helpxml"],
                 ["--help=true"]):
        assert asks_for_help(args), args
    for args in ([], ["--help=false"], ["--nohelp"], ["--", "--help"], ["--helper=1"],
                 ["--task_name=help"]):
        assert not asks_for_help(args), args
