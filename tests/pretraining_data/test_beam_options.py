"""create_pretraining_data.py --beam_pipeline_options: mistakes are one ERROR line before any work.

Every option is checked against the options Beam itself knows (its own and
the chosen runner's), a runner that cannot run the pipeline is refused, and a
flag of the one-machine engine is refused beside Beam: one `ERROR:` line, a
non-zero exit, no output directory, no Beam scratch directory, no usage text.
No pipeline starts in these tests.
"""

import glob
import logging
import os
import tempfile

import pytest

pytest.importorskip("apache_beam")

from albert.errors import InputError  # noqa: E402
from albert.pretraining_data import beam_pipeline  # noqa: E402
from albert.pretraining_data.beam_pipeline import (create_pretraining_data_on_beam,  # noqa: E402
                                                   pipeline_options)
from albert.pretraining_data.creation import DataConfig  # noqa: E402
from albert.pretraining_data.instances import InstanceConfig  # noqa: E402
from scripts import assert_clean_failure, run_script  # noqa: E402

DASK = "runner=apache_beam.runners.dask.dask_runner.DaskRunner,dask_client_address=localhost:8786"

# (--beam_pipeline_options, what the ERROR line says)
BAD_OPTIONS = {
    "bad_int": ("direct_num_workers=two", "direct_num_workers: invalid int value: 'two'"),
    "bad_choice": ("direct_num_workers=2,direct_running_mode=multiprocessing",
                   "direct_running_mode: invalid choice: 'multiprocessing'"),
    "unknown_key": ("foo=bar", "'foo' is not a Beam pipeline option"),
    "misspelled_key": ("direct_num_worker=2",
                       "'direct_num_worker' is not a Beam pipeline option (did you mean "
                       "'direct_num_workers'?)"),
    "workers_in_memory": ("direct_num_workers=2", "needs direct_running_mode=multi_processing"),
    "dataflow_workers_locally": ("num_workers=2", "give direct_num_workers=N"),
    "local_workers_on_a_cluster": ("runner=DataflowRunner,direct_num_workers=4",
                                   "applies to Beam's local engine only"),
    "not_key_value": ("direct_num_workers", "'direct_num_workers' is not key=value"),
    "on_off_value": ("save_main_session=maybe", "save_main_session is on/off"),
    "unknown_runner": ("runner=NoSuchRunner", "unknown runner 'NoSuchRunner'"),
    "dask": (DASK, "cannot run this pipeline: it computes only the last leaf"),
    "trivial": ("runner=apache_beam.runners.trivial_runner.TrivialRunner",
                "cannot run this pipeline: it has no side inputs"),
    "interactive": ("runner=InteractiveRunner", "cannot run this pipeline: it is Beam's notebook"),
}


