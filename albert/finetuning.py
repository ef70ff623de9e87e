"""The steps every fine-tuning script takes, from plain settings.

`run_classifier.py`, `run_squad.py` and `run_race.py` read their flags once
(`albert.finetuning_cli.runtime_from_flags` for the flags they share) and call
these, so every fine-tuning script starts, trains, evaluates and picks its
prediction weights the same way. Nothing here reads flags: a program that
fine-tunes without absl builds a `FinetuningRuntime` itself.
"""

import dataclasses
from typing import Optional, Tuple

import keras
from absl import logging

from albert import io, tokenization
from albert.checkpoints import assign_model_weights, carried_config, read_checkpoint
from albert.checkpoints.keras_hub_preset import preset_tokenizer
from albert.config import AlbertConfig
from albert.errors import CheckpointMismatchError, InputError
from albert.run_builder import OptimizerSettings, RunSettings, build_trainer
from albert.training import distribute
from albert.training.checkpointing import TrainingCheckpoints
from albert.training.loop import TrainerConfig
from albert.training.run_directory import BEST_TRIAL, EVAL_JSON, EVAL_TXT, RunDirectory

BUCKET_WINDOW = 50  # steps whose examples are sorted by length together


@dataclasses.dataclass(frozen=True)
class FinetuningRuntime:
    """What the fine-tuning scripts' shared flags say (each field is the flag of its name,
    `hub_module_handle` is --albert_hub_module_handle)."""

    strategy: str = "auto"
    tpu: Optional[str] = None
    cpu_devices: int = 1
    albert_config_file: Optional[str] = None
    allow_unknown_config_keys: bool = False
    init_checkpoint: Optional[str] = None
    hub_module_handle: Optional[str] = None
    init_checkpoint_format: str = "auto"
    init_encoder_only: bool = False
    mixed_precision: str = "none"
    jit_compile: Optional[bool] = None
    steps_per_loop: Optional[int] = None
    iterations_per_loop: int = 1000
    random_seed: int = 12345
    bucket_by_length: bool = False
    progress: bool = True
    adam_bias_correction: bool = False
    gradient_accumulation_steps: int = 1
    rematerialize: bool = False
    digit_comma_rule: str = "intended"


def create_strategy(runtime: FinetuningRuntime):
    return distribute.create_strategy(runtime.strategy, runtime.tpu, runtime.cpu_devices)


