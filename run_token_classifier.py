r"""Fine-tune ALBERT to tag every word (named entities, parts of speech) from your tagged files.

    python run_token_classifier.py --train_file=train.conll --validation_file=dev.conll \
        --albert_config_file=albert_base/albert_config.json \
        --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
        --output_dir=runs/ner --do_train --do_eval --max_seq_length=128 \
        --train_batch_size=32 --learning_rate=5e-5 --train_step=3000 --warmup_step=300 \
        --save_checkpoints_steps=500

Files: CoNLL style (a word and its tag per line, the tag in the last column or --tag_column;
blank lines between sentences; -DOCSTART- skipped) or JSON Lines (`tokens` and `tags` lists).
The tag set is read from the training file and kept in the run directory (run_settings.json,
tags.txt). Each word is learnt and predicted on its first SentencePiece piece
(--label_all_pieces: on every piece); sentences longer than --max_seq_length are cut into
overlapping windows and each word is predicted from the window where it has the most context.

Outputs in --output_dir: model.ckpt-N and model.ckpt-best (by entity F1 for BIO, IOB1 and BIOES
tags, else word accuracy), eval_results.json / .txt at every checkpoint, eval_report.{json,md}
for model.ckpt-best (entity scores per type, the confusion matrix over tags, each beside the
baseline of each word's commonest training tag), test_predictions.<conll|jsonl> with
--do_predict. `python -m albert.predict --model_dir=RUN` tags raw text with character offsets. With
--export_dir, a SavedModel of model.ckpt-best that takes raw strings and returns each word's
tag and character span (`--output_dir=RUN --export_dir=DIR` exports a finished run).
See docs/token_classification.md.
"""

from absl import flags, logging

from albert import cli, finetuning, finetuning_cli, io, restarts
from albert.checkpoints import assign_model_weights
from albert.errors import InputError
from albert.export.token_tagger import export_token_tagger
from albert.finetuning_data import tagged_files
from albert.finetuning_data.feature_cache import files_fingerprint, tokenizer_settings
from albert.tasks import file_classification, token_classification
from albert.tasks.token_classification import TokenClassificationTask

flags.DEFINE_string("train_file", None, "Tagged training sentences (CoNLL or JSON Lines; "
                    "comma-separated files and globs).")
flags.DEFINE_string("validation_file", None, "Tagged sentences to evaluate on (--do_eval).")
flags.DEFINE_string("test_file", None, "Sentences to tag (--do_predict); tags optional.")
flags.DEFINE_enum("file_format", None, list(tagged_files.FORMATS),
                  "Format of the files (default: .jsonl/.json/.ndjson are JSON Lines, the rest "
                  "CoNLL).")
flags.DEFINE_integer("tag_column", None, "CoNLL: the tag's column, from 0 (default: the last).")
flags.DEFINE_string("words_key", "tokens", "JSON Lines: the key of the words.")
flags.DEFINE_string("tags_key", "tags", "JSON Lines: the key of the tags.")
flags.DEFINE_bool("label_all_pieces", False,
                  "Learn every piece of a word with the word's tag (default: its first piece).")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (when there is no SentencePiece model).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Checkpoints, evaluation results and predictions.")
flags.DEFINE_string("cached_dir", None, "Where the training feature cache goes (default: "
                    "--output_dir).")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: a pretraining or released checkpoint, or a tagger with its "
                    "head; any format convert_checkpoint.py reads (a Hugging Face "
                    "AlbertForTokenClassification directory too). Without it: random weights.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_integer("max_seq_length", 128, "Pieces per window, [CLS] and [SEP] included.")
flags.DEFINE_bool("do_train", False, "Fine-tune.")
flags.DEFINE_bool("do_eval", False, "Evaluate every checkpoint on --validation_file.")
flags.DEFINE_bool("do_predict", False, "Tag --test_file with model.ckpt-best.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size (windows).")
flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("train_step", 1000, "Training steps.")
flags.DEFINE_integer("warmup_step", 0, "Linear warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Evaluated checkpoints kept (0: all).")
flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "ALBERT's AdamW or LAMB.")
flags.DEFINE_float("classifier_dropout", 0.1, "Dropout of the tagging head.")
flags.DEFINE_string("export_dir", None, "Write a SavedModel of model.ckpt-best here "
                    "(<export_dir>/1/): raw strings in, each word's tag and span out.")
finetuning_cli.define_tpu_flags()
finetuning_cli.define_runtime_flags()
flags.adopt_module_key_flags(finetuning_cli)
flags.mark_flags_as_required(["output_dir"])
FLAGS = flags.FLAGS


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


def read(pattern: str, what: str, tagged: bool):
    return tagged_files.read_sentences(pattern, FLAGS.file_format, tagged, what, FLAGS.tag_column,
                                       FLAGS.words_key, FLAGS.tags_key)


def recorded_task() -> tuple:
    """(tags, baseline) of an earlier tagger's run directory."""
    for directory in (FLAGS.output_dir,
                      FLAGS.init_checkpoint and io.dirname(FLAGS.init_checkpoint)):
        path = directory and io.join(directory, token_classification.RUN_SETTINGS_FILE)
        if path and io.exists(path):
            settings = io.read_json(path)
            if settings.get("task_type") == token_classification.TASK_TYPE:
                baseline = io.read_json(io.join(directory, token_classification.BASELINE_FILE))
                return tuple(settings["tags"]), (baseline["by_word"], baseline["default"])
    raise InputError("Without --train_file the tags come from a tagger's run: --output_dir (or "
                     "--init_checkpoint's directory) must hold one")


