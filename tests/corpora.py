"""Corpora and SentencePiece models for the tests, built once per test session.

* a synthetic corpus from a seeded generator (pseudo-words of several pieces,
  numbers, punctuation, capitals), in the original input format;
* the real demo corpus (`python -m albert.datasets demo-corpus`), built from
  the gensim wheel's Wikipedia sample and news articles.
"""

import os
import random

SYLLABLES = ["ka", "lo", "mi", "tu", "ren", "sa", "vo", "pi", "dan", "el", "or", "quis", "ba",
             "ne", "ti", "gu", "xo", "fal", "wen", "ry", "zo", "ha", "ju", "cle", "mon"]


def synthetic_words(rng, count=1500):
    words = set()
    while len(words) < count:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.choice([1, 1, 2, 2, 3, 4]))))
    return sorted(words)


def write_synthetic_corpus(path, documents=400, seed=7):
    """Documents of 1-30 sentences of 4-25 words; returns the path."""
    rng = random.Random(seed)
    words = synthetic_words(rng)
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(documents):
            if index:
                handle.write("\n")
            for _ in range(rng.randint(1, 30)):
                sentence = [rng.choice(words) for _ in range(rng.randint(4, 25))]
                if rng.random() < 0.3:
                    sentence.insert(rng.randrange(len(sentence)), str(rng.randint(1, 3000)))
                if rng.random() < 0.3:
                    sentence.insert(rng.randrange(len(sentence)), rng.choice([",", "(", ")", "-"]))
                sentence[0] = sentence[0].capitalize()
                handle.write(" ".join(sentence) + rng.choice([".", ".", "?", "!"]) + "\n")
    return path


def first_documents(path, count, output_path):
    """The first `count` documents of a corpus file (blank-line separated) written to
    output_path; returns it. For checks of a property that a smaller corpus shows as well."""
    with open(path, encoding="utf-8") as handle:
        documents = handle.read().split("\n\n")
    with open(output_path, "w", encoding="utf-8") as handle:
        handle.write("\n\n".join(documents[:count]).rstrip("\n") + "\n")
    return str(output_path)


def train_model(input_path, prefix, vocab_size):
    from albert.tokenization.training import train_sentencepiece

    if not os.path.exists(prefix + ".model"):
        train_sentencepiece([input_path], prefix, vocab_size=vocab_size, num_threads=2)
    return prefix + ".model"
