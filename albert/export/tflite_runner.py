"""Running an exported `.tflite` file at the length its input needs.

    runner = TFLiteRunner("export/encoder.tflite")          # all cores by default
    outputs = runner(inputs)   # int32 [batch, seq_length] arrays, e.g. the preprocessor's

The file's signatures are length buckets (`albert.export.tflite`); the runner
picks the smallest one that holds the batch's real tokens, cuts the padding
off, and runs the whole batch at once. `sequence_output` comes back at the
bucket's length: positions past the real tokens are padding.
"""

import os
from typing import Dict, Optional

import numpy as np

from albert.export.tflite import fit_to_bucket, real_length


def _interpreter_class():
    # LiteRT is preferred (tf.lite.Interpreter is deprecated in its favour); both are
    # optional at this point, so the one installed is picked when a file is run.
    try:
        from ai_edge_litert.interpreter import Interpreter  # optional: LiteRT
    except ImportError:  # pragma: no cover - LiteRT comes with tf-models-official
        from tensorflow.lite import Interpreter  # the deprecated fallback
    return Interpreter


def available_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class TFLiteRunner:
    """Runs a bucketed TFLite export; `num_threads` defaults to the cores available."""

    def __init__(self, path_or_content, num_threads: Optional[int] = None):
        content = (path_or_content if isinstance(path_or_content, bytes)
                   else open(path_or_content, "rb").read())
        self.num_threads = num_threads or available_cores()
        self._interpreter = _interpreter_class()(model_content=content,
                                                 num_threads=self.num_threads)
        self._runners, self.buckets = {}, {}
        for name in self._interpreter.get_signature_list():
            runner = self._interpreter.get_signature_runner(name)
            length = int(runner.get_input_details()["input_word_ids"]["shape_signature"][-1])
            self._runners[name], self.buckets[length] = runner, name

    def bucket_for(self, inputs: Dict[str, np.ndarray]) -> int:
        """The smallest bucket length that holds every example's real tokens."""
        needed = real_length(inputs["input_mask"])
        fitting = [length for length in sorted(self.buckets) if length >= needed]
        if not fitting:
            raise ValueError(f"the inputs need {needed} positions; the longest bucket of this "
                             f"file is {max(self.buckets)}")
        return fitting[0]

    def __call__(self, inputs: Dict[str, np.ndarray],
                 length: Optional[int] = None) -> Dict[str, np.ndarray]:
        """Outputs for a batch; `length` forces a bucket (default: the smallest that fits)."""
        length = length or self.bucket_for(inputs)
        return dict(self._runners[self.buckets[length]](**fit_to_bucket(inputs, length)))
