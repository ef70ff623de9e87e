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

from albert import cli, io
from albert.errors import InputError
from albert.finetuning_data import tagged_files
from albert.finetuning_data.labelled_files import FORMATS, Row, file_format
from albert.finished_runs import TOKEN_CLASSIFICATION, Predictor, TokenPredictor, run_task_type
from albert.tasks import file_classification, token_classification

TEXT_FORMAT = "text"

cli.define_model_dir_flag()
flags.adopt_module_key_flags(cli)  # --helpshort lists --model_dir too
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
    return file_classification.iter_rows(path, fmt, columns, "--input_file")


def main(argv):
    del argv
    texts = FLAGS.text or []
    if bool(texts) == bool(FLAGS.input_file):
        raise InputError("Give --input_file (with --output_file) or one or more --text")
    if FLAGS.input_file and not FLAGS.output_file:
        raise InputError("--input_file needs --output_file")
    if FLAGS.output_file:
        io.refuse_existing(FLAGS.output_file, "--output_file")
    if FLAGS.batch_size < 1:
        raise InputError("--batch_size must be at least 1")
    if run_task_type(FLAGS.model_dir) == TOKEN_CLASSIFICATION:
        return tag_words(texts)
    if FLAGS.output_file:
        file_format(FLAGS.output_file)   # a format we can write, refused before the work
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
    if texts:
        probabilities, predictions = predictor.predict_rows(rows, FLAGS.batch_size)
        for row, fields in zip(rows, file_classification.prediction_fields(
                predictor.task, probabilities, predictions)):
            print(json.dumps({**row.fields, **fields}, ensure_ascii=False))
        sys.stdout.flush()
        return
    # The file streams through in chunks; the progress bar counts its bytes.
    progress = (cli.progress_display(_input_size(FLAGS.input_file), "predicting", "B",
                                     unit_scale=True) if FLAGS.progress else None)
    counted = _ByteProgress(rows, progress)
    count = file_classification.write_predictions(
        FLAGS.output_file, counted, predictor.task,
        lambda chunk: predictor.predict_rows(chunk, FLAGS.batch_size))
    if progress is not None:
        progress.close()
    logging.info("Wrote %d predictions of %s to %s", count, predictor.source, FLAGS.output_file)


def _input_size(pattern: str) -> int:
    return sum(io.size(path) for path in io.expand_file_patterns(pattern, "--input_file"))


class _ByteProgress:
    """Rows passed through, the progress advanced by each row's share of the input's bytes
    (rows carry no byte offsets: their fields' UTF-8 length stands in)."""

    def __init__(self, rows, progress):
        self.rows, self.progress = rows, progress

    def __iter__(self):
        for row in self.rows:
            if self.progress is not None:
                self.progress.update(sum(len(str(v).encode("utf-8")) + 1
                                         for v in row.fields.values()))
            yield row


def tag_words(texts) -> None:
    """A tagger's run: raw text (--text, or a .txt file's lines) gets words with offsets, tags
    and entities as JSON Lines; a CoNLL or JSON Lines file is written back with the tags."""
    predictor = TokenPredictor(FLAGS.model_dir, FLAGS.checkpoint)
    raw = list(texts)
    path = FLAGS.input_file
    if path and (FLAGS.file_format == TEXT_FORMAT or (not FLAGS.file_format and
                                                      path.lower().endswith(".txt"))):
        raw = [line for line in io.read_lines(path) if line.strip()]
    if raw:
        sentences = [tagged_files.Sentence(f"text {i + 1}", tuple(text.split()), None)
                     for i, text in enumerate(raw)]
        empty = [s.where for s in sentences if not s.words]
        if empty:
            raise InputError(f"{empty[0]}: no word to tag")
        results = [token_classification.tagged_text(text, tags, probabilities)
                   for text, (tags, probabilities)
                   in zip(raw, predictor.tag(sentences, FLAGS.batch_size))]
        lines = "".join(json.dumps(result, ensure_ascii=False) + "\n" for result in results)
        if FLAGS.output_file:
            io.write_text_atomically(FLAGS.output_file, lines)
            logging.info("Tagged %d texts to %s", len(raw), FLAGS.output_file)
        else:
            sys.stdout.write(lines)
            sys.stdout.flush()
        return
    fmt = None if FLAGS.file_format in (None, TEXT_FORMAT) else FLAGS.file_format
    fmt = {"csv": None, "tsv": None}.get(fmt, fmt)
    sentences = tagged_files.read_sentences(path, fmt, False, "--input_file")
    tagged = [tags for tags, _ in predictor.tag(sentences, FLAGS.batch_size)]
    io.write_text_atomically(FLAGS.output_file, tagged_files.format_sentences(
        sentences, tagged, tagged_files.file_format(FLAGS.output_file)))
    logging.info("Tagged %d sentences to %s", len(sentences), FLAGS.output_file)


if __name__ == "__main__":
    cli.run(main)
