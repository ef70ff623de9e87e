"""Runs the cells of a paper table through the project's own scripts.

Layout of --output_dir (one scale per directory):

    reproduce.json             the scale, corpus, held-out text and vocabulary of this directory
    vocab/ data/               SentencePiece model; training and held-out NSP / SOP records
    glue-demo/                 the demo's GLUE-format tasks (when --glue_dir=demo)
    runs/<run name>/           one directory per cell:
        albert_config.json settings.json commands.sh
        pretraining/           run_pretraining.py's output directory
        intrinsic.json         MLM / NSP / SOP accuracy on the held-out sets
        finetuning-<TASK>/     run_classifier.py's output directory, per GLUE task
        result.json            written last: the cell is finished
    table<N>.md .json .png     the report (albert.paper.report)

Every step is a command a user could type (printed, and kept in
`commands.sh`); a finished cell (result.json) is skipped on re-run and a
killed one resumes, because run_pretraining.py and run_classifier.py resume
from their latest checkpoint.
"""

import contextlib
import dataclasses
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from albert import io
from albert.checkpoints import assign_model_weights, read_checkpoint
from albert.checkpoints.keras_format import build_model
from albert.checkpoints.naming import count_parameters
from albert.errors import InputError, RunInterrupted, RunPreempted
from albert.finetuning_data.glue import TASKS
from albert.paper.scales import Scale, scale_settings
from albert.paper.tables import Cell, Table
from albert.pretraining_data.inputs import PretrainingParser
from albert.evaluation.document_bootstrap import (DocumentCounts, MaskedTokenCounts,
                                                  document_counts, margin_summary,
                                                  masked_lm_summary, masked_token_counts)
from albert.pretraining_data.schema import load_data_contract, read_record_documents
from albert.tasks.pretraining import PretrainingTask
from albert.tokenization import load_tokenizer
from albert.training.cpu_features import resolve_mixed_precision
from albert.training.loop import TrainerConfig

logger = logging.getLogger("albert")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = "reproduce.json"
RESULT = "result.json"
# Key of intrinsic.json / result.json: the MLM acc column's per-document masked-token counts.
MASKED_LM_DOCUMENTS = "masked_lm_documents"
# Tasks of --glue_dir that fill a column of the paper's tables; others are reported beside them.
PAPER_GLUE_TASKS = {"mnli": "MNLI", "sst-2": "SST-2"}
# How long an interrupted step may take to stop on its own before it is killed.
STEP_STOP_SECONDS = 60


class StepFailed(InputError):
    """A script run by the reproduction failed (its own error is printed above)."""


def _step_name(command: List[str]) -> str:
    """The script or module a step runs: `run_pretraining.py`, `albert.datasets`."""
    return shlex.quote(command[2] if command[1] == "-m" else command[1])


@contextlib.contextmanager
def _terminations_forwarded():
    """While a step runs, a SIGTERM to this runner goes on to the step, and the runner waits for
    it: the step saves a checkpoint and ends (exit 143), where by default the runner would die
    at once and leave the step training, orphaned, into a run directory that the next
    `reproduce` would then train into as well. Yields `forward_to(process)`, called once the
    step is started (a SIGTERM that came before it is passed on then)."""
    step, received = [], []

    def forward(signum, frame):
        received.append(signum)
        if step and step[0].poll() is None:
            step[0].send_signal(signal.SIGTERM)

    def forward_to(process):
        step.append(process)
        if received:
            forward(signal.SIGTERM, None)

    if threading.current_thread() is not threading.main_thread():
        yield lambda process: None  # signal handlers can only be set in the main thread
        return
    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield forward_to
    finally:
        signal.signal(signal.SIGTERM, previous)


