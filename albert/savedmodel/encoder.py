"""The encoder SavedModel: what it is, written in one place.

Both the checkpoint format `savedmodel` (`albert.checkpoints.savedmodel`,
which reads and writes it as weights) and the TF-Hub-style export
(`albert.export.hub`, which adds the preprocessor and TFLite / ONNX files)
build on this module; it imports neither.

Called with a dict of int32 `[batch, seq_length]` tensors `input_word_ids`,
`input_mask`, `input_type_ids` and a `training` argument (dropout), the root
returns `pooled_output` `[batch, H]`, `sequence_output` `[batch, seq_length, H]`,
`encoder_outputs` (the output of every block application) and `default`
(= `pooled_output`). It carries `variables`, `trainable_variables` (for
fine-tuning through `hub.KerasLayer(..., trainable=True)`), an `mlm`
sub-object when the model has the pretraining heads (`masked_lm_positions`
`[batch, M]` in, `mlm_logits` `[batch, M, V]` out) and then also a `sop`
sub-object (`sop_log_probs` `[batch, 2]` out: the original hub module's
`sop` signature), `serve` / `serve_training`
functions and a `serving_default` signature taking the dict (block outputs
flattened to `encoder_outputs_<i>`; Keras 3's `TFSMLayer` calls `serve`).

Beyond the TF-Hub contract: the weights under the original's names
(`albert_weights`, the same variables, and `albert_weight_names()`), so that
the SavedModel is also a checkpoint, and `albert_config.json` (and the
SentencePiece model, and its `.vocab` when it sits beside it) as assets;
with the SentencePiece model, `tokenization_info()` returns its asset path as
`vocab_file` and `do_lower_case`, as the original hub module's
`tokenization_info` signature did.
"""

from typing import Optional

import tensorflow as tf

from albert import io
from albert.savedmodel.tracking import Untracked, tf_variables

INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")
CONFIG_ASSET = "albert_config.json"
SPM_ASSET = "30k-clean.model"
SPM_VOCAB_ASSET = "30k-clean.vocab"
WEIGHTS_ATTRIBUTE = "albert_weights"
WEIGHT_NAMES_FUNCTION = "albert_weight_names"

_Trackable = tf.__internal__.tracking.AutoTrackable


def _input_spec():
    return {key: tf.TensorSpec([None, None], tf.int32, name=key) for key in INPUT_KEYS}


def _encoder_outputs(outputs) -> dict:
    return {"pooled_output": outputs["pooled_output"],
            "sequence_output": outputs["sequence_output"],
            "encoder_outputs": list(outputs["encoder_outputs"]),
            "default": outputs["pooled_output"]}


class _MaskedLM(_Trackable):
    """The `mlm` sub-object: encoder outputs plus `mlm_logits` at `masked_lm_positions`."""

    def __init__(self, pretrainer):
        super().__init__()
        self._pretrainer = Untracked(pretrainer)
        self._variables = tf_variables(pretrainer.variables)   # the heads' too
        spec = dict(_input_spec(), masked_lm_positions=tf.TensorSpec(
            [None, None], tf.int32, name="masked_lm_positions"))
        self.__call__ = tf.function(self._call)
        for training in (False, True):
            self.__call__.get_concrete_function(spec, training=training)

    def _call(self, inputs, training=False):
        outputs = self._pretrainer.model(inputs, training=training)
        return dict(_encoder_outputs(outputs), mlm_logits=outputs["mlm_logits"])


class _SentenceOrder(_Trackable):
    """The `sop` sub-object: encoder outputs plus `sop_log_probs`, the sentence-order head's
    log-probabilities."""

    def __init__(self, pretrainer):
        super().__init__()
        self._pretrainer = Untracked(pretrainer)
        self._variables = tf_variables(pretrainer.variables)
        self.__call__ = tf.function(self._call)
        for training in (False, True):
            self.__call__.get_concrete_function(_input_spec(), training=training)

    def _call(self, inputs, training=False):
        pretrainer = self._pretrainer.model
        outputs = pretrainer.encoder(inputs, training=training)
        logits = tf.cast(pretrainer.sentence_order(outputs["pooled_output"]), tf.float32)
        return dict(_encoder_outputs(outputs), sop_log_probs=tf.nn.log_softmax(logits, axis=-1))


