r"""Pretrain ALBERT (masked LM + sentence-order prediction) with ALBERT's LAMB or AdamW.

    python run_pretraining.py --albert_config_file=configs/albert_base_v2.json \
        --input_file=data/train.tfrecord-* --eval_file=data/heldout.tfrecord \
        --output_dir=runs/base --train_batch_size=4096 --max_seq_length=512 \
        --do_train --do_eval

Runs on a TPU, one or several GPUs, several machines (TF_CONFIG) or a CPU,
with the same command (`--strategy=auto`). Killed runs resume from the latest
checkpoint in --output_dir with the same data order and random state.

Outputs in --output_dir: model.ckpt-N (original variable names, optimizer
slots adam_m/adam_v, global_step) with training_state-N.json,
model.ckpt-best (by masked_lm_accuracy on --eval_file), eval_results.json /
eval_results.txt, train_log.jsonl (one JSON object per step), tensorboard/,
albert_config.json.

The data's summary (<output>.summary.json, written by
create_pretraining_data.py beside the records) is the contract: the sequence
and prediction lengths default to it, explicit flags must agree with it, and
token ids must fit the config's vocab_size.

Differences from the original (docs/fidelity.md): evaluation uses
--eval_file (default: the training files, as the original did) and evaluates
each checkpoint exactly once; --init_checkpoint must fit the model (a
checkpoint that matches nothing used to train from scratch silently) and may
be in any format convert_checkpoint.py reads; --masked_lm_budget works (the
original crashed); --init_from_group0 initialises every group (the original
silently skipped some).
"""

from absl import flags, logging

from albert import cli, io, memory
from albert.checkpoints import carried_config, format_names
from albert.errors import InputError
from albert.pretraining_data.schema import expand_record_patterns, load_data_contract
from albert.tasks.pretraining import PretrainingTask
from albert.training import distribute
from albert.run_builder import OptimizerSettings, RunSettings, build_trainer
from albert.training.loop import MIXED_PRECISION, TrainerConfig
from albert.training.inputs import shard_sources

# --- the original's flags ---
flags.DEFINE_string("albert_config_file", None,
                    "albert_config.json of the model to train (optional with an --init_checkpoint "
                    "that carries its config: a KerasHub preset, a Hugging Face directory).")
flags.DEFINE_string("input_file", None, "Training TFRecords: comma-separated files or globs.")
flags.DEFINE_string("output_dir", None, "Checkpoints, logs and evaluation results go here.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights (original TF1, Hugging Face, Model Garden or .keras; "
                    "see --init_checkpoint_format).")
flags.DEFINE_integer("max_seq_length", 512,
                     "Sequence length of the data (default: the data summary's; must agree).")
flags.DEFINE_integer("max_predictions_per_seq", 20,
                     "Masked positions per sequence (default: the data summary's; must agree).")
flags.DEFINE_bool("do_train", True, "Train.")
flags.DEFINE_bool("do_eval", False,
                  "Evaluate: every checkpoint during training, or, without --do_train, every "
                  "checkpoint in --output_dir not evaluated yet.")
