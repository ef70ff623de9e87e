"""`python -m albert.paper reproduce`: the tables' cells, scales, and a small run that is killed and resumed."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from albert.checkpoints.naming import count_parameters
from albert.paper import parameter_rows
from albert.paper.__main__ import main
from albert.paper.scales import SCALES
from albert.paper.tables import DOWNSTREAM_COLUMNS, TABLES
from conftest import REPO
from glue_fixtures import write_glue
from scripts import run_script

# The paper's variants, written out by hand from its tables.
PAPER_VARIANTS = {
    3: [(sharing, e) for sharing in ("not-shared", "all-shared") for e in ("64", "128", "256", "768")],
    4: [(e, strategy) for e in ("768", "128")
        for strategy in ("all-shared", "shared-attention", "shared-FFN", "not-shared")],
    5: [("None",), ("NSP",), ("SOP",)],
    8: [("with",), ("without",)],
    11: [(layers,) for layers in ("1", "3", "6", "12", "24", "48")],
    12: [(hidden,) for hidden in ("1024", "2048", "4096", "6144")],
}
# The `albert.paper params` row of each cell (tables with a parameter column).
PARAMS_ROW = {
    3: lambda keys: ("Table 3", f"ALBERT-base {keys['sharing']} E={keys['E']}"),
    4: lambda keys: ("Table 4", f"ALBERT-base E={keys['E']} {keys['strategy']}"),
    5: lambda keys: ("Table 1", "ALBERT-base"),
    8: lambda keys: ("Table 1", "ALBERT-xxlarge"),
    11: lambda keys: ("Table 11", f"ALBERT-large L={keys['layers']}"),
    12: lambda keys: ("Table 12", f"H={keys['hidden']}"),
}


def test_every_table_has_the_papers_cells_with_the_parameter_counts_of_albert_paper_params():
    rows = {(row.table, row.config): row for row in parameter_rows()}
    assert sorted(TABLES) == sorted(PAPER_VARIANTS)
    for number, table in TABLES.items():
        assert [tuple(value for _, value in cell.keys) for cell in table.cells] == PAPER_VARIANTS[number]
        for cell in table.cells:
            row = rows[PARAMS_ROW[number](dict(cell.keys))]
            assert count_parameters(cell.paper_config()) == row.ours, (number, cell.label)
            if number in (3, 4, 12):
                assert cell.paper_params == row.paper, (number, cell.label)
    assert [cell.sentence_task for cell in TABLES[5].cells] == ["None", "NSP", "SOP"]
    assert [cell.paper_config().hidden_dropout_prob for cell in TABLES[8].cells] == [0.1, 0.0]
    depth = TABLES[11].cells
    assert depth[0].warm_start_from is None
    assert all(cell.warm_start_from is previous for previous, cell in zip(depth, depth[1:]))
    # Cells describing the same run share it (E=128 all-shared SOP is in Tables 3, 4 and 5).
    shared = {cell.run_name for number in (3, 4, 5) for cell in TABLES[number].cells
              if cell.label in ("sharing=all-shared, E=128", "E=128, strategy=all-shared",
                                "SP task=SOP")}
    assert len(shared) == 1


def _average(paper: dict) -> float:
    """The paper's Avg: SQuAD F1/EM pairs averaged, then the mean with MNLI, SST-2, RACE."""
    squad = [sum(map(float, paper[column].split("/"))) / 2 for column in ("SQuAD1.1", "SQuAD2.0")]
    return (sum(squad) + sum(float(paper[column]) for column in ("MNLI", "SST-2", "RACE"))) / 5


def test_the_transcribed_paper_numbers_reproduce_their_own_averages():
    for number, table in TABLES.items():
        for cell in table.cells:
            paper = dict(cell.paper)
            assert set(DOWNSTREAM_COLUMNS) <= set(paper)
            assert abs(_average(paper) - float(paper["Avg"])) <= 0.051, (number, cell.label)
    sop = dict(TABLES[5].cells[2].paper)
    assert (sop["MLM acc"], sop["NSP acc"], sop["SOP acc"]) == ("54.0", "78.9", "86.5")