@pytest.fixture
def corpus(tmp_path):
    """A real corpus and vocabulary, so that the option is the only mistake."""
    (tmp_path / "corpus.txt").write_text("a0 a1 a2.\na3 a4.\n\na5 a6 a7.\na8 a9.\n")
    (tmp_path / "vocab.txt").write_text(
        "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                  + [f"a{i}" for i in range(10)]) + "\n")
    return tmp_path


@pytest.fixture(autouse=True)
def private_temp_dir(tmp_path_factory, monkeypatch):
    """Beam makes its scratch directory under Python's temp directory. Each test gets its
    own, so that a pipeline running in another test worker cannot look like a leftover."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("temp")))


def _beam_scratch():
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "beam-pipeline-temp*")))


def _run(corpus, *flags):
    return run_script("create_pretraining_data.py", f"--input_file={corpus / 'corpus.txt'}",
                      f"--vocab_file={corpus / 'vocab.txt'}",
                      f"--output_file={corpus / 'out' / 'train.tfrecord@2'}",
                      "--max_seq_length=16", "--max_predictions_per_seq=2", *flags)


def _assert_one_line_and_nothing_left(result, corpus, scratch_before, fragment):
    assert_clean_failure(result, fragment)
    lines = (result.stdout + result.stderr).splitlines()
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), lines  # no usage text
    assert sorted(os.listdir(corpus)) == ["corpus.txt", "vocab.txt"]
    assert _beam_scratch() <= scratch_before


@pytest.mark.parametrize("case", sorted(BAD_OPTIONS))
def test_a_bad_option_is_one_error_line_and_leaves_nothing(corpus, case):
    spec, fragment = BAD_OPTIONS[case]
    before = _beam_scratch()
    result = _run(corpus, f"--beam_pipeline_options={spec}")
    _assert_one_line_and_nothing_left(result, corpus, before, fragment)


@pytest.mark.parametrize("flag, fragment", [
    ("--num_workers=2", "give direct_num_workers=N,direct_running_mode=multi_processing"),
    ("--documents_per_window=10", "--documents_per_window does not apply"),
])
def test_a_one_machine_flag_beside_beam_names_what_to_use(corpus, flag, fragment):
    before = _beam_scratch()
    result = _run(corpus, flag, "--beam_pipeline_options=direct_num_workers=2,"
                                "direct_running_mode=multi_processing")
    _assert_one_line_and_nothing_left(result, corpus, before, fragment)


def test_the_dask_runner_is_refused_before_any_work(tmp_path):
    """Nothing is read or made: missing inputs and vocabulary are not even noticed."""
    config = DataConfig(instance=InstanceConfig(), vocab_file=str(tmp_path / "missing-vocab.txt"))
    for spec in [DASK, "runner=Dask", "runner=daskrunner"]:
        with pytest.raises(InputError, match="cannot run this pipeline.*DataflowRunner"):
            create_pretraining_data_on_beam(str(tmp_path / "missing*.txt"),
                                            str(tmp_path / "out" / "x.tfrecord"), config, spec)
    assert os.listdir(tmp_path) == []


def test_valid_options_keep_their_meaning():
    run = pipeline_options("direct_num_workers=2,direct_running_mode=multi_processing,"
                           "save_main_session=false,experiments=a,experiments=b")
    assert run.local and run.description == "Beam's local engine, 2 processes"
    assert run.options.get_all_options()["experiments"][:2] == ["a", "b"]
    assert pipeline_options("").description == "Beam's local engine, in this process"
    assert pipeline_options("direct_num_workers=3,direct_running_mode=multi_threading"
                            ).description == "Beam's local engine, 3 threads"
    # A runner Beam makes itself, from its name, with its own options known.
    flink = pipeline_options("runner=flink,flink_master=localhost:8081,parallelism=4")
    assert flink.runner is None and not flink.local
    assert flink.options.get_all_options()["flink_master"] == "localhost:8081"
    with pytest.raises(InputError, match="'flink_mastr' is not a Beam pipeline option"):
        pipeline_options("runner=FlinkRunner,flink_mastr=localhost:8081")


def test_beams_import_notes_are_dropped_and_its_warnings_kept(caplog):
    caplog.set_level(logging.INFO)
    logging.getLogger("apache_beam.io.filesystems").warning(
        "Failed to import GCSFileSystem; loading of this filesystem will be skipped.")
    logging.getLogger().warning("apitools not found, and bigquery client libraries are not "
                                "available despite the import not raising an ImportError.")
    logging.getLogger("apache_beam.io.gcp.bigquery").info(
        "No module named google.cloud.bigquery_storage_v1. As a result, ...")
    logging.getLogger("apache_beam.io.filesystems").warning("a warning that matters")
    assert [r.getMessage() for r in caplog.records] == ["a warning that matters"]


def test_a_path_beam_cannot_reach_is_one_error_line():
    from apache_beam.io.filesystems import FileSystems

    try:
        FileSystems.get_filesystem("gs://bucket/x")
    except ValueError:
        with pytest.raises(InputError, match="gs://bucket/corpus.txt: .*apache-beam\\[gcp\\]"):
            beam_pipeline._check_file_systems(["/tmp/local.txt", "gs://bucket/corpus.txt"])
    else:
        pytest.skip("Beam's [gcp] extra is installed: gs:// paths are reachable")
