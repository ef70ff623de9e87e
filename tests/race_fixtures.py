"""Hand-written RACE data in the two real layouts.

`all.txt`: one JSON article per line (what the original reads); `articles`:
the raw release's one JSON file per article (`1.txt`, `2.txt`, `10.txt`, ...).
Fields as the release: `answers`, `options`, `questions`, `article`, `id`.
Texts are written here for the tests: cloze (`_`) and ordinary questions,
accents, an article longer than the tests' sequence length, a long option.
"""

import json
import os

MIDDLE = [
    {"answers": ["B", "A"],
     "options": [["library", "bakery", "river", "station"],
                 ["Because it was cold.", "Because he was late.", "To meet Zoë.",
                  "He did not run."]],
     "questions": ["Tom went to the _ to buy fresh bread.", "Why did Tom run home?"],
     "article": "Tom woke up early. He went to the bakery to buy fresh bread, but the wind "
                "was icy and he ran home as fast as he could.",
     "id": "middle1.txt"},
    {"answers": ["D"],
     "options": [["in Paris", "in Oslo", "at school", "in a café in Zürich"]],
     "questions": ["Where did Zoë and her friend have lunch?"],
     "article": "Zoë and her friend René travelled by train. They had lunch in a small café "
                "in Zürich and talked about the museum they had seen.",
     "id": "middle2.txt"},
    {"answers": ["C"],
     "options": [["_", "two _ dogs", "three", "none at all"]],
     "questions": ["The farmer had _ cows and _ sheep."],
     "article": "The farmer had three cows and three sheep. Every morning he counted them.",
     "id": "middle10.txt"},
]

HIGH = [
    {"answers": ["A", "C"],
     "options": [["It changes the way cities are planned, slowly but surely, over decades.",
                  "Nothing.", "Only the weather.", "The price of bread."],
                 ["forests", "deserts", "coasts", "mountains"]],
     "questions": ["According to the passage, what does the new railway change in the long "
                   "run for the people who live along its route?",
                   "The author's last example is about _ ."],
     "article": " ".join(["The new railway line connects the northern towns with the capital."
                          " Travel times have fallen by half, and young families have moved "
                          "into villages that were emptying only ten years ago."] * 4
                         + ["Engineers say the coasts will be next."]),
     "id": "high1.txt"},
]


def _levels():
    return {"middle": MIDDLE, "high": HIGH}


def write_race(root, layout="all", splits=("train", "dev", "test"), levels=("middle", "high")):
    """Writes `<root>/RACE/<split>/<level>/` in `layout` ("all" or "articles"); returns root."""
    for split in splits:
        for level in levels:
            directory = os.path.join(root, "RACE", split, level)
            os.makedirs(directory, exist_ok=True)
            articles = _levels()[level]
            if layout == "all":
                with open(os.path.join(directory, "all.txt"), "w", encoding="utf-8") as handle:
                    handle.write("".join(json.dumps(a, ensure_ascii=False) + "\n"
                                         for a in articles))
            else:
                for article in articles:
                    name = article["id"][len(level):]
                    with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
                        json.dump(article, handle, ensure_ascii=False)
    return str(root)


def write_articles(path, articles):
    """An all.txt of `articles` (dicts, or raw lines as strings)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for article in articles:
            handle.write((article if isinstance(article, str)
                          else json.dumps(article, ensure_ascii=False)) + "\n")


QUESTIONS = {"news": "Which sentence is from a news report?",
             "copy": "Which sentence is in the passage?",
             "next": "Which sentence comes next?"}


def write_sentence_choice_task(root, corpus_dir, seed, kind="news", train=1200, dev=200,
                               passage=3):
    """A multiple-choice task on the demo corpus's real text, written as RACE all.txt files.

    Each article is `passage` consecutive sentences of a Wikipedia article of
    `train.txt` (one sentence per line, blank lines between documents). The
    four options, answer at a random position:
      news: one sentence of the news articles of `heldout.txt`, three
        sentences of other Wikipedia articles (learnable from the option alone);
      copy: one sentence of the passage, three of other documents;
      next: the sentence that follows the passage, three others of its document.
    Splits train and dev, level "middle".
    """
    import random

    rng = random.Random(seed)

    def documents_of(name):
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as handle:
            return [[line.strip() for line in block.splitlines() if line.strip()]
                    for block in handle.read().split("\n\n")]

    # "next" leaves out the passage and its neighbours: at least 3 others must remain.
    minimum = passage + (6 if kind == "next" else 4)
    documents = [d for d in documents_of("train.txt") if len(d) >= minimum]
    news = [sentence for document in documents_of("heldout.txt") for sentence in document]
    articles = []
    while len(articles) < train + dev:
        index = rng.randrange(len(documents))
        document = documents[index]
        start = rng.randrange(len(document) - passage)
        if kind == "next":
            answer = document[start + passage]
            pool = [s for i, s in enumerate(document)
                    if not start <= i <= start + passage + 1]
        else:
            answer = (rng.choice(news) if kind == "news"
                      else document[start + rng.randrange(passage)])
            pool = [s for j, other in enumerate(documents) if j != index
                    for s in rng.sample(other, 2)]
        options = rng.sample(pool, 3)
        position = rng.randrange(4)
        options.insert(position, answer)
        articles.append({"answers": ["ABCD"[position]], "options": [options],
                         "questions": [QUESTIONS[kind]],
                         "article": " ".join(document[start:start + passage]),
                         "id": f"{kind}{len(articles)}"})
    for split, part in (("train", articles[:train]), ("dev", articles[train:])):
        write_articles(os.path.join(root, "RACE", split, "middle", "all.txt"), part)
    return root
