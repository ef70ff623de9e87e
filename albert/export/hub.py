"""TF-Hub-style SavedModels: the encoder (TF2 encoder convention) and its text preprocessor.

They load the way ALBERT users load `albert_en_base` and `albert_en_preprocess`
from TF Hub, with local paths in place of the URLs, and without importing
this package:

    preprocessor = hub.KerasLayer("export/preprocessor")
    encoder = hub.KerasLayer("export/encoder", trainable=True)
    pooled = encoder(preprocessor(sentences))["pooled_output"]

**Encoder** (`encoder/`): the SavedModel of `albert.savedmodel.encoder` (the
TF2 encoder contract, `mlm` when the checkpoint has the pretraining heads,
the weights under the original's names, the config and SentencePiece model
as assets).

**Preprocessor** (`preprocessor/`): called with a string `[batch]` tensor, it
returns the three int32 inputs at `seq_length` (default 128) for
single-segment text. `tokenize` (string `[batch]` → ragged int32 piece ids,
with the original's text preprocessing, lower-casing and accent stripping),
`tokenize_with_offsets` (the ids and each piece's start and end byte in the
input strings) and `bert_pack_inputs(segments, seq_length)` (1 to 3 ragged segments,
truncated round-robin, `[CLS] A [SEP] B [SEP]`, type ids, padding) compose
the same for pairs; `tokenize.get_special_tokens_dict()` gives the ids of
the vocabulary.
"""

import json
from typing import Optional

import numpy as np
import tensorflow as tf

from albert import io
from albert.checkpoints import assign_model_weights, find_head, model_variables
from albert.checkpoints.savedmodel import build_encoder_model
from albert.errors import InputError
from albert.export import onnx as onnx_export
from albert.export import quantization as quant
from albert.export import tflite as tflite_export
from albert.export.classifier import export_classifier
from albert.export.tflite_runner import TFLiteRunner
from albert.modeling import AlbertClassifier, AlbertMultipleChoice
from albert.savedmodel.encoder import INPUT_KEYS, SPM_ASSET, EncoderExport, save

MAX_SEGMENTS = 3  # bert_pack_inputs is traced for 1 .. MAX_SEGMENTS segments

_Trackable = tf.__internal__.tracking.AutoTrackable


class _Tokenize(_Trackable):
    """`tokenize`: string `[batch]` → ragged int32 piece ids; `get_special_tokens_dict()`."""

    def __init__(self, in_graph_tokenizer, special_ids: dict):
        super().__init__()
        self._tokenizer = in_graph_tokenizer
        self._special_ids = dict(special_ids)
        self.__call__ = tf.function(self._tokenizer.tokenize,
                                    input_signature=[tf.TensorSpec([None], tf.string)])
        self.get_special_tokens_dict = tf.function(self._special_tokens, input_signature=[])

    def _special_tokens(self):
        return {name: tf.constant(value, tf.int32) for name, value in self._special_ids.items()}


class _PackInputs(_Trackable):
    """`bert_pack_inputs(segments, seq_length)`: ragged segments → the encoder's inputs."""

    def __init__(self, special_ids: dict, default_seq_length: int):
        super().__init__()
        self._cls = special_ids["start_of_sequence_id"]
        self._sep = special_ids["end_of_segment_id"]
        self._pad = special_ids["padding_id"]
        self.__call__ = tf.function(self._pack)
        ragged = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)
        for count in range(1, MAX_SEGMENTS + 1):
            self.__call__.get_concrete_function([ragged] * count,
                                                tf.TensorSpec([], tf.int32))
        self.default_seq_length = default_seq_length

    def _pack(self, segments, seq_length=128):
        import tensorflow_text  # inside: its op library, only for preprocessor exports

        seq_length = tf.cast(seq_length, tf.int32)
        segments = [tf.cast(segment, tf.int32) for segment in segments]
        budget = seq_length - (len(segments) + 1)   # [CLS] and one [SEP] per segment
        trimmed = tensorflow_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
        ids, type_ids = tensorflow_text.combine_segments(
            trimmed, start_of_sequence_id=self._cls, end_of_segment_id=self._sep)
        input_word_ids, input_mask = tensorflow_text.pad_model_inputs(
            ids, max_seq_length=seq_length, pad_value=self._pad)
        input_type_ids, _ = tensorflow_text.pad_model_inputs(type_ids, max_seq_length=seq_length)
        return {"input_word_ids": tf.cast(input_word_ids, tf.int32),
                "input_mask": tf.cast(input_mask, tf.int32),
                "input_type_ids": tf.cast(input_type_ids, tf.int32)}