@dataclasses.dataclass
class Reproduction:
    output_dir: str
    scale: Scale
    corpus: str
    heldout: str
    spm_model_file: Optional[str] = None
    glue_dir: Optional[str] = None
    python: str = sys.executable
    execute: bool = True  # False: write configs and commands only
    seeds: int = 1  # trainings of every cell (seed 1 is run_pretraining.py's default seed)

    def __post_init__(self):
        self.output_dir = os.path.abspath(self.output_dir)
        self.commands: List[str] = []

    # ------------------------------------------------------------------ paths
    def path(self, *parts: str) -> str:
        return os.path.join(self.output_dir, *parts)

    @property
    def vocab_model(self) -> str:
        return self.spm_model_file or self.path("vocab", f"spm{self.scale.vocab_size}.model")

    def records(self, split: str, sentence_task: str) -> str:
        # A model without a sentence objective trains on the SOP records (labels unused).
        kind = "nsp" if sentence_task == "NSP" else "sop"
        return self.path("data", f"{split}-{kind}.tfrecord")

    def run_dir(self, cell: Cell, seed: int = 1) -> str:
        """Seed 1 keeps the single-seed directory, so earlier runs count as its first seed."""
        return self.path("runs", cell.run_name if seed == 1 else f"{cell.run_name}-seed{seed}")

    def final_checkpoint(self, cell: Cell, seed: int = 1) -> str:
        return os.path.join(self.run_dir(cell, seed), "pretraining",
                            f"model.ckpt-{self.scale.num_train_steps}")

    # ------------------------------------------------------------- commands
    def _run(self, command: List[str], log_file: Optional[str] = None) -> None:
        printable = " ".join(shlex.quote(part) for part in _portable(command, self.python))
        self.commands.append(printable)
        if log_file:
            with open(log_file, "a", encoding="utf-8") as handle:
                handle.write(printable + "\n")
        if not self.execute:
            return
        print(f"\n$ {printable}", flush=True)
        with _terminations_forwarded() as forward_to:
            process = subprocess.Popen(command, cwd=REPO)
            forward_to(process)
            try:
                returncode = process.wait()
            except KeyboardInterrupt:
                # A terminal's Ctrl-C reaches the step too: let it stop cleanly and say where
                # (subprocess.run would kill it after a quarter of a second).
                try:
                    process.wait(timeout=STEP_STOP_SECONDS)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                raise RunInterrupted(f"stopped during {_step_name(command)}; the same "
                                     "reproduce command goes on from there (finished cells are "
                                     "kept)") from None
        if returncode in (128 + signal.SIGTERM, -signal.SIGTERM):
            # SIGTERM to this runner (forwarded), to the step alone or to both (a scheduler
            # signals the whole process group): not a failure of the step, which saved a
            # checkpoint if it was training and resumes from it.
            raise RunPreempted(f"stopped during {_step_name(command)} by SIGTERM; the same "
                               "reproduce command goes on from there (finished cells are kept)")
        if returncode != 0:
            raise StepFailed(f"This step failed (exit {returncode}); fix it and run the "
                             f"same reproduce command again to continue: {printable}")

    # ----------------------------------------------------------- the manifest
    def check_manifest(self) -> None:
        """One scale and one corpus per output directory: mixing them would mix the table."""
        wanted = {"scale": scale_settings(self.scale), "corpus": self.corpus,
                  "heldout": self.heldout, "spm_model_file": self.spm_model_file}
        path = self.path(MANIFEST)
        if io.exists(path):
            found = io.read_json(path)
            differing = sorted(key for key in wanted if found.get(key) != wanted[key])
            if differing:
                raise InputError(f"{self.output_dir} holds a reproduction with other "
                                 f"{', '.join(differing)} ({path}); use another --output_dir")
            return
        if os.path.exists(self.output_dir) and not os.path.isdir(self.output_dir):
            raise InputError(f"--output_dir={self.output_dir} is a file")
        if os.path.isdir(self.output_dir) and os.listdir(self.output_dir):
            raise InputError(f"--output_dir={self.output_dir} is not empty and holds no "
                             f"{MANIFEST}; use a new or empty directory")
        os.makedirs(self.output_dir, exist_ok=True)
        io.write_json_atomically(path, wanted)

    # ------------------------------------------------------------------- data
    def prepare_data(self, cells: List[Cell]) -> None:
        os.makedirs(self.path("data"), exist_ok=True)
        os.makedirs(self.path("vocab"), exist_ok=True)
        log = self.path("data", "commands.sh")
        if not self.spm_model_file and not os.path.exists(self.vocab_model):
            self._run([self.python, "-m", "albert.tokenization", "train", f"--input={self.corpus}",
                       f"--model_prefix={self.vocab_model[:-len('.model')]}",
                       f"--vocab_size={self.scale.vocab_size}"], log)
        # Held-out sets of both kinds for every model; training sets as the cells need them.
        wanted = [("heldout", "NSP"), ("heldout", "SOP")]
        wanted += sorted({("train", "NSP" if cell.sentence_task == "NSP" else "SOP")
                          for cell in cells})
        for split, task in wanted:
            target = self.records(split, task)
            if os.path.exists(target):
                continue
            source = self.corpus if split == "train" else self.heldout
            dupe_factor = self.scale.dupe_factor if split == "train" else self.scale.heldout_dupe_factor
            command = [self.python, "create_pretraining_data.py", f"--input_file={source}",
                       f"--output_file={target}", f"--spm_model_file={self.vocab_model}",
                       f"--max_seq_length={self.scale.max_seq_length}",
                       f"--max_predictions_per_seq={self.scale.max_predictions_per_seq}",
                       f"--dupe_factor={dupe_factor}"]
            if task == "NSP":
                command.append("--random_next_sentence")
            if split == "heldout":
                # Balanced, pure pairs: a one-segment chunk would otherwise be paired with a
                # random document and labelled 1 (an NSP pair in the SOP set, a forced
                # negative in the NSP set), which moves chance away from 50%.
                command.append("--nosingle_segment_random_document")
            self._run(command, log)

    def glue_tasks(self) -> Dict[str, str]:
        """{task name: data_dir} of the GLUE-format tasks found in --glue_dir."""
        if not self.glue_dir:
            return {}

        if not self.execute and self.glue_dir == self.path("glue-demo"):
            return {"sst-2": self.glue_dir, "sts-b": self.glue_dir}  # what glue-demo will write
        found = {}
        for name, task in TASKS.items():
            if task.predict_only or name == "mismnli":
                continue
            if all(os.path.exists(os.path.join(self.glue_dir, task.directory, task.files[split]))
                   for split in ("train", "dev")):
                found[name] = self.glue_dir
        return found

    # ------------------------------------------------------------------ cells
    def cell_config(self, cell: Cell):
        config = self.scale.config(cell.paper_config())
        if self.spm_model_file:
            vocab_size = load_tokenizer(spm_model_file=self.spm_model_file).vocab_size
            config = dataclasses.replace(config, vocab_size=vocab_size)
        return config

    def _settings(self, cell: Cell, config, seed: int = 1) -> dict:
        settings = {"run_name": cell.run_name, "albert_config": config.to_dict(),
                    "sentence_task": cell.sentence_task,
                    "warm_start_from": (cell.warm_start_from.run_name if cell.warm_start_from
                                        else None),
                    "scale": scale_settings(self.scale)}
        if seed > 1:
            settings["random_seed"] = seed
        return settings

    def pretraining_command(self, cell: Cell, seed: int = 1) -> List[str]:
        scale, run_dir = self.scale, self.run_dir(cell, seed)
        command = [self.python, "run_pretraining.py",
                   f"--albert_config_file={run_dir}/albert_config.json",
                   f"--input_file={self.records('train', cell.sentence_task)}",
                   f"--eval_file={self.records('heldout', cell.sentence_task)}",
                   f"--output_dir={run_dir}/pretraining", "--do_train", "--do_eval",
                   f"--train_batch_size={scale.train_batch_size}",
                   f"--eval_batch_size={scale.eval_batch_size}", "--optimizer=lamb",
                   f"--learning_rate={scale.learning_rate}",
                   f"--num_train_steps={scale.num_train_steps}",
                   f"--num_warmup_steps={scale.num_warmup_steps}",
                   f"--save_checkpoints_steps={scale.save_checkpoints_steps}",
                   "--keep_checkpoint_max=0", "--max_eval_steps=1000000"]
        if scale.width_divisor > 1:
            command.append("--steps_per_loop=50")  # small models: fewer host round trips
        if scale.mixed_precision is not None:
            command.append(f"--mixed_precision={resolve_mixed_precision(scale.mixed_precision)}")
        if cell.sentence_task == "None":
            command.append("--nosentence_objective")
        if seed > 1:
            command.append(f"--random_seed={seed}")
        if cell.warm_start_from is not None:
            command.append("--init_checkpoint="
                           + self.final_checkpoint(cell.warm_start_from, seed))
        return command

    def finetuning_command(self, cell: Cell, task: str, data_dir: str,
                           seed: int = 1) -> List[str]:
        settings = self.scale.finetuning(task)
        run_dir = self.run_dir(cell, seed)
        steps = settings["train_step"]
        return [self.python, "run_classifier.py", f"--task_name={TASKS[task].directory}",
                f"--data_dir={data_dir}", f"--albert_config_file={run_dir}/albert_config.json",
                f"--init_checkpoint={self.final_checkpoint(cell, seed)}",
                f"--spm_model_file={self.vocab_model}",
                f"--output_dir={run_dir}/finetuning-{TASKS[task].directory}",
                f"--max_seq_length={min(settings['max_seq_length'], self.scale.max_seq_length)}",
                "--do_train", "--do_eval",
                f"--train_batch_size={settings['train_batch_size']}",
                f"--learning_rate={settings['learning_rate']}", f"--train_step={steps}",
                f"--warmup_step={settings['warmup_step']}",
                f"--save_checkpoints_steps={max(1, steps // 5)}"]

    def run_cell(self, cell: Cell, index: int, total: int, seed: int = 1) -> dict:
        run_dir = self.run_dir(cell, seed)
        label = cell.label if self.seeds == 1 else f"{cell.label}, seed {seed}"
        result_path = os.path.join(run_dir, RESULT)
        if io.exists(result_path):
            print(f"[{index}/{total}] {label}: finished earlier ({result_path})", flush=True)
            result = io.read_json(result_path)
            if self.execute and not {"documents", MASKED_LM_DOCUMENTS} <= set(result["intrinsic"]):
                # Finished before runs recorded per-document counts: add them now (kept in
                # result.json, so that the next run does not look again).
                intrinsic = self.intrinsic(cell, self.cell_config(cell), seed)
                if intrinsic != result["intrinsic"]:
                    result["intrinsic"] = intrinsic
                    io.write_json_atomically(result_path, result)
            return result
        config = self.cell_config(cell)
        settings = self._settings(cell, config, seed)
        settings_path = os.path.join(run_dir, "settings.json")
        if io.exists(settings_path) and io.read_json(settings_path) != settings:
            raise InputError(f"{run_dir} was started with other settings ({settings_path}); "
                             "use another --output_dir")
        os.makedirs(run_dir, exist_ok=True)
        io.write_json_atomically(settings_path, settings)
        io.write_text_atomically(os.path.join(run_dir, "albert_config.json"),
                                 config.to_json_string())
        print(f"\n[{index}/{total}] {label}: {os.path.basename(run_dir)}", flush=True)
        log = os.path.join(run_dir, "commands.sh")
        if io.exists(log):
            os.remove(log)  # rewritten below with this run's commands
        self._run(self.pretraining_command(cell, seed), log)
        tasks = self.glue_tasks()
        for task, data_dir in tasks.items():
            self._run(self.finetuning_command(cell, task, data_dir, seed), log)
        if not self.execute:
            return {}
        result = {"cell": cell.label, "run_name": cell.run_name, "albert_config": config.to_dict(),
                  "random_seed": seed, "parameters": _parameters(config),
                  "intrinsic": self.intrinsic(cell, config, seed),
                  "downstream": {task: _best_dev_metric(
                      os.path.join(run_dir, f"finetuning-{_directory(task)}")) for task in tasks},
                  "commands": io.read_text(log).splitlines()}
        io.write_json_atomically(result_path, result)
        return result

    def intrinsic(self, cell: Cell, config, seed: int = 1) -> dict:
        """Masked-LM accuracy and sentence-pair accuracy on both held-out sets, final checkpoint,
        and per held-out document the pairs, correct answers and label-1 pairs (`documents`,
        when the records have a documents file) that document-level intervals resample."""
        path = os.path.join(self.run_dir(cell, seed), "intrinsic.json")
        checkpoint = self.final_checkpoint(cell, seed)
        if io.exists(path):
            metrics = io.read_json(path)
        else:
            nsp = evaluate_checkpoint(checkpoint, config, self.records("heldout", "NSP"),
                                      self.scale.eval_batch_size)
            sop = evaluate_checkpoint(checkpoint, config, self.records("heldout", "SOP"),
                                      self.scale.eval_batch_size)
            metrics = {"MLM acc": sop["masked_lm_accuracy"],
                       "NSP acc": nsp["sentence_order_accuracy"],
                       "SOP acc": sop["sentence_order_accuracy"],
                       "MLM acc (NSP held-out set)": nsp["masked_lm_accuracy"],
                       "heldout_sop": sop, "heldout_nsp": nsp}
        if "documents" not in metrics or MASKED_LM_DOCUMENTS not in metrics:
            if os.path.exists(checkpoint + ".index"):
                metrics.update(self._document_counts(checkpoint, config))
            else:
                print(f"WARNING: {checkpoint} is gone: {path} gets no per-document counts, "
                      "so this run has no document-level intervals", file=sys.stderr)
        io.write_json_atomically(path, metrics)
        return metrics

    def _document_counts(self, checkpoint: str, config) -> dict:
        """Per held-out document: each sentence set's pairs, correct answers and label-1 pairs
        (`documents`), and the SOP set's masked tokens and correct predictions (the MLM acc
        column's set); nothing when the records have no documents file."""
        documents = {kind: read_record_documents(self.records("heldout", kind))
                     for kind in ("NSP", "SOP")}
        if any(found is None for found in documents.values()):
            return {}
        predictions = {kind: record_predictions(checkpoint, config, self.records("heldout", kind),
                                                self.scale.eval_batch_size)
                       for kind in ("NSP", "SOP")}
        sentence = {f"{kind} acc": document_counts(documents[kind], found.labels, found.predicted)
                    for kind, found in predictions.items()}
        masked = masked_token_counts(documents["SOP"], predictions["SOP"].masked_tokens,
                                     predictions["SOP"].masked_correct)
        return {"documents": {column: {field: getattr(counts, field).tolist() for field in
                                       ("documents", "pairs", "correct", "label_one")}
                              for column, counts in sentence.items()},
                MASKED_LM_DOCUMENTS: {field: getattr(masked, field).tolist()
                                      for field in ("documents", "tokens", "correct")}}

    def run_table(self, table: Table, cells: List[Cell]) -> List[dict]:
        self.check_manifest()
        if self.glue_dir == "demo":
            self.glue_dir = self.path("glue-demo")
            if not os.path.exists(os.path.join(self.glue_dir, "manifest.json")):
                self._run([self.python, "-m", "albert.datasets", "glue-demo",
                           f"--output_dir={self.glue_dir}"])
        self.prepare_data(cells)
        needed = [(cell, seed) for cell in _with_warm_starts(cells)
                  for seed in range(1, self.seeds + 1)]
        by_cell: Dict[str, List[dict]] = {}
        for index, (cell, seed) in enumerate(needed, 1):
            result = self.run_cell(cell, index, len(needed), seed)
            by_cell.setdefault(cell.run_name, []).append(result)
        return [pool_seeds(by_cell[cell.run_name]) for cell in cells] if self.execute else []


