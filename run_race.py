r"""Fine-tune ALBERT on RACE: train, evaluate every checkpoint, predict on the test set.

    python run_race.py --data_dir=data --albert_config_file=albert_base/albert_config.json \
        --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
        --output_dir=runs/race --train_file=runs/race/train.tf_record \
        --eval_file=runs/race/eval.tf_record --max_seq_length=512 --max_qa_length=128 \
        --do_train --do_eval --train_batch_size=32 --eval_batch_size=8 --learning_rate=1e-5 \
        --train_step=12000 --warmup_step=1000 --save_checkpoints_steps=100

Data: <data_dir>/RACE/{train,dev,test}/{middle,high}/, each level folder
holding all.txt (one JSON article per line) or the raw release's one JSON
file per article. --middle_only / --high_only read one level.

As in the original, --do_train and --do_eval are on by default. Outputs in
--output_dir: model.ckpt-N every --save_checkpoints_steps, each evaluated
once on the dev set (eval_results.json / eval_results.txt with the overall
accuracy and the accuracy of each level; the best by accuracy copied to
model.ckpt-best); with --do_predict, the test set's accuracy in
predict_results.txt and one row per question in predictions.tsv (from
model.ckpt-best, or from a fine-tuned --init_checkpoint when the run does
not train). Feature caches go to --train_file / --eval_file (default
<output_dir>/race_{train,eval}.tf_record, + .settings.json) and are rebuilt
when made with other settings.
"""

from absl import flags, logging

from albert import cli, finetuning, finetuning_cli, io, restarts
from albert.checkpoints import assign_model_weights
from albert.errors import InputError
from albert.finetuning_data.feature_cache import tokenizer_settings
from albert.finetuning_data.race import (check_lengths, convert_race_example, level_counts,
                                         plan_race_cache, read_race, selected_levels,
                                         write_race_cache)
from albert.tasks.finetuning import bucketed_logits
from albert.tasks.multiple_choice import (MultipleChoiceTask, multiple_choice_metrics,
                                          race_prediction_files, stack_choice_features,
                                          write_race_predictions)

# --- the original's 35 flags ---
flags.DEFINE_string("data_dir", None, "Directory holding RACE/{train,dev,test}/{middle,high}/.")
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("task_name", "race", "The task (only 'race').")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary (when there is no SentencePiece model).")
flags.DEFINE_string("train_file", None,
                    "Training feature cache (default <output_dir>/race_train.tf_record); made "
                    "if missing or made with other settings.")
flags.DEFINE_string("eval_file", None,
                    "Dev feature cache (default <output_dir>/race_eval.tf_record).")
