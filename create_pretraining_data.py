r"""Create ALBERT pretraining TFRecords (sentence-order prediction, whole-word n-gram masking).

    python create_pretraining_data.py --input_file=corpus/*.txt \
        --output_file=data/train.tfrecord@8 --spm_model_file=30k-clean.model \
        --max_seq_length=512 --dupe_factor=40

Input: one sentence per line, a blank line between documents (UTF-8, `.gz`
allowed; comma-separated files or globs). Output: TFRecords with the
original's schema (`input_ids`, `input_mask`, `segment_ids`,
`token_boundary`, `masked_lm_positions`, `masked_lm_ids`,
`masked_lm_weights`, `next_sentence_labels`), written round-robin over the
output files, plus a JSON summary beside them (<output>.summary.json:
statistics, and what run_pretraining.py checks the data against: lengths,
vocabulary size, special ids, records per file). Paths may be on any file
system TensorFlow knows (gs://, ...).

The original's 17 flags keep their names, defaults and meaning. Differences
(docs/fidelity.md): the same flags and seed give byte-identical files for any
--num_workers and --documents_per_window; memory is bounded by
--documents_per_window while random-document partners still come from the
whole corpus and the records are still shuffled across all of it, as the
original did (docs/pretraining_data.md; scratch files beside the first
output, removed at the end); `--vocab_file` is
optional with `--spm_model_file`; `--do_permutation` (unused by the paper) is
not supported. With `--beam_pipeline_options` the same bytes are made on Apache
Beam, locally or on a cluster (docs/pretraining_data.md, "Beyond one machine").
"""

import os

# This script needs no Keras or TensorFlow: keep `import albert` light. The variable is
# removed again once the imports are done (below), so that a program importing this script
# does not pass it on to processes it starts later; the data pipeline sets it for its own
# workers.
_LIGHTWEIGHT_SET_HERE = "ALBERT_LIGHTWEIGHT_IMPORT" not in os.environ
os.environ.setdefault("ALBERT_LIGHTWEIGHT_IMPORT", "1")

from absl import flags, logging  # noqa: E402

from albert import cli  # noqa: E402
from albert.pretraining_data.instances import InstanceConfig  # noqa: E402
from albert.pretraining_data.masking import MaskingConfig  # noqa: E402
from albert.pretraining_data.creation import DataConfig, create_pretraining_data  # noqa: E402
from albert.errors import InputError  # noqa: E402
from albert.tokenization import DIGIT_COMMA_RULES  # noqa: E402

if _LIGHTWEIGHT_SET_HERE:
    del os.environ["ALBERT_LIGHTWEIGHT_IMPORT"]

# --- the original's flags ---
flags.DEFINE_string("input_file", None,
                    "Input raw text file(s), comma-separated; each item may be a glob.")
flags.DEFINE_string("output_file", None,
                    "Output TFRecord file(s), comma-separated; PATH@N writes N shards "
                    "PATH-00000-of-0000N ... . Instances are written round-robin.")
flags.DEFINE_string("vocab_file", None,
                    "WordPiece vocabulary (one token per line). Optional when --spm_model_file "
                    "is given (the original required it anyway).")
flags.DEFINE_string("spm_model_file", None, "SentencePiece model (e.g. 30k-clean.model).")
flags.DEFINE_string("input_file_mode", "r",
                    "Kept for compatibility: 'r' or 'rb'; input is always read as UTF-8.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input text.")
flags.DEFINE_bool("do_whole_word_mask", True, "Mask whole words rather than single pieces.")
flags.DEFINE_bool("do_permutation", False,
                  "Extra permutation targets (unused by the paper; not supported here).")
flags.DEFINE_bool("favor_shorter_ngram", True,
                  "n-gram probabilities proportional to 1/n (False: reversed).")
flags.DEFINE_bool("random_next_sentence", False,
                  "False: sentence-order prediction (ALBERT). True: next-sentence prediction (BERT).")
flags.DEFINE_integer("max_seq_length", 512, "Sequence length, [CLS] and both [SEP] included.")
flags.DEFINE_integer("ngram", 3, "Maximum n-gram length in words.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Maximum masked pieces per sequence.")
flags.DEFINE_integer("random_seed", 12345, "Seed of every random decision.")
flags.DEFINE_integer("dupe_factor", 40, "Passes over the input, each with fresh sampling.")
flags.DEFINE_float("masked_lm_prob", 0.15, "Fraction of pieces to mask.")
flags.DEFINE_float("short_seq_prob", 0.1, "Probability of a shorter target length.")
# --- added here ---
flags.DEFINE_integer("num_workers", os.cpu_count() or 1, "Worker processes (default: all cores).")
flags.DEFINE_integer("documents_per_window", 1000,
                     "Consecutive documents of the corpus whose instances are made and held in "
                     "memory together; memory grows with it. The output does not depend on it: "
                     "partners come from, and records are shuffled across, the whole corpus.")
flags.DEFINE_bool("single_segment_random_document", True,
                  "Give a one-segment chunk a random-document B labelled 1, as the original does "
                  "(a quirk: in sentence-order mode it adds NSP-style pairs, in next-sentence "
                  "mode forced negatives; either way the label-1 share rises above 0.5). False "
                  "skips such chunks: balanced held-out sets.")
