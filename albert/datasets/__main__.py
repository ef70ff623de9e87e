"""Offline datasets: `python -m albert.datasets demo-corpus|glue-demo --output_dir=DIR`.

* `demo-corpus`: real prose for pretraining (train.txt, heldout.txt), cached;
* `glue-demo`: real labelled text in the GLUE formats (SST-2/, STS-B/).
"""

import json

from absl import flags

from albert import cli
from albert.errors import InputError

flags.DEFINE_string("output_dir", None, "Directory to write the dataset to.")
flags.DEFINE_bool("force", False, "demo-corpus: rebuild even if a cached corpus is up to date.")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS
USAGE = "Usage: python -m albert.datasets demo-corpus|glue-demo --output_dir=DIR"


def main(argv):
    if len(argv) != 2 or argv[1] not in ("demo-corpus", "glue-demo"):
        raise InputError(USAGE)
    if argv[1] == "demo-corpus":
        from albert.datasets.demo_corpus import build_demo_corpus

        manifest = build_demo_corpus(FLAGS.output_dir, force=FLAGS.force)
    else:
        from albert.datasets.glue_demo import build_glue_demo

        manifest = build_glue_demo(FLAGS.output_dir)
    print(json.dumps(manifest["files"], indent=2, sort_keys=True))


if __name__ == "__main__":
    cli.run(main)
