r"""Fine-tune ALBERT on a GLUE task: train, evaluate every checkpoint, predict, export.

    python run_classifier.py --task_name=MNLI --data_dir=glue \
        --albert_config_file=albert_base/albert_config.json \
        --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
        --output_dir=runs/mnli --max_seq_length=512 --do_train --do_eval --do_predict \
        --train_batch_size=128 --learning_rate=3e-5 --train_step=10000 --warmup_step=1000 \
        --save_checkpoints_steps=100

Tasks: cola, sst-2, mrpc, sts-b, qqp, mnli, mismnli (MNLI mismatched dev and
test), qnli, rte, wnli, and ax (the diagnostic set: predict-only, from an
MNLI-trained --init_checkpoint). --task_preset fills the paper's Table 14
settings for the task (learning rate, batch size, steps, warm-up, dropouts,
sequence length); flags given explicitly win.

Outputs in --output_dir: model.ckpt-N every --save_checkpoints_steps, each
evaluated once on the dev set (eval_results.json / eval_results.txt, best
copied to model.ckpt-best by accuracy, Matthews correlation for CoLA,
Pearson for STS-B); with --do_predict, test_results.tsv, submit_results.tsv
and the file the GLUE server expects (e.g. MNLI-m.tsv); with --export_dir, a
SavedModel. Feature caches <task>_train.tf_record / <task>_eval.tf_record
(+ .settings.json) go to --cached_dir (default --output_dir) and are rebuilt
when made with other settings.

Your own labelled files instead of a GLUE task (CSV, TSV or JSON Lines; docs/finetuning.md):

    python run_classifier.py --train_file=train.csv --validation_file=dev.csv \
        --text_columns=text --label_column=label --output_dir=runs/mine \
        --albert_config_file=albert_base/albert_config.json \
        --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
        --do_train --do_eval --do_predict --test_file=new.csv --export_dir=served/mine

The labels come from the training file (kept in the run directory's run_settings.json and
labels.txt); eval_report.{json,md} and confusion_matrix.png describe model.ckpt-best on the
validation file; test_predictions.<ext> holds every test row with its predicted label and each
label's probability; the SavedModel takes raw strings.
"""

import json
import os

from absl import flags, logging

from albert import cli, finetuning, finetuning_cli, io, restarts
from albert.checkpoints import assign_model_weights
from albert.errors import InputError
from albert.export.classifier import export_classifier
from albert.finetuning_data.feature_cache import tokenizer_settings
from albert.finetuning_data.glue import (TASKS, convert_examples, get_task, plan_cache,
                                         read_examples, write_cache)
from albert.finetuning_data.labelled_files import (DEFAULT_LABEL_SEPARATOR, DEFAULT_THRESHOLD,
                                                   FORMATS, TASK_TYPES, ColumnSpec)
from albert.tasks import file_classification
from albert.export.text_classifier import export_text_classifier
from albert.tasks.classification import (ClassificationTask, bucketed_logits,
                                         classification_loss, prediction_files,
                                         predictions_from_logits, stack_features, write_predictions)

# --- the original's 32 flags ---
flags.DEFINE_string("data_dir", None, "Directory holding one sub-directory per GLUE task.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", None, f"Task: {', '.join(TASKS)} (case-insensitive).")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (when there is no SentencePiece model).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Checkpoints, evaluation results and predictions.")
flags.DEFINE_string("cached_dir", None, "Where the feature caches go (default: --output_dir).")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: a pretraining or released checkpoint, or a fine-tuned one with "
                    "its head; any format convert_checkpoint.py reads.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "A TF-Hub ALBERT module directory on disk (used like --init_checkpoint; "
                    "nothing is downloaded).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length of the features.")
flags.DEFINE_bool("do_train", False, "Fine-tune.")
flags.DEFINE_bool("do_eval", False,
                  "Evaluate every checkpoint once on the dev set (during training, or, without "
                  "--do_train, every checkpoint in --output_dir not evaluated yet).")
flags.DEFINE_bool("do_predict", False,
                  "Predict the test set with model.ckpt-best (or --init_checkpoint when this run "
                  "does not train).")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("train_step", 1000, "Training steps.")