def pool_seeds(results: List[dict]) -> dict:
    """One cell's result from its seeds' results: the first seed's, with the intrinsic
    accuracies averaged over seeds, every seed's result under `seeds`, and (where every seed
    has per-document counts) each sentence set's pooled margin with its document-level
    interval under `pooled_margins`, the masked-LM accuracy's under `pooled_masked_lm`."""
    if len(results) == 1 and "documents" not in results[0].get("intrinsic", {}):
        return results[0]
    pooled = dict(results[0], seeds=results)
    intrinsic = dict(results[0]["intrinsic"])
    for column in ("MLM acc", "NSP acc", "SOP acc"):
        values = [result["intrinsic"].get(column) for result in results]
        if all(value is not None for value in values):
            intrinsic[column] = float(np.mean(values))
    pooled["intrinsic"] = intrinsic
    if all("documents" in result["intrinsic"] for result in results):
        pooled["pooled_margins"] = {
            column: margin_summary([DocumentCounts(**{field: np.asarray(values) for field, values
                                                      in result["intrinsic"]["documents"][column]
                                                      .items()}) for result in results])
            for column in results[0]["intrinsic"]["documents"]}
    masked = cell_masked_token_counts(pooled)
    if masked is not None:
        pooled["pooled_masked_lm"] = masked_lm_summary(masked)
    return pooled


