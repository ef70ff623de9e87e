r"""Convert ALBERT weights between the original TF1, Hugging Face, Model Garden, Keras and KerasHub formats.

    python convert_checkpoint.py --albert_config_file=albert_config.json \
        --init_checkpoint=albert_base/model.ckpt-best --input_format=tf1 \
        --output_format=hf --output_dir=albert_base_hf

Outputs (in --output_dir, written atomically):
  tf1           model.ckpt-best.{index,data-00000-of-00001} (original names) + albert_config.json
  hf            config.json + model.safetensors (AlbertModel, or the class of the head:
                AlbertForPreTraining, AlbertForSequenceClassification, ...)
  keras         model.keras (AlbertEncoder, AlbertPretrainer or AlbertClassifier) + albert_config.json
  model_garden  encoder.ckpt.* = tf.train.Checkpoint(encoder=AlbertEncoder) + albert_config.json
  keras_hub     a KerasHub preset (config.json, model.weights.h5, metadata.json; task.json +
                task.weights.h5 for AlbertTextClassifier / AlbertMaskedLM; with --spm_model_file
                tokenizer.json + assets/tokenizer/vocabulary.spm), loaded by keras_hub's from_preset

Heads travel with the encoder: the pretraining heads, and the fine-tuning
heads of the original (a GLUE classifier's output_weights / output_bias
becomes Hugging Face's classifier.weight / classifier.bias and back).

A checkpoint that does not fit the config is an error listing every missing,
unexpected and mis-shaped variable; nothing is converted partially. Paths may
be on any file system TensorFlow knows (gs://, ...).
"""

from absl import flags, logging

from albert import cli
from albert.checkpoints import (check_weights, find_head, format_names, formats, read_weights,
                                write_checkpoint)
from albert.checkpoints.weights import as_float32
from albert.errors import ConfigError
from albert.checkpoints.naming import HEADS

_FORMAT_HELP = "; ".join(f"{fmt.name}: {fmt.description}" for fmt in formats().values())

flags.DEFINE_string("albert_config_file", None,
                    "albert_config.json of the model. Optional for hf, keras and keras_hub "
                    "inputs, which carry their own config.")
flags.DEFINE_string("init_checkpoint", None,
                    "Checkpoint to convert: a TF checkpoint prefix or any of its files, a "
                    "directory holding one, an HF directory, or a .keras file.")
flags.DEFINE_enum("input_format", "tf1", ["auto", *format_names()],
                  f"Format of --init_checkpoint (auto: detect). {_FORMAT_HELP}.")
flags.DEFINE_enum("output_format", "hf", format_names(), "Format to write.")
flags.DEFINE_string("output_dir", None, "Directory for the converted files.")
flags.DEFINE_bool("overwrite", False, "Replace files of the same name in --output_dir.")
flags.DEFINE_string("spm_model_file", None,
                    "SentencePiece model to store with the weights (--output_format=keras_hub: "
                    "KerasHub's AlbertTokenizer).")
flags.DEFINE_bool("do_lower_case", True,
                  "Whether the model's text is lower-cased (as the original's scripts do by "
                  "default); KerasHub's tokenizer does not lower-case, which is said when "
                  "writing a keras_hub tokenizer.")
flags.DEFINE_enum("head", "auto", ["auto", "none", *HEADS],
                  "Head to carry: auto (the one the checkpoint holds; a classifier's "
                  "output_weights count as the GLUE classifier), none (encoder only), or a name "
                  "(multiple_choice: RACE's head, the same variables as the classifier's).")
cli.define_config_flags()
flags.adopt_module_key_flags(cli)  # --help lists --allow_unknown_config_keys too
flags.mark_flags_as_required(["init_checkpoint", "output_dir"])

FLAGS = flags.FLAGS


def main(argv):
    del argv
    config = cli.load_albert_config(FLAGS.albert_config_file) if FLAGS.albert_config_file else None
    stored, carried, source = read_weights(FLAGS.init_checkpoint, FLAGS.input_format, config)
    config = config or carried
    if config is None:
        raise ConfigError(f"Reading {FLAGS.init_checkpoint} needs --albert_config_file")
    if FLAGS.head == "auto":
        head, _ = find_head(stored)
    else:
        head = None if FLAGS.head == "none" else FLAGS.head
    weights = as_float32(check_weights(stored, config, source,
                                       heads="ignore" if head is None else "required", head=head))
    logging.info("Read %d variables (head: %s) from %s", len(weights), head or "none",
                 FLAGS.init_checkpoint)
    if FLAGS.spm_model_file and FLAGS.do_lower_case and formats()[FLAGS.output_format].writes_tokenizer:
        logging.warning("KerasHub's AlbertTokenizer neither lower-cases nor strips accents as this "
                        "model's preprocessing (--do_lower_case) does: lower-case text before "
                        "tokenizing it with keras_hub")
    written = write_checkpoint(weights, config, FLAGS.output_dir, FLAGS.output_format,
                               overwrite=FLAGS.overwrite, head=head,
                               spm_model_file=FLAGS.spm_model_file)
    for path in written:
        print(path)


if __name__ == "__main__":
    cli.run(main)