def test_scales_shrink_widths_and_depth_but_keep_heads_and_sharing():
    tiny, paper = SCALES["tiny"], SCALES["paper"]
    not_shared = TABLES[4].cells[3].paper_config()  # E=768 not-shared, 12 layers
    small = tiny.config(not_shared)
    assert (small.hidden_size, small.embedding_size, small.intermediate_size) == (96, 96, 384)
    assert (small.num_hidden_layers, small.num_hidden_groups, small.num_attention_heads) == (6, 6, 12)
    assert small.vocab_size == tiny.vocab_size
    depths = [tiny.config(cell.paper_config()).num_hidden_layers for cell in TABLES[11].cells]
    assert depths == sorted(set(depths))  # still six different depths, in order
    assert paper.config(not_shared) == not_shared
    # The CPU scale sets fewer, wider heads; sharing and E / H stay the paper's.
    cpu = SCALES["cpu"].config(not_shared)
    assert (cpu.hidden_size, cpu.num_hidden_layers, cpu.num_hidden_groups,
            cpu.num_attention_heads) == (128, 4, 4, 4)
    assert cpu.hidden_size % cpu.num_attention_heads == 0
    assert SCALES["cpu"].config(TABLES[5].cells[2].paper_config()).embedding_size == 128 // 6
    assert (paper.train_batch_size, paper.max_seq_length, paper.num_train_steps,
            paper.learning_rate) == (4096, 512, 125000, 0.00176)


def test_cpu_scale_pretrains_in_bfloat16_only_where_this_cpu_has_it(tmp_path, monkeypatch):
    from albert.paper import reproduce
    from albert.training import cpu_features

    cell = TABLES[5].cells[2]
    for native, expected in ((True, "mixed_bfloat16"), (False, "none")):
        monkeypatch.setattr(cpu_features, "has_native_bfloat16", lambda native=native: native)
        commands = {name: reproduce.Reproduction(str(tmp_path), SCALES[name], "c", "h",
                                                 execute=False).pretraining_command(cell)
                    for name in ("cpu", "tiny")}
        assert f"--mixed_precision={expected}" in commands["cpu"]
        assert not any(arg.startswith("--mixed_precision") for arg in commands["tiny"])


def test_seeds_run_into_their_own_directories_with_their_own_seed_and_warm_start(tmp_path):
    from albert.paper import reproduce

    runner = reproduce.Reproduction(str(tmp_path), SCALES["cpu"], "c", "h", execute=False,
                                    seeds=2)
    warm = next(cell for cell in TABLES[11].cells if cell.warm_start_from is not None)
    first, second = runner.pretraining_command(warm, 1), runner.pretraining_command(warm, 2)
    # Seed 1 is the single-seed run, unchanged: earlier tables count as their first seed.
    assert runner.run_dir(warm, 1) == str(tmp_path / "runs" / warm.run_name)
    assert not any(arg.startswith("--random_seed") for arg in first)
    assert "--random_seed=2" in second
    assert f"--output_dir={runner.run_dir(warm, 2)}/pretraining" in second
    assert f"--init_checkpoint={runner.final_checkpoint(warm.warm_start_from, 2)}" in second
    assert runner.run_dir(warm, 2).endswith(f"{warm.run_name}-seed2")


