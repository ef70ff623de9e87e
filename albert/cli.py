"""Shared entry point for the absl scripts: user mistakes end with one clear line.

`run(main)` runs an absl `main`; an `AlbertError` (bad config, checkpoint,
input) or an `OSError` (missing file, no permission) prints `ERROR: <message>`
to stderr and exits with status 1, without a stack trace. Anything else is a
bug and keeps its traceback.
"""

import logging
import sys

from absl import app

from albert.errors import AlbertError


def _drop_tensorflow_test_callbacks() -> None:
    # Importing TensorFlow registers an absl start-up callback from its
    # distribute test utilities that lists GPUs: it initialises the device
    # runtime and prints "failed call to cuInit" on every CPU machine, in
    # every absl program, even those that never use TensorFlow.
    callbacks = getattr(app, "_init_callbacks", None)
    if callbacks is None:
        return
    kept = [c for c in callbacks
            if not getattr(c, "__module__", "").startswith("tensorflow.python.distribute")]
    callbacks.clear()
    callbacks.extend(kept)


def run(main):
    def guarded_main(argv):
        logging.getLogger("albert").setLevel(logging.INFO)
        # TensorFlow's own INFO lines (checkpoint sharding timings, ...) are noise here.
        logging.getLogger("tensorflow").setLevel(logging.WARNING)
        try:
            return main(argv)
        except (AlbertError, OSError) as error:
            print(f"ERROR: {error}", file=sys.stderr)
            sys.exit(1)

    _drop_tensorflow_test_callbacks()
    app.run(guarded_main)