flags.DEFINE_integer("warmup_step", 0, "Linear warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5,
                     "Checkpoints kept when evaluating beside training (0: all); an "
                     "unevaluated one is never deleted, so training without --do_eval keeps "
                     "them all (the "
                     "original ignored the flag and kept all).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "ALBERT's AdamW or LAMB.")
flags.DEFINE_string("export_dir", None, "Write a SavedModel of model.ckpt-best here.")
flags.DEFINE_float("threshold_to_export", float("nan"),
                   "If set, the SavedModel also returns this constant `threshold`.")
finetuning_cli.define_tpu_flags()
# --- added here ---
finetuning_cli.define_runtime_flags()
flags.adopt_module_key_flags(finetuning_cli)  # --help lists the shared flags too
flags.DEFINE_bool("task_preset", False,
                  "Use the paper's Table 14 settings for --task_name (configs/finetuning/"
                  "table14.json); explicit flags win.")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout of the classification head.")
# --- a user's own labelled files (instead of --task_name and --data_dir) ---
flags.DEFINE_string("train_file", None,
                    "Training examples: a CSV, TSV or JSON Lines file, or comma-separated files "
                    "and globs (shards); the labels are read from it.")
flags.DEFINE_string("validation_file", None, "Evaluation examples (--do_eval), as --train_file.")
flags.DEFINE_string("test_file", None,
                    "Examples to predict (--do_predict), as --train_file; labels optional.")
flags.DEFINE_enum("file_format", None, list(FORMATS),
                  "Format of the files (default: from each file's extension).")
flags.DEFINE_string("text_columns", "text",
                    "The text column, or two comma-separated columns for a pair.")
flags.DEFINE_string("label_column", "label", "The label column.")
flags.DEFINE_enum("task_type", None, list(TASK_TYPES),
                  "classification, regression or multi_label (default: multi_label when the "
                  "training labels are JSON lists, regression when they are numbers that are not "
                  "all integers, else classification).")
flags.DEFINE_string("label_separator", DEFAULT_LABEL_SEPARATOR,
                    "Multi-label: the character between an example's labels in a CSV or TSV "
                    "label column (e.g. 'sports;politics'; an empty cell is no label).")
flags.DEFINE_float("multi_label_threshold", DEFAULT_THRESHOLD,
                   "Multi-label: a label is predicted when its sigmoid probability reaches this.")
flags.mark_flags_as_required(["output_dir"])

FLAGS = flags.FLAGS
PRESETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "configs", "finetuning",
                       "table14.json")


def apply_preset(task_name: str) -> dict:
    """Table 14's settings for flags not given on the command line; returns the dropouts."""
    presets = json.loads(io.read_text(PRESETS))
    preset = presets.get(task_name)
    if preset is None:
        raise InputError(f"--task_preset: Table 14 has no settings for {task_name}")
    for flag in ("learning_rate", "train_batch_size", "train_step", "warmup_step",
                 "max_seq_length"):
        if not FLAGS[flag].present:
            FLAGS[flag].value = preset[flag]
    if not FLAGS["classifier_dropout"].present:
        FLAGS.classifier_dropout = preset["classifier_dropout"]
    logging.info("Table 14 settings for %s: %s", task_name, preset)
    return preset


def main(argv):
    del argv
    if FLAGS.export_dir:
        # Refused now, not after the training.
        io.check_new_directory(FLAGS.export_dir, hint="remove it or choose another --export_dir")
    out = FLAGS.output_dir
    restarts.main(run_once, restarts.RestartPlan(
        evaluates=FLAGS.do_train and FLAGS.do_eval,
        predicts=FLAGS.do_predict or bool(FLAGS.export_dir),
        seed_flags={"do_predict": False, "export_dir": None,
                    "cached_dir": FLAGS.cached_dir or out},
        predict_flags={"do_train": False, "do_eval": False},
        carried_flags=finetuning_cli.flags_carried_by_initial_checkpoint))


def uses_files() -> bool:
    """A user's own files (--train_file, ...) rather than a GLUE task; without any file flag
    and without --task_name, an --output_dir trained on files (to export it, say)."""
    if any(FLAGS[name].value for name in ("train_file", "validation_file", "test_file")):
        return True
    return not FLAGS.task_name and file_classification.task_of_run(FLAGS.output_dir) is not None


def choose_task():
    """(the task: a GlueTask or a FileTask, whether its training file was checked)."""
    if not uses_files():
        if not (FLAGS.task_name and FLAGS.data_dir):
            raise InputError("Name a GLUE task (--task_name and --data_dir) or your own files "
                             "(--train_file, --validation_file, --test_file)")
        glue_task = get_task(FLAGS.task_name)
        if glue_task.predict_only and (FLAGS.do_train or FLAGS.do_eval):
            raise InputError(f"{glue_task.name} is predict-only: use --do_predict with an "
                             "MNLI-trained --init_checkpoint")
        return glue_task, False
    if FLAGS.task_name or FLAGS.data_dir:
        raise InputError("--task_name and --data_dir (a GLUE task) cannot be combined with "
                         "--train_file, --validation_file or --test_file (your own files)")
    for wanted, flag, name in ((FLAGS.do_train, "--do_train", "train_file"),
                               (FLAGS.do_eval, "--do_eval", "validation_file"),
                               (FLAGS.do_predict, "--do_predict", "test_file")):
        if wanted and not FLAGS[name].value:
            raise InputError(f"{flag} needs --{name}")
    if FLAGS.train_file:
        columns = ColumnSpec.from_flags(FLAGS.text_columns, FLAGS.label_column)
        return file_classification.task_from_training_file(
            FLAGS.train_file, FLAGS.file_format, columns, FLAGS.task_type,
            FLAGS.label_separator, FLAGS.multi_label_threshold), True
    init_checkpoint = FLAGS.init_checkpoint or FLAGS.albert_hub_module_handle
    for directory in (FLAGS.output_dir, init_checkpoint and io.dirname(init_checkpoint)):
        recorded = directory and file_classification.task_of_run(directory)
        if recorded:
            logging.info("Labels and columns of the run in %s: %s", directory,
                         recorded.settings())
            return recorded, False
    raise InputError("Without --train_file the labels come from a run trained on files: "
                     "--output_dir (or --init_checkpoint's directory) must hold one")