def test_a_cells_seeds_pool_into_one_margin_with_a_document_interval():
    from albert.paper.reproduce import pool_seeds

    rng = np.random.default_rng(0)

    def seed_result(seed, rate):
        documents = np.arange(40)
        pairs = rng.integers(5, 15, 40)
        label_one = np.array([rng.integers(0, n + 1) for n in pairs])
        correct = np.round(pairs * rate).astype(int)
        counts = {"documents": documents.tolist(), "pairs": pairs.tolist(),
                  "correct": correct.tolist(), "label_one": label_one.tolist()}
        tokens = pairs * 3
        masked = {"documents": documents.tolist(), "tokens": tokens.tolist(),
                  "correct": np.round(tokens * 0.1 * seed).tolist()}
        return {"cell": "SOP", "random_seed": seed, "downstream": {}, "commands": [],
                "intrinsic": {"MLM acc": 0.1 * seed, "NSP acc": rate, "SOP acc": rate,
                              "documents": {"NSP acc": counts, "SOP acc": counts},
                              "masked_lm_documents": masked}}

    pooled = pool_seeds([seed_result(1, 0.6), seed_result(2, 0.7)])
    assert pooled["intrinsic"]["MLM acc"] == pytest.approx(0.15)
    assert len(pooled["seeds"]) == 2
    margin = pooled["pooled_margins"]["NSP acc"]
    assert margin["seeds"] == 2 and margin["documents"] == 40
    low, high = margin["margin_ci95"]
    assert low < margin["margin"] < high
    masked = pooled["pooled_masked_lm"]
    assert masked["seeds"] == 2 and masked["accuracy"] == pytest.approx(0.15, abs=0.01)
    low, high = masked["accuracy_ci95"]
    assert 0.1 - 0.01 < low < masked["accuracy"] < high < 0.2 + 0.01
    # These seeds' sets differ (as when records are made again from changed text between
    # runs): each seed's pairs are kept and the table's note shows them.
    from albert.paper.report import _interval_note

    seed_pairs = [sum(seed["intrinsic"]["documents"]["NSP acc"]["pairs"])
                  for seed in pooled["seeds"]]
    assert margin["seed_pairs"] == seed_pairs and seed_pairs[0] != seed_pairs[1]
    note = _interval_note({"cell": "SOP", "margins": {"NSP acc": margin},
                           "seed_margins": {"NSP acc": [0.1, 0.2]}})
    assert (f"{seed_pairs[0]:,} / {seed_pairs[1]:,} pairs (the seeds' held-out sets differ)"
            in note)
    alike = pool_seeds([seed_result(1, 0.6)] * 2)["pooled_margins"]["NSP acc"]
    assert "differ" not in _interval_note({"cell": "SOP", "margins": {"NSP acc": alike},
                                           "seed_margins": {}})


def test_runs_finished_before_masked_lm_counts_get_them_once(tmp_path, monkeypatch, capsys):
    from albert.paper import reproduce

    runner = reproduce.Reproduction(str(tmp_path), SCALES["tiny"], "corpus.txt", "heldout.txt")
    cell = TABLES[5].cells[2]
    run_dir = tmp_path / "runs" / cell.run_name
    (run_dir / "pretraining").mkdir(parents=True)
    documents = np.array([3, 3, 7, 9])
    sentence = {"documents": [3, 7, 9], "pairs": [2, 1, 1], "correct": [1, 1, 0],
                "label_one": [1, 0, 1]}
    old = {"MLM acc": 0.25, "NSP acc": 0.5, "SOP acc": 0.5,
           "documents": {"NSP acc": sentence, "SOP acc": sentence}}
    (run_dir / "intrinsic.json").write_text(json.dumps(old))
    (run_dir / "result.json").write_text(json.dumps({"cell": cell.label, "intrinsic": old}))
    passes = []

    def predictions(checkpoint, config, records, batch_size):
        passes.append(records)
        return reproduce.RecordPredictions(
            labels=np.array([1, 0, 0, 1]), predicted=np.array([1, 1, 0, 0]),
            masked_tokens=np.array([2.0, 3.0, 1.0, 2.0]),
            masked_correct=np.array([1.0, 0.0, 1.0, 0.0]))

    monkeypatch.setattr(reproduce, "read_record_documents", lambda path: documents)
    monkeypatch.setattr(reproduce, "record_predictions", predictions)
    # The final checkpoint is gone: a warning, and the result stays as it was.
    assert runner.run_cell(cell, 1, 1)["intrinsic"] == old
    assert "is gone" in capsys.readouterr().err and not passes
    checkpoint = runner.final_checkpoint(cell) + ".index"
    open(checkpoint, "w").close()
    result = runner.run_cell(cell, 1, 1)
    masked = result["intrinsic"]["masked_lm_documents"]
    assert masked == {"documents": [3, 7, 9], "tokens": [5.0, 1.0, 2.0],
                      "correct": [1.0, 1.0, 0.0]}
    assert json.loads((run_dir / "result.json").read_text())["intrinsic"] == result["intrinsic"]
    assert len(passes) == 2  # one pass over each held-out set
    assert runner.run_cell(cell, 1, 1) == result and len(passes) == 2  # kept: not done again


