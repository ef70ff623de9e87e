r"""Fine-tune ALBERT on SQuAD v1.1 or v2.0: train, evaluate every checkpoint, predict.

    python run_squad.py --albert_config_file=albert_base/albert_config.json \
        --output_dir=runs/squad --train_file=train-v1.1.json --predict_file=dev-v1.1.json \
        --train_feature_file=runs/squad/train.tf_record \
        --predict_feature_file=runs/squad/dev.tf_record \
        --predict_feature_left_file=runs/squad/dev_left.json \
        --init_checkpoint=albert_base/model.ckpt-best --spm_model_file=albert_base/30k-clean.model \
        --do_lower_case --max_seq_length=384 --doc_stride=128 --max_query_length=64 \
        --do_train --do_predict --train_batch_size=48 --predict_batch_size=8 \
        --learning_rate=5e-5 --num_train_epochs=2.0 --warmup_proportion=.1 \
        --save_checkpoints_steps=5000 --n_best_size=20 --max_answer_length=30

--version_2_with_negative selects the SQuAD v2.0 head, decoding and scorer
(run_squad_v1.py / run_squad_v2.py fix it, so the original's commands run
unchanged). Training steps: questions / --train_batch_size ×
--num_train_epochs, as the original.

With --do_predict every checkpoint is decoded and scored once on
--predict_file (eval_results.json / eval_results.txt; the best by F1 copied
to model.ckpt-best); at the end model.ckpt-best (or, when this run does not
train and --output_dir has no checkpoint, a fine-tuned --init_checkpoint)
writes predictions.json, nbest_predictions.json and, for v2.0, null_odds.json.
v2.0 tunes its no-answer threshold on --predict_file itself, as the
original, unless --null_score_diff_threshold is given.

With --export_dir (v1.1 only, as the original's run_squad_v1.py) the latest
checkpoint of --output_dir (the original's choice: the last trained step,
not model.ckpt-best; with --restarts, the best seed's model.ckpt-best) is
written as <export_dir>/saved_model/<seconds>/ and
<export_dir>/albert_model.tflite, one [1, max_seq_length] window in, start
and end logits out, computed in float32 (albert.export.squad).

Feature files: --train_feature_file (default <output_dir>/train.tf_record),
--predict_feature_file and --predict_feature_left_file (default
<output_dir>/predict.tf_record and predict_left.json; the left file is JSON,
not the original's pickle). Each records the settings that made it; an
existing file made with other settings is refused, never overwritten.
"""

import functools

from absl import flags, logging

from albert import cli, finetuning, finetuning_cli, io, restarts
from albert.checkpoints import assign_model_weights, read_checkpoint
from albert.errors import InputError
from albert.evaluation import squad_decoding, squad_metrics
from albert.export import squad as squad_export
from albert.finetuning_data import squad
from albert.finetuning_data.feature_cache import tokenizer_settings
from albert.finetuning_data.squad import check_lengths
from albert.tasks.squad import SquadEvaluation, SquadTask

# --- the original's flags (the union of run_squad_v1.py and run_squad_v2.py) ---
flags.DEFINE_string("albert_config_file", None, "albert_config.json of the pretrained model.")
flags.DEFINE_string("vocab_file", None, "Accepted for compatibility (SQuAD needs "
                    "--spm_model_file).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model of the pretrained model.")
flags.DEFINE_string("output_dir", None, "Checkpoints, evaluation results and predictions.")
flags.DEFINE_string("train_file", None, "SQuAD JSON for training, e.g. train-v1.1.json.")
flags.DEFINE_string("predict_file", None, "SQuAD JSON to predict and score, e.g. dev-v1.1.json.")
flags.DEFINE_string("train_feature_file", None,
                    "Training features (default <output_dir>/train.tf_record); written if "
                    "missing, reused if made with the same settings.")
flags.DEFINE_string("predict_feature_file", None,
                    "Prediction features (default <output_dir>/predict.tf_record).")
flags.DEFINE_string("predict_feature_left_file", None,
                    "What decoding needs of each prediction window, as JSON (default "
                    "<output_dir>/predict_left.json).")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights: a pretraining or released checkpoint, or a fine-tuned "
                    "SQuAD one with its head; any format convert_checkpoint.py reads.")
flags.DEFINE_string("albert_hub_module_handle", None,
                    "A TF-Hub ALBERT module directory on disk (used like --init_checkpoint; "
                    "nothing is downloaded).")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_integer("max_seq_length", 384, "Tokens per window sequence.")