def run_once():
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict or FLAGS.export_dir):
        raise InputError("At least one of --do_train, --do_eval, --do_predict or --export_dir "
                         "must be set")
    for wanted, flag, name in ((FLAGS.do_train, "--do_train", "train_file"),
                               (FLAGS.do_eval, "--do_eval", "validation_file"),
                               (FLAGS.do_predict, "--do_predict", "test_file")):
        if wanted and not FLAGS[name].value:
            raise InputError(f"{flag} needs --{name}")
    if FLAGS.max_seq_length < 3:
        raise InputError("--max_seq_length must be at least 3 ([CLS] a piece [SEP])")
    train = read(FLAGS.train_file, "--train_file", True) if FLAGS.train_file else None
    if train is not None:
        tags = tagged_files.tag_set(train)
        baseline = tagged_files.most_frequent_tags(train)
    else:
        tags, baseline = recorded_task()
    if len(tags) < 2:
        raise InputError(f"{FLAGS.train_file}: every word is tagged {tags[0]!r}; a tagger needs "
                         "at least two tags")
    validation = read(FLAGS.validation_file, "--validation_file", True) if FLAGS.do_eval else None
    if validation is not None:
        tagged_files.check_tags(validation, tags)
    test = read(FLAGS.test_file, "--test_file", False) if FLAGS.do_predict else None

    runtime = finetuning_cli.runtime_from_flags()
    strategy = finetuning.create_strategy(runtime)
    config = finetuning.load_config(runtime, FLAGS.max_seq_length)
    tokenizer = finetuning.load_tokenizer(runtime, config, FLAGS.vocab_file, FLAGS.spm_model_file,
                                          FLAGS.do_lower_case)
    head_dims = {"C": len(tags)}
    weights = finetuning.initial_weights(runtime, config, FLAGS.init_checkpoint,
                                         "token_classifier", head_dims,
                                         f"the {len(tags)} tags of the training file")
    settings = {"task": "tagging", "task_type": token_classification.TASK_TYPE,
                "tags": list(tags), "label_all_pieces": FLAGS.label_all_pieces,
                "max_seq_length": FLAGS.max_seq_length, **tokenizer_settings(tokenizer)}
    task = TokenClassificationTask(
        config=config, tags=tags, baseline=baseline, max_seq_length=FLAGS.max_seq_length,
        head_dropout=FLAGS.classifier_dropout, initial_weights=weights, settings=settings)
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
        finetuning.check_something_to_predict_with(FLAGS.output_dir, FLAGS.init_checkpoint,
                                                   trains=FLAGS.do_train, evaluates=FLAGS.do_eval)
    cache = None
    if FLAGS.do_train:
        cache_path = io.join(FLAGS.cached_dir or FLAGS.output_dir, token_classification.CACHE_NAME)
        cache = token_classification.plan_cache(cache_path, {
            **settings, "split": "train", "source_sha256": files_fingerprint(
                io.expand_file_patterns(FLAGS.train_file, "--train_file"))}, train)
    predictions_path = (io.join(FLAGS.output_dir, "test_predictions." + tagged_files.file_format(
        io.expand_file_patterns(FLAGS.test_file, "--test_file")[0], FLAGS.file_format))
        if test is not None else None)
    finetuning.start_writing(directory, task, trainer, FLAGS.do_train, [
        *(cache.files() if cache else []), *([predictions_path] if predictions_path else [])])
    io.write_text_atomically(io.join(FLAGS.output_dir, token_classification.TAGS_FILE),
                             "".join(f"{tag}\n" for tag in tags))
    name, content = file_classification.vocabulary_file(tokenizer)
    io.write_bytes_atomically(io.join(FLAGS.output_dir, name), content)
    if cache is not None:
        cache.write_records(token_classification.training_records(
            train, tags, tokenizer, FLAGS.max_seq_length, FLAGS.label_all_pieces))
        task.train_cache, task.train_records = cache.path, cache.records
    if validation is not None:
        task.eval_set = token_classification.tagged_set(validation, tags, tokenizer,
                                                        FLAGS.max_seq_length)

    finetuning.train_and_evaluate(trainer, FLAGS.do_train, FLAGS.do_eval)
    if not trainer.worker.is_chief or not (FLAGS.do_predict or FLAGS.export_dir or
                                           validation is not None):
        return
    weights, source = finetuning.prediction_weights(
        runtime, FLAGS.output_dir, FLAGS.init_checkpoint, config, "token_classifier", head_dims,
        FLAGS.do_train, "Predicting" if FLAGS.do_predict else
        "Exporting" if FLAGS.export_dir else "Reporting")
    model = task.build_model()
    assign_model_weights(model, weights, source)
    if validation is not None:
        scores = task.scores(model, FLAGS.eval_batch_size, trainer.config.jit_compile)
        written = token_classification.write_report(FLAGS.output_dir, task, scores, source)
        logging.info("Evaluation report of %s: %s", source, ", ".join(written))
    if test is not None:
        tagged = token_classification.tagged_set(test, tags, tokenizer, FLAGS.max_seq_length)
        logits = token_classification.tag_logits(model, tagged, FLAGS.predict_batch_size,
                                                  trainer.config.jit_compile)
        _, predicted = token_classification.word_predictions(logits, tagged)
        io.write_text_atomically(predictions_path, tagged_files.format_sentences(
            test, [[tags[i] for i in sentence] for sentence in predicted],
            tagged_files.file_format(predictions_path), FLAGS.words_key, FLAGS.tags_key))
        logging.info("Wrote the tags of %d sentences to %s", len(test), predictions_path)
    if FLAGS.export_dir:
        exported = export_token_tagger(finetuning.float32_model(task, weights, source), tokenizer,
                                       tags, FLAGS.export_dir, FLAGS.max_seq_length)
        logging.info("Exported a SavedModel of %s to %s", source, exported)


if __name__ == "__main__":
    cli.run(main)
