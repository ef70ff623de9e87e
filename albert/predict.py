r"""Predict with a finished fine-tuning run, from its directory alone.

    python -m albert.predict --model_dir=runs/mine --input_file=new.csv --output_file=pred.csv
    python -m albert.predict --model_dir=runs/mine --text="great product" --text="it broke"

The run directory of `run_classifier.py --train_file=...` holds all that is needed: the
model (`albert_config.json`, `model.ckpt-best`), the tokenizer (`spm.model` or `vocab.txt`),
and in `run_settings.json` the task (labels, text columns, classification or regression)
and the feature settings (sequence length, lower-casing).

Input: a CSV, TSV or JSON Lines file with the run's text column(s) (other columns are kept),
or plain text (`.txt`, or `--file_format=text`): one example a line, a pair's two texts
separated by a tab. Output (`--output_file`, refused if it exists): every input row with
`prediction` (the label's name, or the score for regression) and `probability_<label>` for
each label, in the output file's format (CSV, TSV or JSON Lines; plain-text input written
as the columns `text` / `text_a`, `text_b`). With `--text` (repeatable; `--text_b` for
pairs) the predictions are printed as JSON Lines. A progress bar shows long files' progress.
"""

import json
import sys

from absl import flags, logging

from albert import cli, io, tokenization
from albert.checkpoints import ALBERT_CONFIG_FILE, assign_model_weights, read_checkpoint
from albert.errors import InputError
from albert.finetuning_data.labelled_files import FORMATS, Row, file_format
from albert.modeling import AlbertClassifier
from albert.tasks import file_classification
from albert.tasks.finetuning import RUN_SETTINGS_FILE

TEXT_FORMAT = "text"

flags.DEFINE_string("model_dir", None, "A run directory of run_classifier.py --train_file=...")
flags.DEFINE_string("checkpoint", "model.ckpt-best",
                    "The checkpoint of --model_dir to predict with.")
flags.DEFINE_string("input_file", None, "Examples to predict (CSV, TSV, JSON Lines or text).")
flags.DEFINE_string("output_file", None, "Where the predictions go (a new file).")
flags.DEFINE_enum("file_format", None, [*FORMATS, TEXT_FORMAT],
                  "Format of --input_file (default: from its extension; .txt is text).")
flags.DEFINE_multi_string("text", None, "A text to predict (repeatable).")
flags.DEFINE_multi_string("text_b", None, "The second text of each pair (a pair task).")
flags.DEFINE_integer("batch_size", 32, "Examples per batch.")
flags.DEFINE_bool("progress", True, "Show a progress bar (log lines when not a terminal).")
flags.mark_flags_as_required(["model_dir"])
FLAGS = flags.FLAGS


class Predictor:
    """A run directory's model, tokenizer and task, loaded once."""

    def __init__(self, model_dir: str, checkpoint: str = "model.ckpt-best"):
        task = file_classification.task_of_run(model_dir)
        if task is None:
            raise InputError(f"{model_dir} holds no run of run_classifier.py --train_file=... "
                             f"(no task in its {RUN_SETTINGS_FILE})")
        settings = io.read_json(io.join(model_dir, RUN_SETTINGS_FILE))
        spm = io.join(model_dir, file_classification.SPM_FILE)
        vocab = io.join(model_dir, file_classification.VOCAB_FILE)
        self.tokenizer = tokenization.load_tokenizer(
            None if io.exists(spm) else vocab, spm if io.exists(spm) else None,
            settings["do_lower_case"], settings.get("digit_comma_rule"))
        from albert.config import AlbertConfig
        self.config = AlbertConfig.from_json_file(io.join(model_dir, ALBERT_CONFIG_FILE))
        self.task = task
        self.max_seq_length = int(settings["max_seq_length"])
        path = checkpoint if io.exists(checkpoint + ".index") else io.join(model_dir, checkpoint)
        if not io.exists(path + ".index"):
            raise InputError(f"No checkpoint {path} (train with --do_eval, which keeps "
                             "model.ckpt-best, or name one with --checkpoint)")
        weights, _ = read_checkpoint(path, "tf1", self.config, heads="required",
                                     head="classifier", head_dims={"C": task.num_labels})
        self.model = AlbertClassifier(self.config, task.num_labels)
        assign_model_weights(self.model, weights, path)
        self.source = path

    @property
    def pair(self) -> bool:
        return len(self.task.columns.text_columns) == 2

    def predict_rows(self, rows, batch_size: int, progress=None):
        """(probabilities, predictions) of rows holding the task's text columns."""
        examples = self.task.examples(rows, self.tokenizer.preprocess, labelled=False,
                                      split="predict")
        return file_classification.predict(self.model, self.task, examples, self.tokenizer,
                                           self.max_seq_length, batch_size, progress=progress)


