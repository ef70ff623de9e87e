"""Lines TensorFlow's C++ runtime writes straight to file descriptor 2, kept out of the output.

Python's logging cannot filter them: they bypass it. `filtered_stderr`
captures the descriptor around a call and replays every line that is not
noise, in order, once the call returns.
"""

import contextlib
import os
import re
import sys
import tempfile

# What the TFLite converter's C++ side says on every conversion: notes on
# options it ignores for this kind of model ("W0000 ... Ignored output_format."),
# that an optional MLIR pass is off, and absl's note that it logs before being
# initialised. None is about the user's model; its real warnings pass.
TFLITE_CONVERTER_NOISE = re.compile(
    r"^[IW]0000 .*(Ignored output_format|Ignored drop_control_dependency|"
    r"MLIR V1 optimization pass is not enabled)|"
    r"All log messages before absl::InitializeLog")

# What tf2onnx's graph optimisation (Grappler) says on every conversion: that
# it found no GPU and starts a session. Its real warnings pass.
ONNX_CONVERTER_NOISE = re.compile(
    r"^I0000 .*(Number of eligible GPUs|Starting new session)|"
    r"All log messages before absl::InitializeLog")


@contextlib.contextmanager
def filtered_stderr(noise):
    """Captures file descriptor 2 (C++ logs) and replays every line that is not noise."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines(True)
                    if not noise.search(line)]
            if kept:
                sys.stderr.write("".join(kept))
                sys.stderr.flush()