flags.DEFINE_integer("doc_stride", 128, "Pieces between the starts of consecutive windows.")
flags.DEFINE_integer("max_query_length", 64, "Question pieces kept (the first ones).")
flags.DEFINE_bool("do_train", False, "Fine-tune.")
flags.DEFINE_bool("do_predict", False,
                  "Decode and score every checkpoint on --predict_file, then predict with the "
                  "best.")
flags.DEFINE_integer("train_batch_size", 32, "Training batch size.")
flags.DEFINE_integer("predict_batch_size", 8, "Prediction batch size.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate (AdamW, as the original).")
flags.DEFINE_float("num_train_epochs", 3.0, "Epochs over the training questions.")
flags.DEFINE_float("warmup_proportion", 0.1, "Share of the steps spent warming up.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("n_best_size", 20, "Answers kept per question in nbest_predictions.json.")
flags.DEFINE_integer("max_answer_length", 30, "Longest answer, in pieces.")
flags.DEFINE_bool("use_einsum", True, "Accepted for compatibility (no numerical effect).")
flags.DEFINE_string("export_dir", None,
                    "SQuAD v1.1: write the latest checkpoint of --output_dir (as the original; "
                    "else model.ckpt-best, else a fine-tuned --init_checkpoint) here as "
                    "saved_model/<seconds>/ (outputs start_log_prob, end_log_prob) and "
                    "albert_model.tflite (outputs start_logits, end_logits); inputs input_ids, "
                    "input_mask, segment_ids of [1, max_seq_length].")
flags.DEFINE_integer("start_n_top", 5, "v2.0: starts kept in the beam.")
flags.DEFINE_integer("end_n_top", 5, "v2.0: ends kept per start.")
flags.DEFINE_float("dropout_prob", 0.1, "v2.0: dropout in the answerability layer.")
finetuning_cli.define_tpu_flags()
# --- added here ---
flags.DEFINE_bool("version_2_with_negative", False,
                  "SQuAD v2.0 (unanswerable questions): the v2.0 head, decoding and scorer.")
flags.DEFINE_float("null_score_diff_threshold", None,
                   "v2.0: answer '' when a question's null score is at least this. Default: "
                   "tuned on --predict_file itself, as the original (an optimistic score).")
finetuning_cli.define_runtime_flags()
flags.adopt_module_key_flags(finetuning_cli)  # --help lists the shared flags too
flags.DEFINE_integer("num_keep_checkpoint", 5,
                     "Checkpoints kept when predicting beside training (0: all); an unevaluated "
                     "one is never deleted, so training without --do_predict keeps them all.")
flags.mark_flags_as_required(["output_dir"])

FLAGS = flags.FLAGS


# Set by run_squad_v1.py / run_squad_v2.py, which are one version each, as the original's.
FIXED_VERSION = {}


def fix_version(version_2: bool, script: str) -> None:
    """Makes --version_2_with_negative `version_2`, shown so in --helpfull; an explicit
    contrary flag is refused (checked first)."""
    flag = FLAGS["version_2_with_negative"]
    FLAGS.set_default("version_2_with_negative", version_2)
    flag.help = f"Fixed to {str(version_2).lower()} by {script} (run_squad.py takes either)."
    FIXED_VERSION.update(version_2=version_2, script=script)


def check_flags():
    if FIXED_VERSION and FLAGS.version_2_with_negative != FIXED_VERSION["version_2"]:
        version = "v2.0" if FIXED_VERSION["version_2"] else "v1.1"
        raise InputError(f"{FIXED_VERSION['script']} runs SQuAD {version}: "
                         f"--{'' if FLAGS.version_2_with_negative else 'no'}"
                         "version_2_with_negative contradicts it (run_squad.py takes either)")
    if not (FLAGS.do_train or FLAGS.do_predict or FLAGS.export_dir):
        raise InputError("At least one of --do_train, --do_predict or --export_dir must be set")
    if FLAGS.export_dir:
        if FLAGS.version_2_with_negative:
            raise InputError("--export_dir exports SQuAD v1.1 models (as the original's "
                             "run_squad_v1.py); the v2.0 scripts have no export")
        squad_export.check_export_dir(FLAGS.export_dir)
    if FLAGS.do_train and not FLAGS.train_file:
        raise InputError("--do_train needs --train_file")
    if FLAGS.do_predict and not FLAGS.predict_file:
        raise InputError("--do_predict needs --predict_file")

    check_lengths(FLAGS.max_seq_length, FLAGS.max_query_length, FLAGS.doc_stride)
    finetuning_cli.check_at_least_one("n_best_size", "max_answer_length", "start_n_top",
                                      "end_n_top", "train_batch_size", "predict_batch_size")


def main(argv):
    del argv
    check_flags()
    out = FLAGS.output_dir
    restarts.main(run_once, restarts.RestartPlan(
        evaluates=FLAGS.do_train and FLAGS.do_predict,
        predicts=FLAGS.do_predict or bool(FLAGS.export_dir),
        seed_flags={"export_dir": None,
                    "train_feature_file": FLAGS.train_feature_file or io.join(
                        out, "train.tf_record"),
                    "predict_feature_file": FLAGS.predict_feature_file or io.join(
                        out, "predict.tf_record"),
                    "predict_feature_left_file": FLAGS.predict_feature_left_file or io.join(
                        out, "predict_left.json")},
        predict_flags={"do_train": False, "train_file": None},
        carried_flags=functools.partial(finetuning_cli.flags_carried_by_initial_checkpoint,
                                        reads_vocab_file=False)))


def run_once():
    """One run: the original's run_squad.py, with the flags as they are."""
    version_2 = FLAGS.version_2_with_negative
    head = "squad_v2" if version_2 else "squad_v1"
    runtime = finetuning_cli.runtime_from_flags()
    strategy = finetuning.create_strategy(runtime)
    config = finetuning.load_config(runtime, FLAGS.max_seq_length)
    tokenizer = finetuning.load_tokenizer(runtime, config, None, FLAGS.spm_model_file,
                                              FLAGS.do_lower_case)
    init_checkpoint = FLAGS.init_checkpoint or FLAGS.albert_hub_module_handle
    weights = finetuning.initial_weights(runtime, config, init_checkpoint, head, {},
                                             f"the SQuAD {'v2.0' if version_2 else 'v1.1'} head")

    lengths = (FLAGS.max_seq_length, FLAGS.doc_stride, FLAGS.max_query_length)
    task = SquadTask(config=config, max_seq_length=FLAGS.max_seq_length, version_2=version_2,
                     start_n_top=FLAGS.start_n_top, end_n_top=FLAGS.end_n_top,
                     head_dropout=FLAGS.dropout_prob, initial_weights=weights,
                     settings={"task": head, "max_seq_length": FLAGS.max_seq_length,
                               "doc_stride": FLAGS.doc_stride,
                               "max_query_length": FLAGS.max_query_length,
                               **tokenizer_settings(tokenizer)})
    # The run directory is checked before any feature file is written into it (the data order
    # of a resumed training run in start_writing; a busy directory or a checkpoint that does
    # not fit the model only when the loop starts, after the feature files).
    directory = finetuning.check_output_dir(FLAGS.output_dir, task)
    # Every input is read (and so checked) before any feature file is written.
    train_cache, scorable, write_predict_features = None, True, lambda: None
    feature_files = []
    if FLAGS.train_file:
        train_cache = squad.plan_train_features(
            FLAGS.train_file, FLAGS.train_feature_file or io.join(FLAGS.output_dir,
                                                                  "train.tf_record"),
            tokenizer, *lengths)
        feature_files += train_cache.files()
    if FLAGS.do_predict:
        dataset = squad.load_squad_json(FLAGS.predict_file)["data"]
        scorable = version_2 or squad_metrics.has_gold_answers(dataset)
        if FLAGS.do_train and not scorable:
            raise InputError(f"{FLAGS.predict_file} has no answers to pick the best "
                             "checkpoint by; train with a dev file that has them")
        if not FLAGS.do_train:
            finetuning.check_something_to_predict_with(FLAGS.output_dir, init_checkpoint,
                                                       trains=False, evaluates=scorable)
        predict_files = (
            FLAGS.predict_feature_file or io.join(FLAGS.output_dir, "predict.tf_record"),
            FLAGS.predict_feature_left_file or io.join(FLAGS.output_dir, "predict_left.json"))
        predict, write_predict_features = squad.plan_predict_features(
            FLAGS.predict_file, *predict_files, tokenizer, *lengths)
        feature_files += [*predict_files, *(io.join(FLAGS.output_dir, name) for name in (
            squad_decoding.PREDICTIONS_FILE, squad_decoding.NBEST_FILE,
            squad_decoding.NULL_ODDS_FILE))]
        task.evaluation = SquadEvaluation(
            predict, dataset, FLAGS.output_dir, FLAGS.n_best_size, FLAGS.max_answer_length,
            FLAGS.null_score_diff_threshold, bucket_v1=FLAGS.bucket_by_length)
        if not scorable:
            logging.info("%s has no answers: predictions are written, not scored",
                         FLAGS.predict_file)
    questions = train_cache.counts["questions"] if train_cache else 0
    # The original: steps from the questions (not the windows) of --train_file.
    train_step = int(questions / FLAGS.train_batch_size * FLAGS.num_train_epochs)
    if FLAGS.do_train and train_step < 1:
        raise InputError(f"{questions} training questions give no step at batch size "
                         f"{FLAGS.train_batch_size} and {FLAGS.num_train_epochs} epochs")
    evaluation = task.evaluation
    if evaluation is not None and not scorable:
        task.evaluation = None  # nothing to score checkpoints by
    trainer = finetuning.make_trainer(
        runtime, task, strategy, output_dir=FLAGS.output_dir, train_step=max(train_step, 1),
        warmup_step=int(train_step * FLAGS.warmup_proportion), learning_rate=FLAGS.learning_rate,
        optimizer="adamw", train_batch_size=FLAGS.train_batch_size,
        eval_batch_size=FLAGS.predict_batch_size,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps,
        keep_checkpoint_max=FLAGS.num_keep_checkpoint)
    if FLAGS.export_dir and not FLAGS.do_train:
        # Something to export, checked before any work.
        choose_export_checkpoint(runtime, trainer, init_checkpoint)
    finetuning.start_writing(directory, task, trainer, FLAGS.do_train, feature_files)
    if train_cache is not None and FLAGS.do_train:
        squad.write_train_features(train_cache, tokenizer, *lengths)
        task.train_cache, task.train_records = train_cache.path, train_cache.records
    write_predict_features()
    if FLAGS.do_train:
        finetuning.train_and_evaluate(trainer, True, task.evaluation is not None)
    elif task.evaluation is not None and trainer.checkpoints.steps():
        trainer.evaluate_checkpoints()
    if FLAGS.do_predict:
        task.evaluation = evaluation
        predict_with_best(runtime, task, trainer, init_checkpoint, head)
    if FLAGS.export_dir:
        export_squad_v1(runtime, task, trainer, init_checkpoint)


def predict_with_best(runtime, task, trainer, init_checkpoint, head):
    """The final predictions and scores (the best checkpoint), as the original's last step."""
    weights, source = finetuning.prediction_weights(
        runtime, FLAGS.output_dir, init_checkpoint, task.config, head, {}, FLAGS.do_train)
    model = task.build_model()
    assign_model_weights(model, weights, source)
    # The trainer's resolved setting: --jit_compile unset means XLA on GPUs and TPUs.
    scores = task.predict_and_score(model, FLAGS.predict_batch_size, trainer.config.jit_compile)
    best = trainer.directory.best()
    step = best["step"] if best and source.endswith("model.ckpt-best") else None
    if scores is not None:
        trainer.directory.record_final(scores, str(step) if step is not None else source)
        logging.info("Final (%s): %s", source,
                     ", ".join(f"{k} = {v:.4f}" for k, v in sorted(scores.items())))
    logging.info("Wrote the predictions of %s to %s", source, FLAGS.output_dir)


def choose_export_checkpoint(runtime, trainer, init_checkpoint):
    """(checkpoint, format) that --export_dir exports: the latest checkpoint of --output_dir,
    as the original exported it (not model.ckpt-best); else model.ckpt-best (a directory
    whose numbered checkpoints were removed); else, when this run does not train, a
    fine-tuned --init_checkpoint (with --restarts: the best seed's model.ckpt-best)."""
    latest = trainer.checkpoints.latest_step()
    if latest is not None:
        return trainer.checkpoints.prefix(latest), "tf1"
    best = io.join(FLAGS.output_dir, "model.ckpt-best")
    if io.exists(best + ".index"):
        return best, "tf1"
    if init_checkpoint and not FLAGS.do_train:
        return init_checkpoint, runtime.init_checkpoint_format
    raise InputError(f"Nothing to export: no checkpoint in {FLAGS.output_dir} and no "
                     "fine-tuned --init_checkpoint")


def export_squad_v1(runtime, task, trainer, init_checkpoint):
    """--export_dir (SQuAD v1.1): `albert.export.squad` of `choose_export_checkpoint`, on
    the chief worker only."""
    if not trainer.worker.is_chief:
        return
    source, checkpoint_format = choose_export_checkpoint(runtime, trainer, init_checkpoint)
    weights, _ = read_checkpoint(source, checkpoint_format, task.config, heads="required",
                                 head="squad_v1", head_dims={})
    model = finetuning.float32_model(task, weights, source)
    written = squad_export.export_squad_v1(model, FLAGS.export_dir, FLAGS.max_seq_length)
    logging.info("Exported %s to %s", source, " and ".join(written))


if __name__ == "__main__":
    cli.run(main)
