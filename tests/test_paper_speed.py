"""`python -m albert.paper speed`: Table 2's speed column on this machine, on tiny models."""

import dataclasses
import json

import pytest

from albert.checkpoints.naming import count_parameters
from albert.config import AlbertConfig
from albert.paper import speed, speed_worker
from albert.paper.params import SHAPES
from albert.paper.__main__ import main

TINY = dict(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=64, max_position_embeddings=32)
TINY_BERT = AlbertConfig(**TINY, embedding_size=32, num_hidden_groups=2)    # E = H, not-shared
TINY_ALBERT = AlbertConfig(**TINY, embedding_size=16, num_hidden_groups=1)  # E < H, all-shared
SETTINGS = speed.SpeedSettings(batch_size=4, seq_length=16, max_predictions_per_seq=3,
                               warmup_steps=1, steps=2, threads=2)


def test_the_papers_bert_rows_have_no_projection_and_no_sharing_and_albert_rows_share_all():
    models = speed.paper_models(vocab_size=30000)
    assert list(models) == list(speed.PAPER_SPEEDUP)
    for name, model in models.items():
        config = model.config
        assert config.vocab_size == 30000
        assert model.paper_speedup == speed.PAPER_SPEEDUP[name]
        # The released configs' shapes (xlarge: 16 heads of 128, as its albert_config.json).
        size = name.split("-")[1]
        assert (config.num_hidden_layers, config.hidden_size, config.intermediate_size,
                config.num_attention_heads) == SHAPES[size]
        if name.startswith("bert-"):
            assert config.embedding_size == config.hidden_size
            assert speed.sharing_of(config) == "not-shared"
        else:
            assert config.embedding_size == 128
            assert speed.sharing_of(config) == "all-shared"
    shapes = {name: (m.config.num_hidden_layers, m.config.hidden_size)
              for name, m in models.items()}
    assert shapes == {"bert-base": (12, 768), "bert-large": (24, 1024), "albert-base": (12, 768),
                      "albert-large": (24, 1024), "albert-xlarge": (24, 2048),
                      "albert-xxlarge": (12, 4096)}


def test_built_models_show_their_projection_and_blocks_and_allreduce_four_bytes_a_parameter():
    from albert.modeling.pretrainer import AlbertPretrainer

    for config, projection, blocks in ((TINY_BERT, False, 2), (TINY_ALBERT, True, 1)):
        model = AlbertPretrainer(config)
        described = speed_worker.describe_model(model)
        assert described["embedding_projection"] is projection
        assert described["attention_blocks"] == described["ffn_blocks"] == blocks
        counted = sum(int(v.numpy().size) for v in model.trainable_variables)
        assert described["trainable_parameters"] == counted
        # The checkpoint name table's count, with the pretraining heads: the same parameters.
        assert counted == count_parameters(config, include_heads=True)
        assert described["allreduce_bytes_per_step"] == 4 * counted


def _measured_here(model):
    """One model's row, measured in this process by the code each worker runs."""
    result = speed_worker.measure(model.config, SETTINGS.batch_size, SETTINGS.seq_length,
                                  SETTINGS.max_predictions_per_seq, SETTINGS.warmup_steps,
                                  SETTINGS.steps, log=lambda line: None)
    return speed._model_result(model, SETTINGS, 1, 2, [result])


