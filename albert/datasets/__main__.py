"""`python -m albert.datasets demo-corpus --output_dir=DIR`: build the demo corpus (cached)."""

import json

from absl import flags

from albert import cli
from albert.errors import InputError

flags.DEFINE_string("output_dir", None, "Directory for train.txt, heldout.txt and manifest.json.")
flags.DEFINE_bool("force", False, "Rebuild even if a cached corpus is up to date.")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS


def main(argv):
    if argv[1:] != ["demo-corpus"]:
        raise InputError("Usage: python -m albert.datasets demo-corpus --output_dir=DIR")
    from albert.datasets.demo_corpus import build_demo_corpus

    manifest = build_demo_corpus(FLAGS.output_dir, force=FLAGS.force)
    print(json.dumps(manifest["files"], indent=2, sort_keys=True))


if __name__ == "__main__":
    cli.run(main)
