r"""Export a checkpoint as TF-Hub-style SavedModels: `encoder/` and `preprocessor/`.

    python -m albert.export --init_checkpoint=runs/base/model.ckpt-best \
        --albert_config_file=runs/base/albert_config.json \
        --spm_model_file=30k-clean.model --export_dir=export

`--init_checkpoint` may be in any format convert_checkpoint.py reads. The
encoder is written to <export_dir>/encoder (with an `mlm` sub-object when the
checkpoint holds the pretraining heads), the preprocessor, when a
SentencePiece model is given, to <export_dir>/preprocessor, and with --tflite
the encoder to <export_dir>/encoder.tflite (any batch size; one signature per
length bucket up to --seq_length, so short text runs short).
With --task=classifier or --task=multiple_choice, a fine-tuned checkpoint is
exported with its head to <export_dir>/<task>/ (serialized tf.train.Example
in, probabilities and predictions out, as run_classifier.py --export_dir) and,
with --tflite, to <export_dir>/<task>.tflite (logits).

    python -m albert.export --model_dir=runs/mine --export_dir=served/mine

exports a finished run of run_classifier.py --train_file=... or run_token_classifier.py,
from its directory alone, as the SavedModel that takes raw strings (<export_dir>/1/, the
run's own --export_dir; --init_checkpoint names another checkpoint of the run).

    python -m albert.export ... --quantize=int8 --calibration_file=my_text.txt

quantises the .tflite file (float16, dynamic_int8 or full-integer int8,
calibrated on your own text) and writes quantization_report.json: its size
and its error against float32 on text it was not calibrated on; for a
classifier, `--task_name=MRPC --data_dir=glue` adds the task's dev metrics
with float32 and with the file.
Load them with
`hub.KerasLayer(path)` (tf-keras) or `keras.layers.TFSMLayer(path)`
(Keras 3); see the README.
"""

from absl import flags, logging

from albert import cli
from albert.checkpoints import format_names, read_checkpoint
from albert.checkpoints.naming import PRETRAINING_HEAD
from albert.errors import InputError
from albert.export.finished_run import export_finished_run
from albert.export.hub import export_hub_models, export_task_model
from albert.export.onnx import require_tf2onnx
from albert.export.quantization import read_calibration_texts, read_dev_set
from albert.finetuning_data.glue import get_task
from albert.tokenization import load_tokenizer, require_special_tokens

flags.DEFINE_string("init_checkpoint", None,
                    "The checkpoint to export (any supported format); with --model_dir, the "
                    "run's checkpoint to export (default model.ckpt-best).")
cli.define_model_dir_flag()   # exported as the SavedModel that takes raw strings, <export_dir>/1/
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
                  "Also write encoder.tflite (with --task, <task>.tflite): built-in TFLite ops "
                  "only, any batch size, a signature per length bucket (length_16, length_32, "
                  "... below --seq_length; serving_default at --seq_length).")
flags.DEFINE_enum("quantize", "none", ["none", "float16", "dynamic_int8", "int8"],
                  "Quantisation of the .tflite file (implies --tflite): float16 weights; int8 "
                  "weights with activations quantised on the fly (dynamic_int8); or full integer "
                  "int8, calibrated on --calibration_file. Writes quantization_report.json.")
flags.DEFINE_bool("onnx", False,
                  "Also write encoder.onnx (with --task, <task>.onnx): batch and length free, "
                  "each weight stored once. Needs tf2onnx: pip install -e \".[onnx]\".")
flags.DEFINE_string("calibration_file", None,
                    "Your own text, one example per line (a tab between the two texts of a "
                    "pair), tokenized with --spm_model_file: int8 calibrates on its first half; "
                    "quantization_report.json measures the error against float32 on the rest "
                    "(on every line for the other modes).")
flags.DEFINE_string("task_name", None,
                    "With --task=classifier and a .tflite export: the GLUE task whose dev set "
                    "(in --data_dir, laid out as for run_classifier.py) quantization_report.json "
                    "scores with the float32 model and with the .tflite file.")
flags.DEFINE_string("data_dir", None, "Directory holding one sub-directory per GLUE task "
                    "(--task_name's dev set).")
cli.define_config_flags()
flags.adopt_module_key_flags(cli)  # --help lists --allow_unknown_config_keys too
flags.mark_flags_as_required(["export_dir"])

