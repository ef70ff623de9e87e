"""Does a record's content depend on its position in the file? Share of records per tenth.

    python benchmarks/record_order.py --spm_model_file=corpus-large/spm8k.model \
        --pieces=▁python,▁module,▁function data/train.tfrecord [more.tfrecord ...]

For each file, prints the share of records whose `input_ids` contain any of
`--pieces`, overall and per tenth of the file. A globally shuffled file has
about the same share in every tenth; a file in corpus order shows where the
source that uses those pieces sits. Used to compare the windowed and the
global shuffle of create_pretraining_data.py (docs/pretraining_data.md).
"""

import argparse
import json

import numpy as np


def shares_per_tenth(path, piece_ids):
    import tensorflow as tf

    from albert.records.tfrecord import first_record_lengths

    length = first_record_lengths(path)["input_ids"]
    spec = {"input_ids": tf.io.FixedLenFeature([length], tf.int64)}
    hits = []
    for batch in tf.data.TFRecordDataset(path).batch(4096).map(
            lambda records: tf.io.parse_example(records, spec)["input_ids"]):
        hits.append(np.isin(batch.numpy(), piece_ids).any(axis=1))
    hits = np.concatenate(hits)
    return float(hits.mean()), [float(part.mean()) for part in np.array_split(hits, 10)]


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--spm_model_file", required=True)
    parser.add_argument("--pieces", required=True, help="comma-separated SentencePiece pieces")
    args = parser.parse_args()
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=args.spm_model_file)
    piece_ids = [processor.piece_to_id(piece) for piece in args.pieces.split(",")]
    results = {}
    for path in args.files:
        overall, tenths = shares_per_tenth(path, piece_ids)
        results[path] = {"overall": overall, "tenths": tenths}
        print(f"{path}: overall {overall:.3f}; per tenth " + " ".join(f"{t:.3f}" for t in tenths))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