flags.DEFINE_string("predict_file", None,
                    "Accepted for compatibility (the original did not use it either).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Checkpoints, evaluation results and predictions.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: a pretraining or released checkpoint, or a fine-tuned RACE "
                    "one with its head; any format convert_checkpoint.py reads.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "A TF-Hub ALBERT module directory on disk (used like --init_checkpoint; "
                    "nothing is downloaded).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_float("dropout_prob", 0.1, "Dropout of the multiple-choice head.")
flags.DEFINE_integer("max_seq_length", 512, "Tokens per option's sequence.")
flags.DEFINE_integer("max_qa_length", 128,
                     "Tokens kept of question + option (the last ones); the article fills the rest.")
flags.DEFINE_integer("num_keep_checkpoint", 5,
                     "Checkpoints kept when evaluating beside training (0: all); an "
                     "unevaluated one is never deleted, so training without --do_eval keeps "
                     "them all (the "
                     "original ignored the flag).")
flags.DEFINE_bool("high_only", False, "Only the high-school level.")
flags.DEFINE_bool("middle_only", False, "Only the middle-school level.")
flags.DEFINE_bool("do_train", True, "Fine-tune.")
flags.DEFINE_bool("do_eval", True,
                  "Evaluate every checkpoint once on the dev set (during training, or, without "
                  "--do_train, every checkpoint in --output_dir not evaluated yet).")
flags.DEFINE_bool("do_predict", False,
                  "Accuracy on the test set, and its predictions, with model.ckpt-best (or "
                  "--init_checkpoint when this run does not train).")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("eval_batch_size", 8, "Evaluation batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_float("learning_rate", 1e-5, "Peak learning rate (AdamW, as the original).")
flags.DEFINE_integer("train_step", 12000, "Training steps.")
flags.DEFINE_integer("warmup_step", 1000, "Linear warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 100, "Checkpoint (and evaluate) every N steps.")
finetuning_cli.define_tpu_flags()
# --- added here ---
finetuning_cli.define_runtime_flags()
flags.adopt_module_key_flags(finetuning_cli)  # --help lists the shared flags too
flags.DEFINE_integer("num_choices", 4, "Options per question.")
flags.mark_flags_as_required(["data_dir", "output_dir"])

FLAGS = flags.FLAGS
HEAD = "multiple_choice"


def main(argv):
    del argv
    out = FLAGS.output_dir
    restarts.main(run_once, restarts.RestartPlan(
        evaluates=FLAGS.do_train and FLAGS.do_eval, predicts=FLAGS.do_predict,
        seed_flags={"do_predict": False,
                    "train_file": FLAGS.train_file or io.join(out, "race_train.tf_record"),
                    "eval_file": FLAGS.eval_file or io.join(out, "race_eval.tf_record")},
        predict_flags={"do_train": False, "do_eval": False},
        carried_flags=finetuning_cli.flags_carried_by_initial_checkpoint))


def run_once():
    """One run: the original's run_race.py, with the flags as they are."""
    if not (FLAGS.do_train or FLAGS.do_eval or FLAGS.do_predict):
        raise InputError("At least one of --do_train, --do_eval or --do_predict must be set")
    if FLAGS.task_name.lower() != "race":
        raise InputError(f"Task not found: {FLAGS.task_name} (run_race.py runs 'race')")
    if FLAGS.num_choices < 2:
        raise InputError(f"--num_choices must be at least 2, got {FLAGS.num_choices}")
    finetuning_cli.check_at_least_one("train_batch_size", "eval_batch_size", "predict_batch_size")
    levels = selected_levels(FLAGS.middle_only, FLAGS.high_only)
    check_lengths(FLAGS.max_seq_length, FLAGS.max_qa_length)
    runtime = finetuning_cli.runtime_from_flags()
    strategy = finetuning.create_strategy(runtime)
    config = finetuning.load_config(runtime, FLAGS.max_seq_length)
    tokenizer = finetuning.load_tokenizer(runtime, config, FLAGS.vocab_file, FLAGS.spm_model_file,
                                              FLAGS.do_lower_case)
    init_checkpoint = FLAGS.init_checkpoint or FLAGS.albert_hub_module_handle
    weights = finetuning.initial_weights(runtime, config, init_checkpoint, HEAD, {},
                                             "the multiple-choice head")

    task = MultipleChoiceTask(
        config=config, max_seq_length=FLAGS.max_seq_length, num_choices=FLAGS.num_choices,
        head_dropout=FLAGS.dropout_prob, initial_weights=weights,
        settings={"task": "race", "max_seq_length": FLAGS.max_seq_length,
                  "max_qa_length": FLAGS.max_qa_length, "num_choices": FLAGS.num_choices,
                  "levels": list(levels), **tokenizer_settings(tokenizer)})
    # The run directory and the settings are checked before any file is written (the data
    # order of a resumed training run too, in start_writing; a busy directory or a checkpoint
    # that does not fit the model only when the loop starts, after the caches).
    directory = finetuning.check_output_dir(FLAGS.output_dir, task)
    trainer = finetuning.make_trainer(
        runtime, task, strategy, output_dir=FLAGS.output_dir, train_step=FLAGS.train_step,
        warmup_step=FLAGS.warmup_step, learning_rate=FLAGS.learning_rate, optimizer="adamw",
        train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.num_keep_checkpoint)
    if FLAGS.do_eval and not FLAGS.do_train:
        finetuning.check_checkpoints_to_evaluate(FLAGS.output_dir)
    if FLAGS.do_predict:
        finetuning.check_something_to_predict_with(FLAGS.output_dir, init_checkpoint,
                                                   trains=FLAGS.do_train, evaluates=FLAGS.do_eval)
    # Every input is read (and so checked) before any cache is written.
    caches = {}
    for wanted, split, path, default in (
            (FLAGS.do_train, "train", FLAGS.train_file, "race_train.tf_record"),
            (FLAGS.do_eval, "dev", FLAGS.eval_file, "race_eval.tf_record")):
        if wanted:
            caches[split] = plan_race_cache(
                FLAGS.data_dir, split, path or io.join(FLAGS.output_dir, default), levels,
                FLAGS.max_seq_length, FLAGS.max_qa_length, tokenizer, FLAGS.num_choices)
    test_examples = (read_race(FLAGS.data_dir, "test", levels, tokenizer.preprocess,
                               FLAGS.num_choices) if FLAGS.do_predict else None)
    if FLAGS.do_predict and not test_examples:
        raise InputError(f"RACE test ({', '.join(levels)}) holds no questions")
    finetuning.start_writing(directory, task, trainer, FLAGS.do_train, [
        *(path for cache in caches.values() for path in cache.files()),
        *race_prediction_files(FLAGS.output_dir)])
    for cache in caches.values():
        write_race_cache(cache, FLAGS.max_seq_length, FLAGS.max_qa_length, tokenizer)
    if "train" in caches:
        task.train_cache, task.train_records = caches["train"].path, caches["train"].records
    if "dev" in caches:
        task.eval_cache = caches["dev"].path
        task.eval_parts = tuple(caches["dev"].counts.items())

    finetuning.train_and_evaluate(trainer, FLAGS.do_train, FLAGS.do_eval)
    if FLAGS.do_predict:
        predict(runtime, task, trainer, tokenizer, init_checkpoint, test_examples)


def predict(runtime, task, trainer, tokenizer, init_checkpoint, examples):
    """Test-set accuracy (overall and per level) and predictions.tsv."""
    weights, source = finetuning.prediction_weights(
        runtime, FLAGS.output_dir, init_checkpoint, task.config, HEAD, {}, FLAGS.do_train)
    model = task.build_model()
    assign_model_weights(model, weights, source)
    features = stack_choice_features([
        convert_race_example(example, FLAGS.max_seq_length, FLAGS.max_qa_length, tokenizer)
        for example in examples])
    # The trainer's resolved setting: --jit_compile unset means XLA on GPUs and TPUs.
    logits = bucketed_logits(model, features, FLAGS.predict_batch_size,
                             trainer.config.jit_compile)
    metrics = multiple_choice_metrics(logits, features["label_ids"],
                                      tuple(level_counts(examples).items()))
    best = trainer.directory.best()
    written = write_race_predictions(FLAGS.output_dir, examples, logits, metrics,
                                     best[task.best_metric] if best else -1)
    logging.info("Test: %s", ", ".join(f"{k} = {v:.4f}" for k, v in sorted(metrics.items())))
    logging.info("Wrote %s", ", ".join(written))


if __name__ == "__main__":
    cli.run(main)
