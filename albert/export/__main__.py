r"""Export a checkpoint as TF-Hub-style SavedModels: `encoder/` and `preprocessor/`.

    python -m albert.export --init_checkpoint=runs/base/model.ckpt-best \
        --albert_config_file=runs/base/albert_config.json \
        --spm_model_file=30k-clean.model --export_dir=export

`--init_checkpoint` may be in any format convert_checkpoint.py reads. The
encoder is written to <export_dir>/encoder (with an `mlm` sub-object when the
checkpoint holds the pretraining heads), the preprocessor, when a
SentencePiece model is given, to <export_dir>/preprocessor, and with --tflite
the encoder for one [1, --seq_length] sequence to <export_dir>/encoder.tflite.
With --task=classifier or --task=multiple_choice, a fine-tuned checkpoint is
exported with its head to <export_dir>/<task>/ (serialized tf.train.Example
in, probabilities and predictions out, as run_classifier.py --export_dir) and,
with --tflite, to <export_dir>/<task>.tflite (logits of one example).
Load them with
`hub.KerasLayer(path)` (tf-keras) or `keras.layers.TFSMLayer(path)`
(Keras 3); see the README.
"""

from absl import flags, logging

from albert import cli
from albert.checkpoints import format_names, read_checkpoint
from albert.checkpoints.naming import PRETRAINING_HEAD
from albert.errors import InputError

flags.DEFINE_string("init_checkpoint", None, "The checkpoint to export (any supported format).")
flags.DEFINE_enum("input_format", "auto", ["auto", *format_names()], "Format of --init_checkpoint.")
flags.DEFINE_string("albert_config_file", None,
                    "albert_config.json (optional for formats that carry a config).")
flags.DEFINE_string("spm_model_file", None,
                    "SentencePiece model: stored with the encoder and used by the preprocessor.")
flags.DEFINE_bool("do_lower_case", True, "The preprocessor lower-cases text.")
flags.DEFINE_string("export_dir", None, "Directory that receives encoder/ and preprocessor/.")
flags.DEFINE_integer("seq_length", 128, "Sequence length of the preprocessor's default call.")
flags.DEFINE_bool("overwrite", False,
                  "Replace existing encoder/, preprocessor/ and encoder.tflite.")
flags.DEFINE_enum("task", "encoder", ["encoder", "classifier", "multiple_choice"],
                  "What to export: the encoder (TF-Hub style), or a fine-tuned checkpoint with its "
                  "head: classifier (GLUE; one output = regression) or multiple_choice (RACE), "
                  "written to <export_dir>/<task>/ with run_classifier.py's serving contract.")
flags.DEFINE_integer("num_choices", 4, "Options per example of a multiple_choice model.")
flags.DEFINE_bool("tflite", False,
                  "Also write encoder.tflite (with --task, <task>.tflite): one example of "
                  "--seq_length tokens, built-in TFLite ops only.")
cli.define_config_flags()
flags.adopt_module_key_flags(cli)  # --help lists --allow_unknown_config_keys too
flags.mark_flags_as_required(["init_checkpoint", "export_dir"])

FLAGS = flags.FLAGS


def main(argv):
    del argv
    from albert.export.hub import export_hub_models
    from albert.tokenization import load_tokenizer, require_special_tokens

    if FLAGS.seq_length < 2:
        raise InputError(f"--seq_length must be at least 2, got {FLAGS.seq_length}")
    config = (cli.load_albert_config(FLAGS.albert_config_file) if FLAGS.albert_config_file
              else None)
    tokenizer = None
    if FLAGS.spm_model_file:
        tokenizer = load_tokenizer(None, FLAGS.spm_model_file, FLAGS.do_lower_case)
        require_special_tokens(tokenizer)
    task = None if FLAGS.task == "encoder" else FLAGS.task
    weights, config = read_checkpoint(FLAGS.init_checkpoint, FLAGS.input_format, config,
                                      heads="required" if task else "optional",
                                      head=task or PRETRAINING_HEAD)
    if FLAGS.seq_length > config.max_position_embeddings:
        raise InputError(f"--seq_length={FLAGS.seq_length} exceeds the config's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    if task:
        from albert.export.hub import export_task_model

        written = export_task_model(config, weights, task, FLAGS.export_dir, FLAGS.seq_length,
                                    FLAGS.num_choices, FLAGS.overwrite, FLAGS.tflite)
    else:
        written = export_hub_models(config, weights, tokenizer, FLAGS.spm_model_file,
                                    FLAGS.export_dir, FLAGS.seq_length, FLAGS.overwrite,
                                    FLAGS.tflite)
    logging.info("Wrote %s", ", ".join(written))


if __name__ == "__main__":
    cli.run(main)