def text_rows(path: str, columns) -> list:
    """Plain text: one example a line; a pair task's two texts separated by a tab."""
    rows = []
    for number, line in enumerate(io.read_lines(path), start=1):
        if not line.strip():
            continue
        fields = line.split("\t") if len(columns) == 2 else [line]
        if len(fields) != len(columns):
            raise InputError(f"{path}:{number}: {len(fields)} tab-separated texts, this pair "
                             "task needs 2")
        rows.append(Row(f"{path}:{number}", dict(zip(columns, fields))))
    if not rows:
        raise InputError(f"{path} holds no text")
    return rows


def input_rows(predictor: Predictor, path: str, given_format):
    columns = predictor.task.columns.text_columns
    fmt = given_format or (TEXT_FORMAT if path.lower().endswith((".txt", ".txt.gz"))
                           else file_format(path))
    if fmt == TEXT_FORMAT:
        return text_rows(path, columns)
    return file_classification.read_rows(path, fmt, columns, "--input_file")[1]


def main(argv):
    del argv
    texts = FLAGS.text or []
    if bool(texts) == bool(FLAGS.input_file):
        raise InputError("Give --input_file (with --output_file) or one or more --text")
    if FLAGS.input_file and not FLAGS.output_file:
        raise InputError("--input_file needs --output_file")
    if FLAGS.output_file:
        io.refuse_existing(FLAGS.output_file, "--output_file")
        file_format(FLAGS.output_file)   # a format we can write, refused before the work
    if FLAGS.batch_size < 1:
        raise InputError("--batch_size must be at least 1")
    predictor = Predictor(FLAGS.model_dir, FLAGS.checkpoint)
    columns = predictor.task.columns.text_columns
    if texts:
        seconds = FLAGS.text_b or []
        if predictor.pair and len(seconds) != len(texts):
            raise InputError(f"This run classifies pairs ({', '.join(columns)}): give one "
                             "--text_b for each --text")
        if not predictor.pair and seconds:
            raise InputError("This run classifies single texts: --text_b is not used")
        rows = [Row(f"--text #{i + 1}", dict(zip(columns, values)))
                for i, values in enumerate(zip(texts, seconds) if predictor.pair
                                           else ((text,) for text in texts))]
    else:
        rows = input_rows(predictor, FLAGS.input_file, FLAGS.file_format)
    progress = (cli.progress_display(len(rows), "predicting", "example")
                if FLAGS.progress and not texts else None)
    probabilities, predictions = predictor.predict_rows(rows, FLAGS.batch_size, progress)
    if progress is not None:
        progress.close()
    if texts:
        for row, fields in zip(rows, file_classification.prediction_fields(
                predictor.task, probabilities, predictions)):
            print(json.dumps({**row.fields, **fields}, ensure_ascii=False))
        sys.stdout.flush()
        return
    file_classification.write_predictions(FLAGS.output_file, rows, predictor.task,
                                          probabilities, predictions)
    logging.info("Wrote %d predictions of %s to %s", len(rows), predictor.source,
                 FLAGS.output_file)


if __name__ == "__main__":
    cli.run(main)