def run_once():
    """One run: the original's run_classifier.py (or a user's files), with the flags as they are."""
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise InputError("At least one of --do_train, --do_eval, --do_predict or --export_dir "
                         "must be set")
    glue_task, train_checked = choose_task()
    files = uses_files()
    finetuning_cli.check_at_least_one("train_batch_size", "eval_batch_size", "predict_batch_size")
    runtime = finetuning_cli.runtime_from_flags()
    strategy = finetuning.create_strategy(runtime)
    dropouts = {}
    if FLAGS.task_preset:
        if files:
            raise InputError("--task_preset holds the paper's settings of the GLUE tasks; with "
                             "your own files set --learning_rate, --train_step, ... yourself")
        preset = apply_preset(glue_task.name)
        dropouts = {"hidden_dropout_prob": preset["albert_dropout"],
                    "attention_probs_dropout_prob": preset["albert_dropout"]}
    config = finetuning.load_config(runtime, FLAGS.max_seq_length, **dropouts)
    if FLAGS.max_seq_length < 3:
        raise InputError("--max_seq_length must be at least 3 ([CLS] A [SEP])")
    tokenizer = finetuning.load_tokenizer(runtime, config, FLAGS.vocab_file, FLAGS.spm_model_file,
                                              FLAGS.do_lower_case)
    init_checkpoint = FLAGS.init_checkpoint or FLAGS.albert_hub_module_handle
    head_dims = {"C": glue_task.num_labels}
    described = (f"{glue_task.name} ({glue_task.num_labels} labels)" if not files else
                 f"the {glue_task.num_labels} labels of the training file" if glue_task.labels
                 else "a regression task (1 output)")
    weights = finetuning.initial_weights(
        runtime, config, init_checkpoint, "classifier", head_dims, described)

    task_settings = glue_task.settings() if files else {"task": glue_task.name}
    task = ClassificationTask(
        config=config, glue_task=glue_task, max_seq_length=FLAGS.max_seq_length,
        head_dropout=FLAGS.classifier_dropout, initial_weights=weights,
        settings={**task_settings, "max_seq_length": FLAGS.max_seq_length,
                  **tokenizer_settings(tokenizer)})
    # The run directory and the settings are checked before any file is written (the data
    # order of a resumed training run too, in start_writing; a busy directory or a checkpoint
    # that does not fit the model only when the loop starts, after the caches).
    directory = finetuning.check_output_dir(FLAGS.output_dir, task)
    trainer = finetuning.make_trainer(
        runtime, task, strategy, output_dir=FLAGS.output_dir, train_step=FLAGS.train_step,
        warmup_step=FLAGS.warmup_step, learning_rate=FLAGS.learning_rate,
        optimizer=FLAGS.optimizer, train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.eval_batch_size, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max)
    if FLAGS.do_eval and not FLAGS.do_train:
        finetuning.check_checkpoints_to_evaluate(FLAGS.output_dir)
    if FLAGS.do_predict or FLAGS.export_dir:
        finetuning.check_something_to_predict_with(FLAGS.output_dir, init_checkpoint,
                                                   trains=FLAGS.do_train, evaluates=FLAGS.do_eval)
    # Every input is read (and so checked) before any cache is written.
    cached_dir = FLAGS.cached_dir or FLAGS.output_dir
    caches = {}
    for wanted, split, suffix in ((FLAGS.do_train, "train", "train"),
                                  (FLAGS.do_eval, "dev", "eval")):
        if not wanted:
            continue
        if files:
            caches[split] = file_classification.plan_cache(
                glue_task, FLAGS.train_file if split == "train" else FLAGS.validation_file,
                FLAGS.file_format, split,
                io.join(cached_dir, file_classification.CACHE_NAMES[split]),
                FLAGS.max_seq_length, tokenizer, checked=train_checked and split == "train")
        else:
            caches[split] = plan_cache(glue_task, FLAGS.data_dir, split,
                                       io.join(cached_dir, f"{glue_task.name}_{suffix}.tf_record"),
                                       FLAGS.max_seq_length, tokenizer)
    test = None
    if FLAGS.do_predict:
        if files:
            file_classification.check_test_file(FLAGS.test_file, FLAGS.file_format, glue_task,
                                                tokenizer.preprocess)
        else:
            test = read_examples(glue_task, FLAGS.data_dir, "test", tokenizer.preprocess)
    outputs = ([file_classification.predictions_path(FLAGS.output_dir, FLAGS.test_file,
                                                     FLAGS.file_format)]
               if files and FLAGS.do_predict else [] if files
               else prediction_files(FLAGS.output_dir, glue_task))
    finetuning.start_writing(directory, task, trainer, FLAGS.do_train, [
        *(path for cache in caches.values() for path in cache.files()), *outputs])
    if files:
        file_classification.write_run_extras(FLAGS.output_dir, glue_task, tokenizer)
    for cache in caches.values():
        if files:
            file_classification.write_cache(cache, glue_task, FLAGS.max_seq_length, tokenizer)
        else:
            write_cache(cache, glue_task, FLAGS.max_seq_length, tokenizer)
    if "train" in caches:
        task.train_cache, task.train_records = caches["train"].path, caches["train"].records
    if "dev" in caches:
        task.eval_cache = caches["dev"].path

    finetuning.train_and_evaluate(trainer, FLAGS.do_train, FLAGS.do_eval)
    reports = files and FLAGS.do_eval and trainer.worker.is_chief
    if FLAGS.do_predict or FLAGS.export_dir or reports:
        predict_and_export(runtime, task, glue_task, tokenizer, init_checkpoint, head_dims,
                           test, trainer.config.jit_compile, trainer.worker.is_chief,
                           report=reports)


