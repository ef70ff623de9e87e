"""Vocabulary training: `python -m albert.tokenization train --input=corpus.txt --model_prefix=30k-clean`.

Uses the official ALBERT `spm_train` recipe (SentencePiece unigram, ids
`<pad>`=0 `<unk>`=1 `[CLS]`=2 `[SEP]`=3 `[MASK]`=4, user symbols at 5-12).
"""

from absl import flags

from albert import cli
from albert.errors import InputError
from albert.tokenization.training import train_sentencepiece

flags.DEFINE_list("input", None, "Text file(s) to train on, comma-separated.")
flags.DEFINE_string("model_prefix", None, "Output prefix: writes <prefix>.model and <prefix>.vocab.")
flags.DEFINE_integer("vocab_size", 30000, "Number of pieces.")
flags.DEFINE_integer("input_sentence_size", 10_000_000,
                     "Maximum number of sentences sampled for training.")
flags.DEFINE_float("character_coverage", 0.99995, "Fraction of characters covered by the model.")
flags.DEFINE_integer("seed", 0, "Random seed of the trainer.")
flags.mark_flags_as_required(["input", "model_prefix"])
FLAGS = flags.FLAGS


def main(argv):
    commands = argv[1:]
    if commands != ["train"]:
        raise InputError("Usage: python -m albert.tokenization train --input=FILE "
                         "--model_prefix=PREFIX [--vocab_size=30000]")

    path = train_sentencepiece(FLAGS.input, FLAGS.model_prefix, FLAGS.vocab_size, seed=FLAGS.seed,
                               input_sentence_size=FLAGS.input_sentence_size,
                               character_coverage=FLAGS.character_coverage)
    print(path)


if __name__ == "__main__":
    cli.run(main)