def cell_masked_token_counts(result: dict) -> Optional[List[MaskedTokenCounts]]:
    """Each seed's per-document masked-token counts of a cell's result (one seed's result or
    pool_seeds'), or None where a seed has none."""
    seeds = result.get("seeds", [result])
    if not all(MASKED_LM_DOCUMENTS in seed["intrinsic"] for seed in seeds):
        return None
    return [MaskedTokenCounts(**{field: np.asarray(values) for field, values in
                                 seed["intrinsic"][MASKED_LM_DOCUMENTS].items()})
            for seed in seeds]


def _with_warm_starts(cells: List[Cell]) -> List[Cell]:
    """The cells in order, each preceded by the cells it is warm-started from."""
    ordered: List[Cell] = []
    for cell in cells:
        chain = []
        while cell is not None and cell not in ordered and cell not in chain:
            chain.append(cell)
            cell = cell.warm_start_from
        ordered.extend(reversed(chain))
    return ordered


def _portable(command: List[str], python: str) -> List[str]:
    """The command as a reader repeats it from the repository root on another machine: `python`
    for this interpreter, every absolute path (a flag's value or a word) relative to the
    repository (steps run there), so commands.sh names no directory of the machine it ran on."""
    def relative(word: str) -> str:
        flag, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
        if os.path.isabs(value):
            value = os.path.relpath(value, REPO)
        return f"{flag}{equals}{value}"

    return ["python" if word == python else relative(word) for word in command]