def test_measured_rows_relate_to_the_reference_by_their_own_numbers():
    bert = _measured_here(speed.SpeedModel("tiny-bert", TINY_BERT, 1.0))
    albert = _measured_here(speed.SpeedModel("tiny-albert", TINY_ALBERT, 2.0))
    for row, config in ((bert, TINY_BERT), (albert, TINY_ALBERT)):
        assert row["examples_per_second"] > 0
        assert row["examples_per_second"] == pytest.approx(
            SETTINGS.batch_size / row["seconds_per_step"])
        assert len(row["seconds_per_step_each_call"]) == SETTINGS.steps
        assert row["strategy"] == "OneDeviceStrategy" and row["replicas"] == 1
        assert row["allreduce_bytes_per_step"] == 4 * count_parameters(config, include_heads=True)
        assert row["peak_memory_bytes_per_worker"] > 0 and row["cpu_utilisation"] > 0
    assert (bert["embedding_projection"], bert["sharing"], bert["attention_blocks"]) == (
        False, "not-shared", 2)
    assert (albert["embedding_projection"], albert["sharing"], albert["attention_blocks"]) == (
        True, "all-shared", 1)
    results = [bert, albert]
    speed.add_relative_columns(results, "tiny-bert")
    assert bert["speedup"] == 1.0
    assert albert["speedup"] == pytest.approx(
        albert["examples_per_second"] / bert["examples_per_second"])
    assert albert["allreduce_bytes_ratio"] == pytest.approx(
        bert["allreduce_bytes_per_step"] / albert["allreduce_bytes_per_step"])
    report = {"settings": {**dataclasses.asdict(SETTINGS), "precision": "float32"},
              "reference": "tiny-bert", "workers": [1], "results": results,
              "machine": speed.machine_description(SETTINGS, results),
              "paper_orderings": {"1": speed.paper_orderings(results, 1)}, "wall_seconds": 1.0}
    assert report["machine"]["tensorflow"]
    markdown = speed.format_markdown(report)
    assert "| tiny-albert | 2 | 32 | 16 | all-shared |" in markdown
    assert "| tiny-bert | 2 | 32 | 32 | not-shared |" in markdown


def _row(model, workers, examples_per_second, gradients, paper=None):
    return {"model": model, "workers": workers, "examples_per_second": examples_per_second,
            "allreduce_bytes_per_step": gradients, "paper_speedup": paper}


def test_relative_columns_come_from_the_measured_numbers_of_the_same_worker_count():
    results = [_row("bert-large", 1, 2.0, 400, 1.0), _row("albert-large", 1, 3.0, 20, 1.7),
               _row("bert-base", 1, 1.0, 100, 4.7),
               _row("albert-large", 2, 4.5, 20, 1.7),
               {"model": "bert-large", "workers": 2, "not_measured": "skipped: memory",
                "paper_speedup": 1.0}]
    speed.add_relative_columns(results, "bert-large")
    bert_large, albert_large, bert_base, albert_large_2, _ = results
    assert bert_large["speedup"] == 1.0
    assert albert_large["speedup"] == pytest.approx(1.5)
    assert bert_base["speedup"] == pytest.approx(0.5)
    assert albert_large["allreduce_bytes_ratio"] == pytest.approx(20.0)
    # No BERT-large on 2 workers: no speed-up there, but bytes do not depend on the workers.
    assert albert_large_2["speedup"] is None
    assert albert_large_2["allreduce_bytes_ratio"] == pytest.approx(20.0)
    assert albert_large_2["over_one_process"] == pytest.approx(1.5)
    assert albert_large["over_one_process"] is None
    orderings = speed.paper_orderings(results, 1)
    assert sorted(orderings["held"]) == ["albert-large > bert-large"]
    assert sorted(orderings["reversed"]) == ["bert-base > albert-large", "bert-base > bert-large"]


def test_several_workers_are_skipped_when_the_one_process_peak_says_they_cannot_fit():
    gib = 2 ** 30
    results = [dict(_row("bert-large", 1, 1.0, gib), peak_memory_bytes_per_worker=12 * gib)]
    assert speed.memory_shortfall("bert-large", 1, results, 1 * gib) is None
    assert speed.memory_shortfall("bert-large", 2, results, 40 * gib) is None
    assert speed.memory_shortfall("bert-base", 2, results, 1 * gib) is None  # nothing to judge
    reason = speed.memory_shortfall("bert-large", 2, results, 20 * gib)
    assert "2 workers need about 27.0 GiB" in reason and "20.0 GiB is available" in reason