class PreprocessorExport(_Trackable):
    """The preprocessor SavedModel's root object (see the module docstring).

    Args:
      tokenizer: the Python `SentencePieceTokenizer` (model, lower-casing, digit-comma rule).
      assets_dir: a scratch directory for the asset file until the SavedModel is saved.
      spm_model_file: the SentencePiece model, stored as an asset.
      seq_length: the root call's sequence length.
    """

    def __init__(self, tokenizer, assets_dir: str, spm_model_file: str, seq_length: int = 128):
        super().__init__()
        # Inside: the in-graph tokenizer loads tensorflow_text's op library, which only
        # preprocessor exports need.
        from albert.tokenization.in_graph import InGraphSentencePieceTokenizer

        special_ids = {"vocab_size": tokenizer.vocab_size,
                       "start_of_sequence_id": tokenizer.cls_id,
                       "end_of_segment_id": tokenizer.sep_id,
                       "padding_id": tokenizer.pad_id,
                       "mask_id": tokenizer.mask_id}
        in_graph = InGraphSentencePieceTokenizer(tokenizer)
        self.tokenize = _Tokenize(in_graph, special_ids)
        # (ids, starts, ends): byte offsets of each piece in the input strings
        self.tokenize_with_offsets = tf.function(
            in_graph.tokenize_with_offsets, input_signature=[tf.TensorSpec([None], tf.string)])
        self.bert_pack_inputs = _PackInputs(special_ids, seq_length)
        self.seq_length = seq_length
        self.__call__ = tf.function(self._call, input_signature=[tf.TensorSpec([None], tf.string)])
        spm_path = io.join(assets_dir, SPM_ASSET)
        io.write_bytes_atomically(spm_path, io.read_bytes(spm_model_file))
        self.sp_model_file = tf.saved_model.Asset(spm_path)

    def _call(self, sentences):
        # (`__call__` set on an instance is what a loaded SavedModel calls; in
        # Python it has to be named.)
        return self.bert_pack_inputs.__call__([self.tokenize.__call__(sentences)],
                                              tf.constant(self.seq_length, tf.int32))


ENCODER_DIR = "encoder"
PREPROCESSOR_DIR = "preprocessor"


def _tflite_outputs(file_name: str, quantization: str, calibration_texts, dev_set=None) -> list:
    reported = calibration_texts or quantization != "none" or dev_set is not None
    return [file_name] + ([quant.REPORT_FILE] if reported else [])


def export_hub_models(config, weights, tokenizer, spm_model_file: Optional[str], export_dir: str,
                      seq_length: int = 128, overwrite: bool = False,
                      tflite: bool = False, quantization: str = "none",
                      calibration_texts=None, onnx: bool = False) -> list:
    """Writes `encoder/` (and, with a SentencePiece model, `preprocessor/`; with `tflite`,
    `encoder.tflite`, quantised by `quantization`, with a signature per length bucket up to
    `seq_length`, and its `quantization_report.json`; with `onnx`, `encoder.onnx`) into
    `export_dir`.

    Each directory is written to a scratch directory and moved into place
    only when complete; existing ones are refused unless `overwrite`.
    Returns the paths written.
    """
    targets = ([ENCODER_DIR] + ([PREPROCESSOR_DIR] if spm_model_file else [])
               + (_tflite_outputs(TFLITE_FILE, quantization, calibration_texts) if tflite else [])
               + ([ONNX_FILE] if onnx else []))
    existing = [name for name in targets if io.exists(io.join(export_dir, name))]
    if existing and not overwrite:
        raise InputError(f"{export_dir} already holds {', '.join(existing)}; pass --overwrite "
                         "or choose another --export_dir")
    model = build_encoder_model(config, weights)
    written = []
    with io.new_directory(io.join(export_dir, ENCODER_DIR), overwrite) as scratch, \
            io.local_scratch_dir() as assets:
        root = EncoderExport(model, model_variables(model), assets, config.to_json_string(),
                             spm_model_file,
                             do_lower_case=getattr(tokenizer, "do_lower_case", True))
        save(root, scratch, signatures={"serving_default": root.serve})
    written.append(io.join(export_dir, ENCODER_DIR))
    if spm_model_file:
        with io.new_directory(io.join(export_dir, PREPROCESSOR_DIR), overwrite) as scratch, \
                io.local_scratch_dir() as assets:
            save(PreprocessorExport(tokenizer, assets, spm_model_file, seq_length), scratch)
        written.append(io.join(export_dir, PREPROCESSOR_DIR))
    if tflite:
        written += write_tflite(getattr(model, "encoder", model), export_dir, TFLITE_FILE,
                                seq_length, ["pooled_output", "sequence_output"], quantization,
                                calibration_texts, tokenizer)
    if onnx:
        written.append(write_onnx(getattr(model, "encoder", model), export_dir, ONNX_FILE,
                                  ["pooled_output", "sequence_output"]))
    return written