def _text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def test_paper_scale_writes_runnable_commands_and_runs_nothing(tmp_path, synthetic_corpus, capsys):
    corpus, _ = synthetic_corpus
    output = tmp_path / "paper"
    assert main(["reproduce", "--table=4", "--scale=paper", f"--corpus={corpus}",
                 f"--heldout={corpus}", f"--output_dir={output}"]) == 0
    assert "nothing was run" in capsys.readouterr().out
    commands = _text(output / "table4-commands.sh")
    pretraining = [line for line in commands.splitlines() if "run_pretraining.py" in line]
    assert len(pretraining) == 8
    for flag in ("--train_batch_size=4096", "--num_train_steps=125000", "--learning_rate=0.00176",
                 "--num_warmup_steps=3125", "--optimizer=lamb"):
        assert all(flag in line for line in pretraining), flag
    assert "--max_seq_length=512" in commands and "--vocab_size=30000" in commands
    assert "run_classifier.py --task_name=SST-2" in commands  # Table 14 fine-tuning settings
    config = json.loads(_text(output / "runs" / TABLES[4].cells[1].run_name / "albert_config.json"))
    assert (config["hidden_size"], config["embedding_size"], config["num_hidden_layers"]) == (768, 768, 12)
    assert not list(output.glob("data/*.tfrecord")) and not list(output.glob("runs/*/pretraining"))


def test_user_mistakes_get_one_error_line(tmp_path, synthetic_corpus, capsys):
    corpus, _ = synthetic_corpus
    base = ["reproduce", "--table=5", f"--corpus={corpus}", f"--heldout={corpus}"]
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    cases = [
        (["reproduce", "--table=5", "--corpus=missing.txt", f"--heldout={corpus}",
          f"--output_dir={tmp_path / 'a'}"], "--corpus=missing.txt is not a file"),
        ([*base, f"--output_dir={tmp_path / 'b'}", "--cells=SP task=MLM"], "no cell 'SP task=MLM'"),
        ([*base, f"--output_dir={occupied}", "--glue_dir=none"], "is not empty"),
    ]
    for argv, message in cases:
        assert main(argv) == 1
        error = capsys.readouterr().err
        assert error.startswith("ERROR:") and message in error and error.count("\n") == 1, error
    assert (occupied / "notes.txt").read_text() == "mine" and len(list(occupied.iterdir())) == 1
    # One scale per directory: a second scale is refused, the first one's files untouched.
    assert main([*base, f"--output_dir={tmp_path / 'c'}", "--scale=paper", "--glue_dir=none"]) == 0
    manifest = _text(tmp_path / "c" / "reproduce.json")
    assert main([*base, f"--output_dir={tmp_path / 'c'}", "--scale=base", "--glue_dir=none"]) == 1
    assert "other scale" in capsys.readouterr().err
    assert _text(tmp_path / "c" / "reproduce.json") == manifest


def _reproduce_command(corpus, heldout, model, glue, output):
    return [sys.executable, "-m", "albert.paper", "reproduce", "--table=5", "--scale=tiny",
            f"--corpus={corpus}", f"--heldout={heldout}", f"--spm_model_file={model}",
            f"--glue_dir={glue}", f"--output_dir={output}", "--cells=SP task=None;SP task=SOP",
            "--num_train_steps=8", "--train_batch_size=8", "--finetuning_steps=2"]