def load_config(runtime: FinetuningRuntime, max_seq_length: int, **dropouts) -> AlbertConfig:
    """The model's config (--albert_config_file, or the one an initial checkpoint carries),
    checked against `max_seq_length`; `dropouts` override the config's."""
    if runtime.albert_config_file:
        config = AlbertConfig.from_json_file(
            runtime.albert_config_file, allow_unknown_keys=runtime.allow_unknown_config_keys)
    else:
        config = _carried_config(runtime)
    if dropouts:
        config = dataclasses.replace(config, **dropouts)
    if max_seq_length > config.max_position_embeddings:
        raise InputError(f"--max_seq_length={max_seq_length} exceeds the config's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    return config


def _carried_config(runtime: FinetuningRuntime) -> AlbertConfig:
    """The config an --albert_hub_module_handle or --init_checkpoint carries (our exported
    encoder, HF, Keras, a KerasHub preset)."""
    handle = runtime.hub_module_handle or runtime.init_checkpoint
    carried = carried_config(handle, runtime.init_checkpoint_format) if handle else None
    if carried is None:
        raise InputError("--albert_config_file is required (or an --init_checkpoint or "
                         "--albert_hub_module_handle that carries its config: a KerasHub preset, "
                         "a Hugging Face directory, an encoder from python -m albert.export)")
    return carried


def load_tokenizer(runtime: FinetuningRuntime, config, vocab_file: Optional[str],
                   spm_model_file: Optional[str], do_lower_case: bool):
    """--spm_model_file (or --vocab_file; without either, the tokenizer of an --init_checkpoint
    KerasHub preset), checked against the model: the special symbols, and no id beyond the
    config's vocab_size."""
    if not spm_model_file and not vocab_file:
        spm_model_file = preset_tokenizer(runtime.init_checkpoint)
        if spm_model_file:
            logging.info("Tokenizer: the SentencePiece model of the preset, %s", spm_model_file)
    tokenizer = tokenization.load_tokenizer(vocab_file, spm_model_file, do_lower_case,
                                            runtime.digit_comma_rule)
    tokenization.require_special_tokens(tokenizer)
    tokenization.require_vocabulary_within(tokenizer, config.vocab_size)
    return tokenizer


def check_output_dir(output_dir: str, task) -> RunDirectory:
    """The run directory, refused if it holds a run with other run files (other settings)."""
    directory = RunDirectory(output_dir)
    directory.check_run_files(task.run_files())
    return directory


def check_checkpoints_to_evaluate(output_dir: str) -> None:
    """--do_eval without --do_train evaluates the run's checkpoints: there must be some."""
    if not TrainingCheckpoints(output_dir).steps():
        raise InputError(f"No checkpoint to evaluate in {output_dir}: --do_eval without "
                         "--do_train evaluates the checkpoints of an earlier training run there "
                         "(an --init_checkpoint is not evaluated; --do_predict predicts with it)")


def check_something_to_predict_with(output_dir: str, init_checkpoint: Optional[str],
                                    trains: bool, evaluates: bool) -> None:
    """A run that predicts (or exports) uses model.ckpt-best, which only dev evaluation makes,
    or, when it does not train, a fine-tuned --init_checkpoint: checked before the run
    trains, not after."""
    if io.exists(io.join(output_dir, "model.ckpt-best.index")):
        return
    if trains:
        if evaluates:
            return
        raise InputError("--do_predict / --export_dir use model.ckpt-best, the checkpoint that "
                         "scored best on dev, and only --do_eval makes it: add --do_eval")
    if init_checkpoint or (evaluates and TrainingCheckpoints(output_dir).steps()):
        return
    raise InputError(f"Nothing to predict with: no checkpoint in {output_dir} and no fine-tuned "
                     "--init_checkpoint (train with --do_train first)")


def start_writing(directory, task, trainer, trains: bool, outputs) -> None:
    """Called once every check has passed, before the run's first write.

    Checks the run files once more with the data order of a run that trains
    (`trainer.run_files`: batch size, seed, ...; a resume with another one is
    refused here, before the caches), removes what runs killed outright left
    of this run's outputs (their temporaries; a run still writing one keeps
    it), and records the run files (config and settings), so a later run
    with other settings is refused even when this one only evaluates or
    predicts.
    """
    directory.check_run_files(trainer.run_files(training=trains))
    own = [directory.path(name) for name in (*task.run_files(), EVAL_JSON, EVAL_TXT, BEST_TRIAL)]
    for path in [*own, *outputs]:
        for stale in io.remove_stale_temporaries(path):
            logging.info("Removed %s, left by a killed run", stale)
    directory.write_run_files(task.run_files())


def initial_weights(runtime: FinetuningRuntime, config, path: Optional[str], head: str,
                    head_dims: dict, what: str) -> Optional[dict]:
    """Weights to start fine-tuning from (--init_checkpoint), checked against the task's head.

    A checkpoint may hold this task's head (a fine-tuned one: all of it is
    used), another head or none (the encoder is used); --init_encoder_only
    sets its head aside. `what` names the task in the error for a head of the
    wrong size.
    """
    if not path:
        return None
    head_policy = "ignore" if runtime.init_encoder_only else "optional"
    try:
        weights, _ = read_checkpoint(path, runtime.init_checkpoint_format, config,
                                     heads=head_policy, head=head, head_dims=head_dims)
    except CheckpointMismatchError as error:
        if "output_weights" in str(error) and not runtime.init_encoder_only:
            raise CheckpointMismatchError(
                f"{error}\n  The checkpoint's head does not fit {what}; pass "
                "--init_encoder_only to start a new head from its encoder") from None
        raise
    return weights


def prediction_weights(runtime: FinetuningRuntime, output_dir: str,
                       init_checkpoint: Optional[str], config, head: str, head_dims: dict,
                       trained: bool, action: str = "Predicting") -> Tuple[dict, str]:
    """(weights, source) to predict with: model.ckpt-best of the run, or, when this run did
    not train, a fine-tuned --init_checkpoint. `action` names the use in the log."""
    best = io.join(output_dir, "model.ckpt-best")
    if io.exists(best + ".index"):
        source, checkpoint_format = best, "tf1"
    elif init_checkpoint and not trained:
        source, checkpoint_format = init_checkpoint, runtime.init_checkpoint_format
    else:
        raise InputError(f"Nothing to predict with: no model.ckpt-best in {output_dir} "
                         "(train with --do_eval first), and no fine-tuned --init_checkpoint")
    weights, _ = read_checkpoint(source, checkpoint_format, config, heads="required", head=head,
                                 head_dims=head_dims)
    logging.info("%s with %s", action, source)
    return weights, source


def float32_model(task, weights: dict, source: str):
    """The task's model holding `weights`, computing in float32 whatever mixed-precision
    policy this process's training set globally: exports serve float32 (and TFLite's
    built-in ops need it). The global policy is restored afterwards."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("float32")
    try:
        model = task.build_model()
    finally:
        keras.mixed_precision.set_global_policy(previous)
    assign_model_weights(model, weights, source)
    return model


def make_trainer(runtime: FinetuningRuntime, task, strategy, *, output_dir: str,
                 train_step: int, warmup_step: int, learning_rate: float, optimizer: str,
                 train_batch_size: int, eval_batch_size: int, save_checkpoints_steps: int,
                 keep_checkpoint_max: int):
    """The one training loop (`albert.run_builder`), configured for fine-tuning."""
    return build_trainer(task, strategy, RunSettings(
        TrainerConfig(output_dir=output_dir, num_train_steps=train_step,
                      train_batch_size=train_batch_size, eval_batch_size=eval_batch_size,
                      save_checkpoints_steps=save_checkpoints_steps,
                      keep_checkpoint_max=keep_checkpoint_max,
                      keep_unevaluated_checkpoints=True,
                      mixed_precision=runtime.mixed_precision, show_progress=runtime.progress,
                      random_seed=runtime.random_seed,
                      bucket_window=BUCKET_WINDOW if runtime.bucket_by_length else 0,
                      gradient_accumulation_steps=runtime.gradient_accumulation_steps,
                      rematerialize=runtime.rematerialize),
        OptimizerSettings(optimizer, learning_rate, train_step, warmup_step,
                          bias_correction=runtime.adam_bias_correction),
        steps_per_loop=runtime.steps_per_loop, iterations_per_loop=runtime.iterations_per_loop,
        jit_compile=runtime.jit_compile),
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