TFLITE_FILE = "encoder.tflite"
ONNX_FILE = "encoder.onnx"


def write_onnx(model, export_dir: str, file_name: str, output_names, num_choices=None) -> str:
    """`<export_dir>/<file_name>`: the ONNX graph of `model` (`albert.export.onnx`)."""
    path = io.join(export_dir, file_name)
    io.write_bytes_atomically(path, onnx_export.convert(model, output_names, num_choices))
    return path


def write_tflite(model, export_dir: str, file_name: str, seq_length: int, output_names,
                 quantization: str = "none", calibration_texts=None, tokenizer=None,
                 num_choices=None, regression: bool = False, dev_set=None) -> list:
    """`<export_dir>/<file_name>` (a signature per length bucket, `quantization`) and, with
    calibration text, a quantisation or `dev_set`, `quantization_report.json`. `dev_set`:
    (GlueTask, inputs, labels, examples in the file) of `quantization.read_dev_set`.
    Returns the paths written."""
    calibration = report_inputs = None
    if calibration_texts:
        calibrate, measure = quant.split_roles(calibration_texts, quantization)
        if calibrate:
            calibration = quant.calibration_by_bucket(
                quant.encode_texts(calibrate, tokenizer, seq_length, num_choices), seq_length)
        report_inputs = quant.encode_texts(measure, tokenizer, seq_length, num_choices)
    content = tflite_export.convert(model, seq_length, output_names, quantization, calibration,
                                    num_choices)
    path = io.join(export_dir, file_name)
    io.write_bytes_atomically(path, content)
    written = [path]
    if calibration_texts or quantization != "none" or dev_set is not None:
        empty = {key: np.zeros([0, seq_length], np.int32) for key in INPUT_KEYS}
        float32_bytes = len(content) if quantization == "none" else len(
            tflite_export.convert(model, seq_length, output_names, "none", None, num_choices))
        runner = TFLiteRunner(content)
        report = quant.quantization_report(model, runner, report_inputs or empty,
                                           output_names, quantization, len(content),
                                           float32_bytes, regression)
        if dev_set is not None:
            report["dev_set"] = quant.dev_set_report(model, runner, *dev_set)
        report_path = io.join(export_dir, quant.REPORT_FILE)
        io.write_text_atomically(report_path, json.dumps(report, indent=2) + "\n")
        written.append(report_path)
    return written


def export_task_model(config, weights, head: str, export_dir: str, seq_length: int,
                      num_choices: int = 4, overwrite: bool = False, tflite: bool = False,
                      quantization: str = "none", calibration_texts=None,
                      tokenizer=None, onnx: bool = False, dev_set=None) -> list:
    """A fine-tuned checkpoint with its head: `<export_dir>/<head>/` with the serving contract
    of `albert.export.classifier` (and `<head>.tflite`, its logits, as `write_tflite` writes
    it, `dev_set` included; with `onnx`, `<head>.onnx`)."""
    target = io.join(export_dir, head)
    lite = ([io.join(export_dir, name) for name in
             _tflite_outputs(f"{head}.tflite", quantization, calibration_texts, dev_set)]
            if tflite else [])
    lite += [io.join(export_dir, f"{head}.onnx")] if onnx else []
    taken = [path for path in [target] + lite
             if io.exists(path) and (not io.isdir(path) or io.listdir(path))]
    if taken and not overwrite:
        raise InputError(f"{', '.join(taken)} already exist(s); pass --overwrite or choose "
                         "another --export_dir")
    _, dims = find_head(weights, prefer=head)
    if dev_set is not None and dev_set[0].num_labels != dims["C"]:
        raise InputError(f"The checkpoint's classifier has {dims['C']} output(s); "
                         f"{dev_set[0].name} has {dev_set[0].num_labels}")
    choices = num_choices if head == "multiple_choice" else None
    model = (AlbertClassifier(config, dims["C"]) if head == "classifier"
             else AlbertMultipleChoice(config, num_choices))
    assign_model_weights(model, weights, "the checkpoint to export")
    regression = head == "classifier" and dims["C"] == 1
    export_classifier(model, target, seq_length, regression=regression, num_choices=choices,
                      overwrite=overwrite)
    written = [target]
    if tflite:
        written += write_tflite(model, export_dir, f"{head}.tflite", seq_length, ["logits"],
                                quantization, calibration_texts, tokenizer, choices, regression,
                                dev_set)
    if onnx:
        written.append(write_onnx(model, export_dir, f"{head}.onnx", ["logits"], choices))
    return written