# slow (about 4 minutes): the default suite keeps the runner's parts (commands, mistakes, the
# report of stuck runs) and the Ctrl-C test, which runs a reproduction into its pretraining step.
@pytest.mark.slow
def test_a_two_cell_table_completes_resumes_after_a_kill_and_reports(tmp_path, synthetic_corpus):
    corpus, model = synthetic_corpus
    glue = tmp_path / "glue"
    write_glue(str(tmp_path / "all_glue"))
    shutil.copytree(tmp_path / "all_glue" / "SST-2", glue / "SST-2")
    output = tmp_path / "tiny"
    none_cell, sop_cell = TABLES[5].cells[0], TABLES[5].cells[2]
    env = dict(os.environ, PYTHONPATH=REPO)
    # A held-out set of 40 of the corpus's 400 documents: every checkpoint is evaluated on it,
    # and on a loaded CI machine the whole corpus made evaluation most of the test's time.
    heldout = tmp_path / "heldout.txt"
    documents = _text(corpus).split("\n\n")
    heldout.write_text("\n\n".join(documents[:40]) + "\n", encoding="utf-8")
    command = _reproduce_command(corpus, heldout, model, glue, output)

    # First run: killed (with its children) once the second cell has its first checkpoint.
    log = open(tmp_path / "first.log", "w")
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    # Resumable once listed in the `checkpoint` state file, which is written after the files:
    # a kill between the two leaves files the next run does not resume from (they are written
    # again), so waiting for the index file alone made this test flaky.
    state = output / "runs" / sop_cell.run_name / "pretraining" / "checkpoint"

    def listed():
        try:
            return '"model.ckpt-4"' in state.read_text()
        except FileNotFoundError:
            return False

    # The loop also ends when the process does; the deadline only stops a hung run.
    deadline = time.time() + 1800
    while not listed() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert listed(), _text(tmp_path / "first.log")
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    log.close()
    assert (output / "runs" / none_cell.run_name / "result.json").exists()
    assert not (output / "runs" / sop_cell.run_name / "result.json").exists()
    first_result = _text(output / "runs" / none_cell.run_name / "result.json")

    second = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "SP task=None: finished earlier" in second.stdout
    assert "Resumed from" in second.stderr  # run_pretraining.py continued the killed cell
    assert _text(output / "runs" / none_cell.run_name / "result.json") == first_result
    steps = [json.loads(line)["step"] for line in
             _text(output / "runs" / sop_cell.run_name / "pretraining" / "train_log.jsonl").splitlines()]
    assert steps == list(range(1, 9))

    report = json.loads(_text(output / "table5.json"))
    assert [row["cell"] for row in report["rows"]] == ["SP task=None", "SP task=SOP"]
    for row in report["rows"]:
        assert row["paper"]["MLM acc"] in ("54.9", "54.0") and row["paper"]["params"] == "12M"
        for column in ("MLM acc", "NSP acc", "SOP acc", "SST-2"):
            assert 0 <= float(row["ours"][column]) <= 100
        for column in ("SQuAD1.1", "SQuAD2.0", "MNLI", "RACE", "Avg"):
            assert row["ours"][column] == "no data"
        assert any("run_pretraining.py" in line for line in row["commands"])
        assert any("run_classifier.py --task_name=SST-2" in line for line in row["commands"])
    none_row = report["rows"][0]
    assert "--nosentence_objective" in " ".join(none_row["commands"])
    # Without a sentence objective the sentence head is never updated (and Keras does not warn).
    import tensorflow as tf

    head = [tf.train.load_checkpoint(str(output / "runs" / none_cell.run_name / "pretraining" /
                                         f"model.ckpt-{step}")).get_tensor(
        "cls/seq_relationship/output_weights") for step in (4, 8)]
    assert (head[0] == head[1]).all()
    assert "Gradients do not exist" not in second.stderr + _text(tmp_path / "first.log")
    intrinsic = json.loads(_text(output / "runs" / sop_cell.run_name / "intrinsic.json"))
    assert intrinsic["heldout_sop"]["examples"] > 0 and intrinsic["heldout_nsp"]["examples"] > 0
    # The per-document masked-token counts add up to the library's masked-LM accuracy.
    masked = intrinsic["masked_lm_documents"]
    assert sum(masked["correct"]) / sum(masked["tokens"]) == pytest.approx(
        intrinsic["MLM acc"], abs=1e-6)
    sop_documents = intrinsic["documents"]["SOP acc"]
    assert masked["documents"] == sop_documents["documents"]
    assert sum(sop_documents["pairs"]) == intrinsic["heldout_sop"]["examples"]
    (difference,) = report["masked_lm_differences"]
    assert difference["cells"] == ["SP task=None", "SP task=SOP"]
    assert difference["differs_in"] == "SP task" and difference["seeds"] == [1, 1]
    assert difference["difference"] == pytest.approx(
        report["rows"][0]["intrinsic"]["MLM acc"] - report["rows"][1]["intrinsic"]["MLM acc"],
        abs=1e-6)
    # `python -m albert.paper evaluate` gives any checkpoint the cells' intrinsic evaluation.
    run_dir = output / "runs" / sop_cell.run_name
    held_out = [str(output / "data" / f"heldout-{kind}.tfrecord") for kind in ("nsp", "sop")]
    evaluated = run_script(
        "-m", "albert.paper", "evaluate", f"--albert_config_file={run_dir / 'albert_config.json'}",
        f"--checkpoints={run_dir / 'pretraining' / 'model.ckpt-8'}",
        f"--records={','.join(held_out)}", f"--output={tmp_path / 'evaluated.json'}")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    rows = json.loads(_text(tmp_path / "evaluated.json"))
    assert [row["records"] for row in rows] == held_out
    for row, kind in zip(rows, ("nsp", "sop")):
        expected = intrinsic[f"heldout_{kind}"]
        for key in ("masked_lm_accuracy", "sentence_order_accuracy", "examples"):
            assert row[key] == pytest.approx(expected[key], abs=1e-6), (kind, key)
        recall = row["recall_by_label"]  # the recalls, weighted by label shares, give accuracy
        ones = row["sentence_order_label_one"]
        assert (1 - ones) * recall["0"] + ones * recall["1"] == pytest.approx(
            row["sentence_order_accuracy"])
    again = run_script(*evaluated.args[1:])
    assert again.returncode == 1 and again.stderr.strip().splitlines()[-1].startswith(
        "ERROR: --output=") and "not overwritten" in again.stderr
    assert json.loads(_text(tmp_path / "evaluated.json")) == rows
    markdown = _text(output / "table5.md")
    assert "| SOP | paper | 12M | 54.0 | 78.9 | 86.5 | 89.3/82.3 |" in markdown
    assert "| SOP | ours |" in markdown and "![Table 5](table5.png)" in markdown
    assert "Chance on our held-out sets" in markdown and "not the GLUE tasks" not in markdown
    assert "resamples whole held-out documents" in markdown and "standard error" not in markdown
    assert "## Masked-LM differences between cells" in markdown
    assert "SP task=SOP: MLM acc " in markdown
    for row in report["rows"]:  # sentence accuracies against each set's majority share
        # Records with a documents file: margins with document-level intervals, not SEs.
        assert row["above_chance"] == {} and set(row["margins"]) == {"NSP acc", "SOP acc"}
        assert f"{row['cell']}: NSP margin " in markdown
    with open(output / "table5.png", "rb") as handle:
        assert handle.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_cells_stuck_run_and_one_label_heads_are_named_in_the_report(tmp_path):
    from albert.paper.report import run_findings

    journal = tmp_path / "pretraining" / "eval_results.json"
    journal.parent.mkdir()
    journal.write_text(json.dumps({"evaluations": [], "findings": [
        {"kind": "unigram_plateau", "step": 300, "steps": 300, "unigram_loss": 6.31,
         "masked_lm_loss": 6.35, "margin": 0.1, "message": "..."}]}))
    intrinsic = {"heldout_nsp": {"sentence_order_predicted_one": 1.0},
                 "heldout_sop": {"sentence_order_predicted_one": 0.42}}
    found = run_findings(str(tmp_path), intrinsic)
    assert found == ["masked LM stuck at the unigram loss (6.31 nats) for 300 steps, reported at "
                     "step 300", "sentence head answers label 1 for every pair of the held-out "
                     "NSP set"]
    journal.unlink()
    assert run_findings(str(tmp_path), {"heldout_sop": {"sentence_order_predicted_one": 0.5}}) == []