class EncoderExport(_Trackable):
    """The encoder SavedModel's root object (see the module docstring).

    Args:
      model: an `AlbertEncoder`, or an `AlbertPretrainer` (adds `mlm`).
      named_variables: `{original name: Keras variable}` of `model` (the name table's,
        `albert.checkpoints.model_variables`), stored once as `albert_weights` with
        `albert_weight_names()`.
      assets_dir: a scratch directory for the asset files until the SavedModel is saved.
      config_json: the `albert_config.json` text, stored as an asset.
      spm_model_file: the SentencePiece model, stored as an asset (optional).
      do_lower_case: what `tokenization_info()` says (with `spm_model_file`).
    """

    def __init__(self, model, named_variables: dict, assets_dir: str, config_json: str,
                 spm_model_file: Optional[str] = None, do_lower_case: bool = True):
        super().__init__()
        encoder = getattr(model, "encoder", model)
        self._encoder = Untracked(encoder)
        # hub.KerasLayer and TFSMLayer read these lists to train or freeze the encoder.
        self.variables = tf_variables(encoder.variables)
        self.trainable_variables = tf_variables(encoder.trainable_variables)
        self.regularization_losses = []
        if encoder is not model:
            self.mlm = _MaskedLM(model)
            self.sop = _SentenceOrder(model)
        # The weights under the original's names, so that the SavedModel is also a
        # checkpoint the converters read (`albert.checkpoints.savedmodel`); the same
        # tf.Variables as `variables`, so stored once.
        names = list(named_variables)
        setattr(self, WEIGHTS_ATTRIBUTE, tf_variables(named_variables.values()))
        setattr(self, WEIGHT_NAMES_FUNCTION, tf.function(
            lambda: tf.constant(names, tf.string), input_signature=[]))
        self.__call__ = tf.function(self._call)
        for training in (False, True):
            self.__call__.get_concrete_function(_input_spec(), training=training)
        # One dict argument, flat outputs: the serving signature and Keras 3's
        # TFSMLayer (`call_endpoint="serve"`, `call_training_endpoint="serve_training"`).
        self.serve = tf.function(self._serve, input_signature=[_input_spec()])
        self.serve_training = tf.function(lambda inputs: self._serve(inputs, training=True),
                                          input_signature=[_input_spec()])
        config_path = io.join(assets_dir, CONFIG_ASSET)
        io.write_text_atomically(config_path, config_json)
        self.albert_config_file = tf.saved_model.Asset(config_path)
        if spm_model_file:
            spm_path = io.join(assets_dir, SPM_ASSET)
            io.write_bytes_atomically(spm_path, io.read_bytes(spm_model_file))
            self.sp_model_file = tf.saved_model.Asset(spm_path)
            vocab_file = spm_model_file[:-len(".model")] + ".vocab" \
                if spm_model_file.endswith(".model") else None
            if vocab_file and io.exists(vocab_file):
                vocab_path = io.join(assets_dir, SPM_VOCAB_ASSET)
                io.write_bytes_atomically(vocab_path, io.read_bytes(vocab_file))
                self.sp_vocab_file = tf.saved_model.Asset(vocab_path)
            lower = bool(do_lower_case)
            # The original's name: `vocab_file` is the SentencePiece model's path.
            self.tokenization_info = tf.function(
                lambda: {"vocab_file": self.sp_model_file.asset_path,
                         "do_lower_case": tf.constant(lower)}, input_signature=[])

    def _call(self, inputs, training=False):
        return _encoder_outputs(self._encoder.model(inputs, training=training))

    def _serve(self, inputs, training=False):
        outputs = self._call(inputs, training=training)
        blocks = outputs.pop("encoder_outputs")
        outputs.update({f"encoder_outputs_{index}": block for index, block in enumerate(blocks)})
        return outputs


def save(root, export_dir: str, signatures=None) -> None:
    """Saves a SavedModel root object to `export_dir`."""
    # Custom gradients are saved: a trainable encoder's dropout recomputes its masks in
    # the backward pass (albert.modeling.dropout), a gradient autodiff cannot derive.
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=True)
    tf.saved_model.save(root, export_dir, signatures=signatures, options=options)
