"""ONNX files of the encoder and of task models, with each shared weight stored once.

Optional: `pip install -e ".[onnx]"` (tf2onnx converts, onnxruntime runs). The
graph takes `input_word_ids`, `input_mask`, `input_type_ids` as int32
`[batch, length]` (`[batch, num_choices, length]` for multiple choice) with
both dimensions free, and returns the requested outputs (`pooled_output`,
`sequence_output`; `logits`). The weights become initializers once each:
ALBERT's shared layer is one set of initializers used by every block (other
converters, tracing an unrolled PyTorch model, store one copy per layer).
"""

import logging
from typing import Optional, Sequence

import tensorflow as tf

from albert.errors import InputError
from albert.export.tflite import INPUT_KEYS
from albert.native_logs import ONNX_CONVERTER_NOISE, filtered_stderr

ONNX_OPSET = 17


def require_tf2onnx():
    try:
        import tf2onnx  # optional dependency (the "onnx" extra), checked here
    except ImportError:
        raise InputError('--onnx needs tf2onnx and onnxruntime: pip install -e ".[onnx]"') from None
    logging.getLogger("tf2onnx").setLevel(logging.ERROR)   # per-op progress lines
    return tf2onnx


def convert(model, output_names: Sequence[str], num_choices: Optional[int] = None) -> bytes:
    """The serialised ONNX model of `model`'s `output_names`."""
    tf2onnx = require_tf2onnx()
    shape = [None, None] if num_choices is None else [None, num_choices, None]
    specs = tuple(tf.TensorSpec(shape, tf.int32, name=key) for key in INPUT_KEYS)

    @tf.function(input_signature=specs)
    def serve(input_word_ids, input_mask, input_type_ids):
        outputs = model({"input_word_ids": input_word_ids, "input_mask": input_mask,
                         "input_type_ids": input_type_ids}, training=False)
        return {name: tf.identity(outputs[name], name=name) for name in output_names}

    with filtered_stderr(ONNX_CONVERTER_NOISE):
        proto, _ = tf2onnx.convert.from_function(serve, input_signature=specs, opset=ONNX_OPSET)
    return proto.SerializeToString()