def predict_and_export(runtime, task, glue_task, tokenizer, init_checkpoint, head_dims, test,
                       jit_compile: bool, is_chief: bool = True, report: bool = False):
    """--do_predict and --export_dir (the chief worker's; in float32), from model.ckpt-best
    or a fine-tuned --init_checkpoint; with `report` (a files run with --do_eval), the
    evaluation report of model.ckpt-best first."""
    weights, source = finetuning.prediction_weights(
        runtime, FLAGS.output_dir, init_checkpoint, task.config, "classifier", head_dims,
        FLAGS.do_train, "Predicting" if FLAGS.do_predict else "Exporting")
    model = task.build_model()
    assign_model_weights(model, weights, source)
    regression = glue_task.is_regression
    if report:
        features = task.eval_features()
        logits = bucketed_logits(model, features, FLAGS.eval_batch_size, jit_compile)
        _, predictions = predictions_from_logits(logits, regression,
                                                 glue_task.multi_label_threshold)
        labels = features["label_ids"]
        written = file_classification.write_evaluation_report(
            FLAGS.output_dir, glue_task, predictions, labels,
            classification_loss(logits, labels, regression, glue_task.is_multi_label), source)
        logging.info("Evaluation report of %s: %s", source, ", ".join(written))
    if FLAGS.do_predict and uses_files():
        path = file_classification.predictions_path(FLAGS.output_dir, FLAGS.test_file,
                                                    FLAGS.file_format)
        count = file_classification.write_predictions(
            path, file_classification.test_rows(FLAGS.test_file, FLAGS.file_format, glue_task),
            glue_task, lambda rows: file_classification.predict(
                model, glue_task, glue_task.examples(rows, tokenizer.preprocess, labelled=False,
                                                     split="test"),
                tokenizer, FLAGS.max_seq_length, FLAGS.predict_batch_size, jit_compile))
        logging.info("Wrote %d predictions: %s", count, path)
    elif FLAGS.do_predict:
        features = stack_features(convert_examples(test, glue_task, FLAGS.max_seq_length,
                                                   tokenizer), regression)
        logits = bucketed_logits(model, features, FLAGS.predict_batch_size, jit_compile)
        probabilities, predictions = predictions_from_logits(logits, regression)
        written = write_predictions(FLAGS.output_dir, glue_task, [e.guid for e in test],
                                    probabilities, predictions)
        logging.info("Wrote %d predictions: %s", len(test), ", ".join(written))
    if FLAGS.export_dir and is_chief:
        exported = finetuning.float32_model(task, weights, source)
        if uses_files():
            export_text_classifier(exported, tokenizer, glue_task, FLAGS.export_dir,
                                   FLAGS.max_seq_length)
        else:
            export_classifier(exported, FLAGS.export_dir, FLAGS.max_seq_length, regression,
                              FLAGS.threshold_to_export)
        logging.info("Exported a SavedModel to %s", FLAGS.export_dir)


if __name__ == "__main__":
    cli.run(main)
