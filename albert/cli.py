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


def run(main):
    def guarded_main(argv):
        logging.getLogger("albert").setLevel(logging.INFO)
        try:
            return main(argv)
        except (AlbertError, OSError) as error:
            print(f"ERROR: {error}", file=sys.stderr)
            sys.exit(1)

    app.run(guarded_main)
