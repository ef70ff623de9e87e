"""What the fine-tuning scripts share: flags, strategy, initial weights, the trainer.

`run_classifier.py` and `run_race.py` define their own original flags (names
and defaults differ between the original scripts) and call these for the
rest, so every fine-tuning script starts, trains, evaluates and picks its
prediction weights the same way.
"""

import dataclasses
from typing import Optional, Tuple

from absl import flags, logging

from albert import cli, io, memory, restarts, tokenization
from albert.checkpoints import carried_config, format_names, read_checkpoint
from albert.checkpoints.keras_hub_preset import preset_tokenizer
from albert.errors import CheckpointMismatchError, InputError
from albert.training import distribute
from albert.training.checkpointing import TrainingCheckpoints
from albert.run_builder import OptimizerSettings, RunSettings, build_trainer
from albert.training.loop import MIXED_PRECISION, TrainerConfig
from albert.training.run_directory import EVAL_JSON, EVAL_TXT, RunDirectory

FLAGS = flags.FLAGS


def define_tpu_flags() -> None:
    """The original's TPU flags (the strategy is what finds and counts the cores)."""
    flags.DEFINE_integer("iterations_per_loop", 1000,
                         "TPU steps per loop (used on TPUs when --steps_per_loop is not given).")
    flags.DEFINE_bool("use_tpu", False, "Use a TPU (same as --strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "TPU name or address.")
    flags.DEFINE_string("tpu_zone", None,
                        "Accepted for compatibility; the TPU resolver finds the zone.")
    flags.DEFINE_string("gcp_project", None, "Accepted for compatibility.")
    flags.DEFINE_string("master", None, "Accepted for compatibility.")
    flags.DEFINE_integer("num_tpu_cores", 8,
                         "Accepted for compatibility (the strategy counts cores).")


def define_runtime_flags() -> None:
    """Flags added to the original's: strategy, precision, XLA, seed, initial weights."""
    distribute.define_flags()
    memory.define_flags()
    flags.DEFINE_enum("mixed_precision", "none", MIXED_PRECISION, "Mixed precision policy.")
    flags.DEFINE_bool("jit_compile", None,
                      "Compile the training step and evaluation with XLA (default: on with GPUs "
                      "and TPUs, off on CPUs; --nojit_compile turns it off).")
    flags.DEFINE_integer("steps_per_loop", None,
                         "Steps per call into the graph (default: --iterations_per_loop on TPUs, "
                         "100 on GPUs, 1 on CPUs).")
    flags.DEFINE_integer("random_seed", 12345,
                         "Seed of the input order, dropout and initialisation.")
    flags.DEFINE_enum("init_checkpoint_format", "auto", ["auto", *format_names()],
                      "Format of --init_checkpoint.")
    flags.DEFINE_bool("init_encoder_only", False,
                      "Take only the encoder from --init_checkpoint, e.g. one fine-tuned on "
                      "another task whose head does not fit this one.")
    flags.DEFINE_bool("bucket_by_length", False,
                      "Train on batches of similar length, each cut to its longest example: "
                      "within every window of 50 steps the examples are sorted by length, cut "
                      "into batches and the batches shuffled. Faster on short texts; batches "
                      "are then less random in their lengths, and their shapes vary (not for "
                      "TPUs).")
    flags.DEFINE_bool("progress", True, "Show a progress bar.")
    flags.DEFINE_bool("adam_bias_correction", False,
                      "Adam's bias correction in the optimizer (Hugging Face's and Keras's "
                      "AdamW), with the original's weight decay, exclusions and clip; off: the "
                      "original's optimizer, which has none (docs/finetuning.md).")
    cli.define_config_flags()

    restarts.define_flags()
    # Flags defined in other modules are listed by --help only when declared key flags; the
    # scripts adopt this module's, so these are listed there too.
    flags.adopt_module_key_flags(distribute)
    flags.adopt_module_key_flags(cli)
    flags.adopt_module_key_flags(restarts)


BUCKET_WINDOW = 50  # steps whose examples are sorted by length together


def create_strategy():
    """The strategy from --strategy / --use_tpu / --tpu / --tpu_name."""
    tpu = FLAGS.tpu or FLAGS.tpu_name
    name = "tpu" if FLAGS.use_tpu and FLAGS.strategy == "auto" else FLAGS.strategy
    return distribute.create_strategy(name, tpu, FLAGS.cpu_devices)


def load_config(max_seq_length: int, **dropouts):
    """--albert_config_file, checked against `max_seq_length`; `dropouts` override the config's."""
    if FLAGS.albert_config_file:
        config = cli.load_albert_config(FLAGS.albert_config_file)
    else:
        config = _hub_module_config()
    if dropouts:
        config = dataclasses.replace(config, **dropouts)
    if max_seq_length > config.max_position_embeddings:
        raise InputError(f"--max_seq_length={max_seq_length} exceeds the config's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    return config


def _hub_module_config():
    """The config an --albert_hub_module_handle or --init_checkpoint carries (our exported
    encoder, HF, Keras, a KerasHub preset)."""
    handle = getattr(FLAGS, "albert_hub_module_handle", None) or FLAGS.init_checkpoint
    carried = carried_config(handle, FLAGS.init_checkpoint_format) if handle else None
    if carried is None:
        raise InputError("--albert_config_file is required (or an --init_checkpoint or "
                         "--albert_hub_module_handle that carries its config: a KerasHub preset, "
                         "a Hugging Face directory, an encoder from python -m albert.export)")
    return carried


def load_tokenizer(config, vocab_file: Optional[str], spm_model_file: Optional[str],
                   do_lower_case: bool):
    """--spm_model_file (or --vocab_file; without either, the tokenizer of an --init_checkpoint
    KerasHub preset), checked against the model: the special symbols, and no id beyond the
    config's vocab_size."""
    if not spm_model_file and not vocab_file:
        spm_model_file = preset_tokenizer(FLAGS.init_checkpoint)
        if spm_model_file:
            logging.info("Tokenizer: the SentencePiece model of the preset, %s", spm_model_file)
    tokenizer = tokenization.load_tokenizer(vocab_file, spm_model_file, do_lower_case)
    tokenization.require_special_tokens(tokenizer)
    tokenization.require_vocabulary_within(tokenizer, config.vocab_size)
    return tokenizer


def check_at_least_one(*names: str) -> None:
    """Flags that count something (batch sizes, steps) must be at least 1."""
    for name in names:
        value = getattr(FLAGS, name)
        if value < 1:
            raise InputError(f"--{name} must be at least 1, got {value}")


def check_output_dir(task):
    """The run directory, refused if it holds a run with other run files (other settings)."""
    directory = RunDirectory(FLAGS.output_dir)
    directory.check_run_files(task.run_files())
    return directory


def check_checkpoints_to_evaluate(output_dir: str) -> None:
    """--do_eval without --do_train evaluates the run's checkpoints: there must be some."""
    if not TrainingCheckpoints(output_dir).steps():
        raise InputError(f"No checkpoint to evaluate in {output_dir}: --do_eval without "
                         "--do_train evaluates the checkpoints of an earlier training run there "
                         "(an --init_checkpoint is not evaluated; --do_predict predicts with it)")


def check_something_to_predict_with(output_dir: str, init_checkpoint: Optional[str],
                                    evaluates: bool) -> None:
    """A run that predicts without training needs model.ckpt-best, checkpoints this run
    evaluates (`evaluates`) to make one, or a fine-tuned --init_checkpoint."""
    if init_checkpoint or io.exists(io.join(output_dir, "model.ckpt-best.index")):
        return
    if evaluates and TrainingCheckpoints(output_dir).steps():
        return
    raise InputError(f"Nothing to predict with: no checkpoint in {output_dir} and no fine-tuned "
                     "--init_checkpoint (train with --do_train first)")


def start_writing(directory, task, outputs) -> None:
    """Called once every check has passed, before the run's first write.

    Removes what runs killed outright left of this run's outputs (their
    temporaries; a run still writing one keeps it), and records the run
    files (config and settings), so a later run with other settings is
    refused even when this one only evaluates or predicts.
    """
    own = [directory.path(name) for name in (*task.run_files(), EVAL_JSON, EVAL_TXT)]
    for path in [*own, *outputs]:
        for stale in io.remove_stale_temporaries(path):
            logging.info("Removed %s, left by a killed run", stale)
    directory.write_run_files(task.run_files())


def initial_weights(config, path: Optional[str], head: str, head_dims: dict,
                    what: str) -> Optional[dict]:
    """Weights to start fine-tuning from (--init_checkpoint), checked against the task's head.

    A checkpoint may hold this task's head (a fine-tuned one: all of it is
    used), another head or none (the encoder is used); --init_encoder_only
    sets its head aside. `what` names the task in the error for a head of the
    wrong size.
    """
    if not path:
        return None
    head_policy = "ignore" if FLAGS.init_encoder_only else "optional"
    try:
        weights, _ = read_checkpoint(path, FLAGS.init_checkpoint_format, config, heads=head_policy,
                                     head=head, head_dims=head_dims)
    except CheckpointMismatchError as error:
        if "output_weights" in str(error) and not FLAGS.init_encoder_only:
            raise CheckpointMismatchError(
                f"{error}\n  The checkpoint's head does not fit {what}; pass "
                "--init_encoder_only to start a new head from its encoder") from None
        raise
    return weights


def prediction_weights(output_dir: str, init_checkpoint: Optional[str], config, head: str,
                       head_dims: dict, trained: bool,
                       action: str = "Predicting") -> Tuple[dict, str]:
    """(weights, source) to predict with: model.ckpt-best of the run, or, when this run did
    not train, a fine-tuned --init_checkpoint. `action` names the use in the log."""
    best = io.join(output_dir, "model.ckpt-best")
    if io.exists(best + ".index"):
        source, checkpoint_format = best, "tf1"
    elif init_checkpoint and not trained:
        source, checkpoint_format = init_checkpoint, FLAGS.init_checkpoint_format
    else:
        raise InputError(f"Nothing to predict with: no model.ckpt-best in {output_dir} "
                         "(train with --do_eval first), and no fine-tuned --init_checkpoint")
    weights, _ = read_checkpoint(source, checkpoint_format, config, heads="required", head=head,
                                 head_dims=head_dims)
    logging.info("%s with %s", action, source)
    return weights, source


def make_trainer(task, strategy, *, output_dir: str, train_step: int,
                 warmup_step: int, learning_rate: float, optimizer: str, train_batch_size: int,
                 eval_batch_size: int, save_checkpoints_steps: int, keep_checkpoint_max: int):
    """The one training loop (`albert.run_builder`), configured from the script's flags."""
    return build_trainer(task, strategy, RunSettings(
        TrainerConfig(output_dir=output_dir, num_train_steps=train_step,
                      train_batch_size=train_batch_size, eval_batch_size=eval_batch_size,
                      save_checkpoints_steps=save_checkpoints_steps,
                      keep_checkpoint_max=keep_checkpoint_max,
                      mixed_precision=FLAGS.mixed_precision, show_progress=FLAGS.progress,
                      random_seed=FLAGS.random_seed,
                      bucket_window=BUCKET_WINDOW if FLAGS.bucket_by_length else 0,
                      gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
                      rematerialize=FLAGS.rematerialize),
        OptimizerSettings(optimizer, learning_rate, train_step, warmup_step,
                          bias_correction=FLAGS.adam_bias_correction),
        steps_per_loop=FLAGS.steps_per_loop, iterations_per_loop=FLAGS.iterations_per_loop,
        jit_compile=FLAGS.jit_compile),
        task.max_seq_length, sequences_per_example=getattr(task, "num_choices", None) or 1)


def train_and_evaluate(trainer, do_train: bool, do_eval: bool) -> Optional[dict]:
    """--do_train (evaluating each checkpoint with --do_eval), or --do_eval alone."""
    if do_train:
        result = trainer.train(do_eval=do_eval)
    elif do_eval:
        result = trainer.evaluate_checkpoints()
    else:
        result = None
    if result:
        logging.info("Last evaluation: %s",
                     ", ".join(f"{k} = {v:.4f}" for k, v in sorted(result.items())))
    elif do_eval:
        # Nothing left to evaluate (a finished run): say what the journal holds.
        best = trainer.directory.best()
        if best:
            metric = trainer.task.best_metric
            logging.info("Every checkpoint in %s is evaluated; the best is step %d with %s = "
                         "%.4f (all results in eval_results.txt)", trainer.config.output_dir,
                         best["step"], metric, best[metric])
    return result