def _directory(task: str) -> str:
    return TASKS[task].directory


def _parameters(config) -> int:
    return count_parameters(config)


def _best_dev_metric(run_dir: str) -> dict:
    """The best dev evaluation of a run_classifier.py run (the paper's dev early stopping)."""
    results = io.read_json(os.path.join(run_dir, "eval_results.json"))
    metric = results["layout"][1]
    best = max(results["evaluations"], key=lambda entry: entry.get(metric, float("-inf")))
    return {"metric": metric, "value": best[metric], "step": best["step"]}


def _pretrainer(checkpoint: str, config):
    weights, _ = read_checkpoint(checkpoint, "auto", config, heads="required")
    model = build_model(config, "pretraining")
    assign_model_weights(model, weights, checkpoint)
    return model


def evaluate_checkpoint(checkpoint: str, config, records: str, batch_size: int) -> dict:
    """Pretraining metrics of a checkpoint on every record of `records` (the library path
    run_pretraining.py's evaluation takes)."""
    model = _pretrainer(checkpoint, config)
    contract = load_data_contract([records])
    task = PretrainingTask(config=config, train_data=contract, eval_data=contract)
    settings = TrainerConfig(output_dir="", num_train_steps=0, train_batch_size=batch_size,
                             eval_batch_size=batch_size,
                             max_eval_steps=-(-contract.total_records // batch_size))
    metrics = task.evaluate(model, settings)
    metrics["examples"] = contract.total_records
    return metrics


@dataclasses.dataclass(frozen=True)
class RecordPredictions:
    """Per record of a held-out file, in file order: what document-level intervals resample.

    `labels` / `predicted`: the sentence label and the sentence head's answer;
    `masked_tokens` / `masked_correct`: the record's masked-LM weights summed, and summed over
    the positions the masked LM predicts right (their totals give the evaluation's
    masked-LM accuracy)."""

    labels: np.ndarray
    predicted: np.ndarray
    masked_tokens: np.ndarray
    masked_correct: np.ndarray


def record_predictions(checkpoint: str, config, records: str,
                       batch_size: int) -> RecordPredictions:
    """The model's answers on every record of `records`, counted per record."""
    model = _pretrainer(checkpoint, config)
    parser = PretrainingParser(load_data_contract([records]).schema)
    found = {field.name: [] for field in dataclasses.fields(RecordPredictions)}
    for batch in tf.data.TFRecordDataset([records]).batch(batch_size).map(
            lambda serialized: parser(serialized, None)):
        outputs = model(batch, training=False)
        weights = np.asarray(batch["masked_lm_weights"], np.float64)
        right = np.argmax(np.asarray(outputs["mlm_logits"]), axis=-1) == np.asarray(
            batch["masked_lm_ids"])
        found["labels"].append(np.reshape(batch["next_sentence_labels"], [-1]))
        found["predicted"].append(np.argmax(np.asarray(outputs["sentence_order_logits"]), axis=-1))
        found["masked_tokens"].append(weights.sum(axis=-1))
        found["masked_correct"].append((weights * right).sum(axis=-1))
    return RecordPredictions(**{name: np.concatenate(parts) for name, parts in found.items()})