@pytest.mark.slow
def test_one_process_and_two_workers_run_in_their_own_processes():
    model = speed.SpeedModel("tiny-albert", TINY_ALBERT, None)
    lines = []
    report = speed.measure_models([model], SETTINGS, [1, 2], reference="tiny-albert",
                                  log=lines.append)
    alone, workers = report["results"]
    assert alone["strategy"] == "OneDeviceStrategy"
    assert (alone["workers"], alone["replicas"], alone["threads_per_worker"]) == (1, 1, 2)
    assert workers["strategy"] == "MultiWorkerMirroredStrategy"
    assert (workers["workers"], workers["replicas"], workers["threads_per_worker"]) == (2, 2, 1)
    for row in (alone, workers):
        assert row["examples_per_second"] > 0 and row["speedup"] == 1.0
    assert workers["over_one_process"] == pytest.approx(
        workers["examples_per_second"] / alone["examples_per_second"])
    assert workers["allreduce_bytes_per_step"] == alone["allreduce_bytes_per_step"]
    assert any("tiny-albert on 2 workers x 1 thread:" in line for line in lines)


def _error_lines(capsys):
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("ERROR:")]


@pytest.mark.parametrize("flags, message", [
    (["--models=bert-base,gpt-2"], "unknown model 'gpt-2'"),
    (["--workers=1,x"], "--workers=1,x"),
    (["--workers=3"], "--batch_size=8 does not split between 3 workers"),
    (["--seq_length=8", "--max_predictions_per_seq=7"], "does not fit --seq_length=8"),
    (["--steps=0"], "--steps must be at least 1"),
])
def test_bad_flags_end_with_one_error_line(tmp_path, capsys, flags, message):
    output = tmp_path / "speed.json"
    assert main(["speed", *flags, f"--output={output}"]) == 1
    errors = _error_lines(capsys)
    assert len(errors) == 1 and message in errors[0]
    assert not output.exists()


@pytest.mark.parametrize("existing", ["speed.json", "speed.md"])
def test_an_existing_output_is_not_overwritten(tmp_path, capsys, existing):
    (tmp_path / existing).write_text("kept")
    assert main(["speed", f"--output={tmp_path / 'speed.json'}"]) == 1
    errors = _error_lines(capsys)
    assert len(errors) == 1 and "exists; it is not overwritten" in errors[0]
    assert (tmp_path / existing).read_text() == "kept"


def test_the_command_line_writes_json_and_markdown_with_the_command(tmp_path, monkeypatch):
    """The CLI end to end, each measurement's processes replaced by a fixed result."""
    launched = []

    def measure_model(model, settings, workers, scratch):
        launched.append((model.name, workers, settings.batch_size))
        worker = {"trainable_parameters": 1000, "allreduce_bytes_per_step": 4000,
                  "embedding_projection": True, "attention_blocks": 1, "ffn_blocks": 1,
                  "strategy": "OneDeviceStrategy", "replicas": 1, "jit_compile": False,
                  "tensorflow": "2.x", "timed_seconds": 2.0, "timed_cpu_seconds": 4.0,
                  "seconds_per_step_each_call": [1.0, 1.0], "warmup_seconds": 3.0,
                  "peak_memory_bytes": 2 ** 30}
        return speed._model_result(model, settings, workers, 2, [worker])

    monkeypatch.setattr(speed, "measure_model", measure_model)
    output = tmp_path / "results" / "speed.json"
    assert main(["speed", "--models=albert-base", "--workers=1", "--steps=2",
                 f"--output={output}"]) == 0
    assert launched == [("albert-base", 1, 8)]
    report = json.loads(output.read_text())
    assert report["command"] == (
        "python -m albert.paper speed --models=albert-base --batch_size=8 --seq_length=64 "
        "--max_predictions_per_seq=10 --warmup_steps=1 --steps=2 --workers=1 --threads=0 "
        f"--vocab_size=30000 --output={output}")
    (row,) = report["results"]
    assert row["model"] == "albert-base" and row["paper_speedup"] == 5.6
    assert row["examples_per_second"] == pytest.approx(8.0)  # 2 steps of 8 in 2 s
    assert row["speedup"] is None  # BERT-large was not measured
    assert report["machine"]["cores"] >= 1 and report["machine"]["date"]
    markdown = (tmp_path / "results" / "speed.md").read_text()
    assert report["command"] in markdown
    assert "| ALBERT-base | 12 | 768 | 128 | all-shared |" in markdown
    assert "BERT-large was not measured" in markdown
