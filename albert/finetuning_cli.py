"""The fine-tuning scripts' shared flags, and the one place that reads them.

`run_classifier.py`, `run_squad.py` and `run_race.py` define their own original
flags (names and defaults differ between the original scripts), add these, and
turn them into a `FinetuningRuntime` with `runtime_from_flags`; the steps they
share (`albert.finetuning`) take that and read no flags.
"""

from typing import Dict

from absl import flags

from albert import cli, io, memory, restarts
from albert.checkpoints import ALBERT_CONFIG_FILE, format_names
from albert.checkpoints.keras_hub_preset import preset_tokenizer
from albert.errors import InputError
from albert.tokenization import DIGIT_COMMA_RULES
from albert.finetuning import FinetuningRuntime
from albert.training import distribute
from albert.training.loop import MIXED_PRECISION

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
    flags.DEFINE_enum("digit_comma_rule", "intended", list(DIGIT_COMMA_RULES),
                      "How a SentencePiece piece ending in a digit and a comma is split: "
                      "'intended' (what the original meant, also what Hugging Face and Model "
                      "Garden do) or 'python3_original' (what the original does under Python 3: "
                      "the re-encoded digits keep their word-start marker).")
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
    flags.adopt_module_key_flags(memory)


def flags_carried_by_initial_checkpoint(best_directory: str,
                                        reads_vocab_file: bool = True) -> Dict[str, object]:
    """`RestartPlan.carried_flags`: where the seeds took the config and the tokenizer from the
    initial checkpoint (a KerasHub preset, a Hugging Face directory, an export), the final
    run takes the config the best seed wrote and the preset's SentencePiece model.
    `reads_vocab_file`: False for run_squad.py, which accepts --vocab_file and ignores it."""
    values = {}
    if not FLAGS.albert_config_file:
        values["albert_config_file"] = io.join(best_directory, ALBERT_CONFIG_FILE)
    uses_vocab_file = reads_vocab_file and FLAGS.vocab_file
    if not FLAGS.spm_model_file and not uses_vocab_file and FLAGS.init_checkpoint:
        values["spm_model_file"] = preset_tokenizer(FLAGS.init_checkpoint)
    return values


def runtime_from_flags() -> FinetuningRuntime:
    """The shared flags as plain settings (read again for each run of a script that
    restarts: `albert.restarts` changes flags between runs)."""
    return FinetuningRuntime(
        # --use_tpu / --tpu_name are the original's names for --strategy=tpu / --tpu.
        strategy="tpu" if FLAGS.use_tpu and FLAGS.strategy == "auto" else FLAGS.strategy,
        tpu=FLAGS.tpu or FLAGS.tpu_name,
        cpu_devices=FLAGS.cpu_devices,
        albert_config_file=FLAGS.albert_config_file,
        allow_unknown_config_keys=FLAGS.allow_unknown_config_keys,
        init_checkpoint=FLAGS.init_checkpoint,
        hub_module_handle=getattr(FLAGS, "albert_hub_module_handle", None),
        init_checkpoint_format=FLAGS.init_checkpoint_format,
        init_encoder_only=FLAGS.init_encoder_only,
        mixed_precision=FLAGS.mixed_precision,
        jit_compile=FLAGS.jit_compile,
        steps_per_loop=FLAGS.steps_per_loop,
        iterations_per_loop=FLAGS.iterations_per_loop,
        random_seed=FLAGS.random_seed,
        bucket_by_length=FLAGS.bucket_by_length,
        progress=FLAGS.progress,
        adam_bias_correction=FLAGS.adam_bias_correction,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        rematerialize=FLAGS.rematerialize,
        digit_comma_rule=FLAGS.digit_comma_rule)


def check_at_least_one(*names: str) -> None:
    """Flags that count something (batch sizes, steps) must be at least 1."""
    for name in names:
        value = getattr(FLAGS, name)
        if value < 1:
            raise InputError(f"--{name} must be at least 1, got {value}")