def test_dropout_trains_the_cells_again_without_it_into_runs_of_their_own(
        tmp_path, synthetic_corpus, capsys):
    corpus, _ = synthetic_corpus
    output = tmp_path / "paper"
    base = ["reproduce", "--table=4", "--scale=paper", f"--corpus={corpus}", f"--heldout={corpus}",
            f"--output_dir={output}", "--glue_dir=none", "--cells=E=768, strategy=all-shared"]
    assert main([*base, "--dropout=0"]) == 0
    assert "nothing was run" in capsys.readouterr().out
    run = TABLES[4].cells[0].run_name.replace("-dropout0.1", "-dropout0")
    assert run.endswith("-E768-all-shared-SOP-dropout0")
    assert [path.name for path in (output / "runs").iterdir()] == [run]
    config = json.loads(_text(output / "runs" / run / "albert_config.json"))
    assert config["hidden_dropout_prob"] == config["attention_probs_dropout_prob"] == 0.0
    commands = _text(output / "table4-dropout0-commands.sh")
    assert f"runs/{run}/pretraining" in commands and "dropout0.1" not in commands
    assert not (output / "table4-commands.sh").exists()
    assert main([*base, "--dropout=1.5"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("ERROR:") and "--dropout must be in [0, 1)" in error
    assert error.count("\n") == 1


def test_layers_trains_the_cells_at_another_depth_with_portable_commands(
        tmp_path, synthetic_corpus, capsys, monkeypatch):
    corpus, _ = synthetic_corpus
    output = tmp_path / "paper"
    base = ["reproduce", "--table=4", "--scale=cpu", f"--corpus={corpus}", f"--heldout={corpus}",
            f"--output_dir={output}", "--glue_dir=none",
            "--cells=E=768, strategy=all-shared;E=768, strategy=not-shared"]
    # Commands only: the cpu scale would train; as the paper scale, it writes configs and commands.
    monkeypatch.setitem(SCALES, "cpu", dataclasses.replace(SCALES["cpu"], runs_by_default=False))
    assert main([*base, "--layers=36"]) == 0
    capsys.readouterr()
    names = sorted(path.name for path in (output / "runs").iterdir())
    assert names == ["base-L36-H768-E768-all-shared-SOP-dropout0.1",
                     "base-L36-H768-E768-not-shared-SOP-dropout0.1"]
    for name, groups in zip(names, (1, 12)):
        config = json.loads(_text(output / "runs" / name / "albert_config.json"))
        assert (config["num_hidden_layers"], config["num_hidden_groups"],
                config["hidden_size"]) == (12, groups, 128)  # ceil(36 / 3) layers at H/6
    commands = _text(output / "table4-layers36-commands.sh")
    assert "runs/base-L36-H768-E768-all-shared-SOP-dropout0.1/pretraining" in commands
    # Repeatable elsewhere: no interpreter or directory of this machine, paths from the repo root.
    steps = commands.split("set -e\n", 1)[1]
    assert sys.executable not in steps and not re.search(r"(^|[ =])/", steps, re.M), steps
    assert "\npython run_pretraining.py --albert_config_file=" in commands
    assert main([*base, "--layers=0"]) == 1
    error = capsys.readouterr().err
    assert error.startswith("ERROR:") and "--layers must be at least 1" in error