FLAGS = flags.FLAGS


def export_run_directory() -> None:
    """--model_dir: the run's string-taking SavedModel; the other export options do not apply."""
    unused = [f"--{name}" for name in ("albert_config_file", "spm_model_file", "task_name",
                                       "data_dir", "calibration_file")
              if FLAGS[name].value] + [f"--{name}" for name in ("tflite", "onnx")
                                       if FLAGS[name].value]
    if FLAGS.task != "encoder" or FLAGS.quantize != "none":
        unused.append("--task" if FLAGS.task != "encoder" else "--quantize")
    if unused:
        raise InputError(f"--model_dir exports the run with what it recorded: drop "
                         f"{', '.join(unused)}")
    written, source = export_finished_run(FLAGS.model_dir, FLAGS.export_dir,
                                          FLAGS.init_checkpoint or "model.ckpt-best",
                                          FLAGS.overwrite)
    logging.info("Exported %s to %s", source, written)


def main(argv):
    del argv
    if FLAGS.model_dir:
        return export_run_directory()
    if not FLAGS.init_checkpoint:
        raise InputError("Name what to export: --init_checkpoint (a checkpoint) or "
                         "--model_dir (a finished run of your own files)")
    if FLAGS.seq_length < 2:
        raise InputError(f"--seq_length must be at least 2, got {FLAGS.seq_length}")
    tflite = FLAGS.tflite or FLAGS.quantize != "none"
    if FLAGS.quantize == "int8" and not FLAGS.calibration_file:
        raise InputError("--quantize=int8 needs --calibration_file: text like the text the "
                         "model will see, one example per line")
    if FLAGS.calibration_file and not (tflite and FLAGS.spm_model_file):
        raise InputError("--calibration_file is read for a .tflite export (--tflite or "
                         "--quantize) and is tokenized with --spm_model_file; pass both")
    if FLAGS.onnx:
        require_tf2onnx()   # a missing converter is said before anything is written
    config = (cli.load_albert_config(FLAGS.albert_config_file) if FLAGS.albert_config_file
              else None)
    tokenizer = None
    if FLAGS.spm_model_file:
        tokenizer = load_tokenizer(None, FLAGS.spm_model_file, FLAGS.do_lower_case)
        require_special_tokens(tokenizer)
    task = None if FLAGS.task == "encoder" else FLAGS.task
    dev_set = None
    if FLAGS.task_name or FLAGS.data_dir:
        if not (FLAGS.task_name and FLAGS.data_dir):
            raise InputError("--task_name and --data_dir go together: the GLUE dev set to score")
        if task != "classifier" or not (tflite and tokenizer):
            raise InputError("--task_name scores a classifier's .tflite file on the dev set: "
                             "pass --task=classifier, --tflite (or --quantize) and "
                             "--spm_model_file")
        dev_set = read_dev_set(get_task(FLAGS.task_name), FLAGS.data_dir, tokenizer,
                               FLAGS.seq_length)
    calibration_texts = None
    if FLAGS.calibration_file:
        calibration_texts = read_calibration_texts(FLAGS.calibration_file)
    weights, config = read_checkpoint(FLAGS.init_checkpoint, FLAGS.input_format, config,
                                      heads="required" if task else "optional",
                                      head=task or PRETRAINING_HEAD)
    if FLAGS.seq_length > config.max_position_embeddings:
        raise InputError(f"--seq_length={FLAGS.seq_length} exceeds the config's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    if task:
        written = export_task_model(config, weights, task, FLAGS.export_dir, FLAGS.seq_length,
                                    FLAGS.num_choices, FLAGS.overwrite, tflite, FLAGS.quantize,
                                    calibration_texts, tokenizer, FLAGS.onnx,
                                    (get_task(FLAGS.task_name), *dev_set) if dev_set else None)
    else:
        written = export_hub_models(config, weights, tokenizer, FLAGS.spm_model_file,
                                    FLAGS.export_dir, FLAGS.seq_length, FLAGS.overwrite,
                                    tflite, FLAGS.quantize, calibration_texts, FLAGS.onnx)
    logging.info("Wrote %s", ", ".join(written))


if __name__ == "__main__":
    cli.run(main)