flags.DEFINE_enum("digit_comma_rule", "intended", list(DIGIT_COMMA_RULES),
                  "How a piece ending in a digit and a comma is split: 'intended' (what the "
                  "original meant, also what Hugging Face and Model Garden do) or "
                  "'python3_original' (what the original does under Python 3: the re-encoded "
                  "digits keep their word-start marker).")
flags.DEFINE_string("summary_file", None,
                    "Where to write the JSON summary (default: beside the first output file, "
                    "<output>.summary.json). run_pretraining.py looks for it beside the data.")
flags.DEFINE_bool("progress", True, "Show a progress bar.")
flags.DEFINE_string("beam_pipeline_options", None,
                    "Build the records on Apache Beam with these pipeline options, comma-separated "
                    "key=value (e.g. runner=DataflowRunner,project=P,region=R,temp_location=gs://B/tmp"
                    "; without a runner: Beam's local FnApiRunner, offline, with "
                    "direct_num_workers=N,direct_running_mode=multi_processing for N processes). "
                    "The same bytes as without it. Needs pip install -e \".[beam]\". "
                    "--num_workers and --documents_per_window do not apply (an error), nor "
                    "--progress (the runner shows its own).")
flags.mark_flags_as_required(["input_file", "output_file"])

FLAGS = flags.FLAGS


# Flags of the one-machine engine, and what to give Beam instead.
_NOT_ON_BEAM = {
    "num_workers": "give direct_num_workers=N,direct_running_mode=multi_processing in "
                   "--beam_pipeline_options for N processes on Beam's local engine, or the "
                   "runner's own worker options (Dataflow: num_workers, max_num_workers)",
    "documents_per_window": "Beam holds a sort range of about 20,000 records per worker "
                            "instead; leave it out",
}


def main(argv):
    del argv
    if FLAGS.beam_pipeline_options is not None:
        for name, instead in _NOT_ON_BEAM.items():
            if FLAGS[name].present:
                raise InputError(f"--{name} does not apply with --beam_pipeline_options: "
                                 f"{instead}")
    if FLAGS.do_permutation:
        raise InputError("--do_permutation is not supported (the paper does not use it)")
    if FLAGS.input_file_mode not in ("r", "rb"):
        raise InputError("--input_file_mode must be 'r' or 'rb'")
    if not FLAGS.spm_model_file and not FLAGS.vocab_file:
        raise InputError("Give --spm_model_file (SentencePiece) or --vocab_file (WordPiece)")
    masking = MaskingConfig(
        masked_lm_prob=FLAGS.masked_lm_prob, max_predictions_per_seq=FLAGS.max_predictions_per_seq,
        ngram=FLAGS.ngram, favor_shorter_ngram=FLAGS.favor_shorter_ngram,
        do_whole_word_mask=FLAGS.do_whole_word_mask)
    config = DataConfig(
        instance=InstanceConfig(max_seq_length=FLAGS.max_seq_length,
                                short_seq_prob=FLAGS.short_seq_prob,
                                random_next_sentence=FLAGS.random_next_sentence,
                                single_segment_random_document=FLAGS.single_segment_random_document,
                                masking=masking),
        dupe_factor=FLAGS.dupe_factor, random_seed=FLAGS.random_seed,
        do_lower_case=FLAGS.do_lower_case, spm_model_file=FLAGS.spm_model_file,
        vocab_file=None if FLAGS.spm_model_file else FLAGS.vocab_file,
        documents_per_window=FLAGS.documents_per_window, digit_comma_rule=FLAGS.digit_comma_rule)
    if FLAGS.beam_pipeline_options is not None:
        summary = _on_beam(config)
    else:
        summary = create_pretraining_data(FLAGS.input_file, FLAGS.output_file, config,
                                          num_workers=FLAGS.num_workers,
                                          summary_file=FLAGS.summary_file,
                                          show_progress=FLAGS.progress)
    logging.info("Wrote %d instances to %s (%.0f instances/s)", summary["instances"],
                 ", ".join(summary["output_files"]), summary["instances_per_second"])
    logging.info("Sentence-order label 1 fraction %.3f; masked per instance %.2f; replacement %s",
                 summary["sentence_order_labels"]["fraction_1"],
                 summary["mean_masked_per_instance"], summary["replacement"])


def _on_beam(config):
    try:
        # Apache Beam is an extra: imported only when asked for.
        from albert.pretraining_data.beam_pipeline import create_pretraining_data_on_beam
    except ImportError as error:
        if getattr(error, "name", "") and error.name.split(".")[0] == "apache_beam":
            raise InputError('--beam_pipeline_options needs Apache Beam: '
                             'pip install -e ".[beam]"') from None
        raise
    return create_pretraining_data_on_beam(FLAGS.input_file, FLAGS.output_file, config,
                                           FLAGS.beam_pipeline_options,
                                           summary_file=FLAGS.summary_file)


if __name__ == "__main__":
    cli.run(main)