flags.DEFINE_integer("train_batch_size", 4096, "Global training batch size.")
flags.DEFINE_integer("eval_batch_size", 64, "Evaluation batch size.")
flags.DEFINE_enum("optimizer", "lamb", ["adamw", "lamb"], "ALBERT's LAMB or AdamW.")
flags.DEFINE_float("learning_rate", 0.00176, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 125000, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", 3125, "Linear warm-up steps.")
flags.DEFINE_integer("start_warmup_step", 0, "Step at which warm-up starts.")
flags.DEFINE_integer("save_checkpoints_steps", 5000, "Checkpoint (and evaluate) every N steps.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Checkpoints kept (0: all).")
flags.DEFINE_integer("iterations_per_loop", 1000,
                     "TPU steps per loop (used on TPUs when --steps_per_loop is not given).")
flags.DEFINE_integer("max_eval_steps", 100, "Evaluation batches per checkpoint.")
flags.DEFINE_bool("use_tpu", False, "Use a TPU (same as --strategy=tpu).")
flags.DEFINE_bool("init_from_group0", False,
                  "Initialise every group (and per-layer copy) from the checkpoint's group_0.")
flags.DEFINE_string("tpu_name", None, "TPU name or address.")
flags.DEFINE_string("tpu_zone", None, "Accepted for compatibility; the TPU resolver finds the zone.")
flags.DEFINE_string("gcp_project", None, "Accepted for compatibility.")
flags.DEFINE_string("master", None, "Accepted for compatibility.")
flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for compatibility (the strategy counts cores).")
flags.DEFINE_float("masked_lm_budget", 0,
                   "If > 0, draw masks on the fly at this masking rate (fresh masks every time a "
                   "record is read) with the create_pretraining_data algorithm and the data's "
                   "span settings (--ngram, --favor_shorter_ngram, --do_whole_word_mask, from "
                   "its summary; the defaults without one).")
flags.DEFINE_bool("sentence_objective", True,
                  "Add the sentence-pair loss (sentence order, or next sentence for data made with "
                  "--random_next_sentence) to the masked-LM loss; --nosentence_objective trains the "
                  "masked LM alone (the paper's Table 5 'None' row).")
flags.DEFINE_float("poly_power", 1.0, "Exponent of the polynomial learning-rate decay.")
# --- added here ---
flags.DEFINE_string("eval_file", None,
                    "Held-out TFRecords for evaluation (default: --input_file, as the original).")
flags.DEFINE_integer("plateau_window_steps", 0,
                     "Warn (once, and record it in eval_results.json) when the masked-LM loss has "
                     "not gone below the loss of a context-free unigram predictor for this many "
                     "steps; 0: a fifth of --num_train_steps, at least 200.")
distribute.define_flags()
memory.define_flags()
flags.DEFINE_enum("mixed_precision", "none", MIXED_PRECISION,
                  "Mixed precision policy; mixed_float16 uses dynamic loss scaling.")
flags.DEFINE_bool("jit_compile", None,
                  "Compile the training step with XLA (default: on with GPUs and TPUs, off on "
                  "CPUs; --nojit_compile turns it off).")
flags.DEFINE_integer("steps_per_loop", None,
                     "Steps per call into the graph (default: --iterations_per_loop on TPUs, 100 "
                     "on GPUs, 1 on CPUs).")
flags.DEFINE_enum("init_checkpoint_format", "auto", ["auto", *format_names()],
                  "Format of --init_checkpoint.")
flags.DEFINE_integer("random_seed", 12345,
                     "Seed of the input order, dropout masks, dynamic masks and initialisation.")
flags.DEFINE_integer("shuffle_buffer_size", 100,
                     "Records are shuffled in consecutive windows of this many (the original "
                     "shuffled through a 100-record buffer).")
flags.DEFINE_integer("input_shards", 1,
                     "Split the training files into this many shards (file i in shard i mod N), "
                     "each read as its own stream; every step takes train_batch_size / N records "
                     "of each. With several workers and N a multiple of them, each worker reads "
                     "only its own shards' files. The stream depends on N, not on the devices: "
                     "keep it when resuming.")
cli.define_config_flags()
flags.DEFINE_bool("progress", True, "Show a progress bar.")
flags.mark_flags_as_required(["input_file", "output_dir"])
# Flags defined in other modules are listed by --help only when declared key flags here.
for _module in (distribute, memory, cli):
    flags.adopt_module_key_flags(_module)

FLAGS = flags.FLAGS


def _lengths_from_data(contract) -> dict:
    """--max_seq_length / --max_predictions_per_seq: the data's, checked against explicit flags."""
    lengths = {}
    for flag in ("max_seq_length", "max_predictions_per_seq"):
        value = getattr(contract, flag)
        if FLAGS[flag].present and FLAGS[flag].value != value:
            raise InputError(f"--{flag}={FLAGS[flag].value}, but the data has {flag}={value} "
                             f"({', '.join(contract.summaries) or contract.files[0]}); drop the "
                             "flag or use data made with that setting")
        lengths[flag] = value
    return lengths


def _model_config():
    """--albert_config_file, or the config the --init_checkpoint carries."""
    if FLAGS.albert_config_file:
        return cli.load_albert_config(FLAGS.albert_config_file)
    config = (carried_config(FLAGS.init_checkpoint, FLAGS.init_checkpoint_format)
              if FLAGS.init_checkpoint else None)
    if config is None:
        raise InputError("--albert_config_file is required (or an --init_checkpoint that carries "
                         "its config: a KerasHub preset, a Hugging Face directory)")
    return config


def main(argv):
    del argv
    if not FLAGS.do_train and not FLAGS.do_eval:
        raise InputError("At least one of --do_train or --do_eval must be set")
    # The strategy comes first: multi-worker collectives must be configured
    # before TensorFlow runs any op.
    tpu = FLAGS.tpu or FLAGS.tpu_name
    strategy_name = "tpu" if FLAGS.use_tpu and FLAGS.strategy == "auto" else FLAGS.strategy
    strategy = distribute.create_strategy(strategy_name, tpu, FLAGS.cpu_devices)
    config = _model_config()
    train_data = load_data_contract(expand_record_patterns(FLAGS.input_file))
    lengths = _lengths_from_data(train_data)
    eval_data = None
    if FLAGS.do_eval:
        if FLAGS.eval_file:
            eval_data = load_data_contract(expand_record_patterns(FLAGS.eval_file, "evaluation"))
        else:
            logging.warning("No --eval_file: evaluating on the training files, as the original did")
            eval_data = train_data
    logging.info("Data: max_seq_length=%d, max_predictions_per_seq=%d, %d training records",
                 lengths["max_seq_length"], lengths["max_predictions_per_seq"],
                 train_data.total_records)
    task = PretrainingTask(
        config=config, train_data=train_data, eval_data=eval_data, seed=FLAGS.random_seed,
        init_checkpoint=FLAGS.init_checkpoint, init_checkpoint_format=FLAGS.init_checkpoint_format,
        init_from_group0=FLAGS.init_from_group0, masked_lm_budget=FLAGS.masked_lm_budget,
        sentence_objective=FLAGS.sentence_objective,
        plateau_window_steps=FLAGS.plateau_window_steps)
    task.check_inputs()  # bad input fails here, before anything is written
    shard_sources(task.train_input().source, FLAGS.input_shards)

    trainer = build_trainer(task, strategy, RunSettings(
        TrainerConfig(output_dir=FLAGS.output_dir, num_train_steps=FLAGS.num_train_steps,
                      train_batch_size=FLAGS.train_batch_size, eval_batch_size=FLAGS.eval_batch_size,
                      save_checkpoints_steps=FLAGS.save_checkpoints_steps,
                      keep_checkpoint_max=FLAGS.keep_checkpoint_max,
                      max_eval_steps=FLAGS.max_eval_steps, mixed_precision=FLAGS.mixed_precision,
                      show_progress=FLAGS.progress, random_seed=FLAGS.random_seed,
                      shuffle_buffer_size=FLAGS.shuffle_buffer_size,
                      input_shards=FLAGS.input_shards,
                      gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
                      rematerialize=FLAGS.rematerialize),
        OptimizerSettings(FLAGS.optimizer, FLAGS.learning_rate, FLAGS.num_train_steps,
                          FLAGS.num_warmup_steps, FLAGS.start_warmup_step, FLAGS.poly_power),
        steps_per_loop=FLAGS.steps_per_loop, iterations_per_loop=FLAGS.iterations_per_loop,
        jit_compile=FLAGS.jit_compile),
        lengths["max_seq_length"], lengths["max_predictions_per_seq"])

    logging.info("TensorBoard logs: tensorboard --logdir=%s",
                 io.join(FLAGS.output_dir, "tensorboard"))
    if FLAGS.do_train:
        result = trainer.train(do_eval=FLAGS.do_eval)
    else:
        result = trainer.evaluate_checkpoints()
    if result:
        logging.info("Last evaluation: %s", ", ".join(f"{k} = {v:.4f}" for k, v in sorted(result.items())))


if __name__ == "__main__":
    cli.run(main)
