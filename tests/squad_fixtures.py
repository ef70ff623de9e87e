"""Hand-written SQuAD data in the official JSON layouts (v1.1 and v2.0).

The texts are written here for the tests: a context long enough for several
windows at the tests' lengths, accents, curly quotes, digits with commas,
runs of spaces, a ligature, answers at the very start and end of a context,
and (v2.0) unanswerable questions with `plausible_answers`.
"""

import json
import os

RIVER = ("The river Oléron rises in the hills above Saint-Étienne and runs for 1,204 "
         "kilometres  to the sea.   In 1887, engineers built the “Grand Canal” beside it, "
         "and barges carried 3,500,000 tonnes of coal a year. The canal closed in 1962, when "
         "the railway had taken its trade; today its towpath is a cycle route of 640 km. "
         "Fishermen still say the ﬁnest trout live below the old lock at Vaux, where the "
         "water runs cold and clear all summer.")
BAKERY = ("Marie’s bakery opened at 6 a.m. every day except Sunday. Her sourdough, baked "
          "in a wood-fired oven, sold out by nine; the croissants lasted until noon.")
OBSERVATORY = ("The observatory on Mont Aigoual recorded a wind of 360 km/h in 1967 — a "
               "record for France that stood for decades. Its director, Hélène Roux, kept "
               "the logbooks in a locked cabinet.")


def _answer(context, text, occurrence=0):
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(text, start + 1)
    return {"text": text, "answer_start": start}


def _v1_articles():
    return [
        {"title": "Oleron", "paragraphs": [{"context": RIVER, "qas": [
            {"id": "q-river-1", "question": "How long is the river Oléron?",
             "answers": [_answer(RIVER, "1,204 kilometres")]},
            {"id": "q-river-2", "question": "What did barges carry on the “Grand Canal”?",
             "answers": [_answer(RIVER, "3,500,000 tonnes of coal")]},
            {"id": "q-river-3", "question": "Where do the finest trout live?",
             "answers": [_answer(RIVER, "below the old lock at Vaux")]},
            {"id": "q-river-4", "question": "Which river is this?",
             "answers": [_answer(RIVER, "The river Oléron")]},
            {"id": "q-river-5", "question": "How does the water run in summer?",
             "answers": [_answer(RIVER, "cold and clear all summer.")]},
        ]}]},
        {"title": "Bakery", "paragraphs": [{"context": BAKERY, "qas": [
            {"id": "q-bakery-1", "question": "When did the bakery open?",
             "answers": [_answer(BAKERY, "6 a.m.")]},
            {"id": "q-bakery-2", "question": "What was the sourdough baked in?",
             "answers": [_answer(BAKERY, "a wood-fired oven")]},
        ]}]},
    ]


def _v2_articles():
    articles = _v1_articles()
    articles.append({"title": "Aigoual", "paragraphs": [{"context": OBSERVATORY, "qas": [
        {"id": "q-obs-1", "question": "What wind speed was recorded in 1967?",
         "answers": [_answer(OBSERVATORY, "360 km/h")], "is_impossible": False},
        {"id": "q-obs-2", "question": "Who built the observatory?", "answers": [],
         "plausible_answers": [_answer(OBSERVATORY, "Hélène Roux")], "is_impossible": True},
        {"id": "q-obs-3", "question": "What colour was the cabinet?", "answers": [],
         "plausible_answers": [_answer(OBSERVATORY, "a locked cabinet")],
         "is_impossible": True},
    ]}]})
    for article in articles[:2]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["is_impossible"] = False
    return articles


def squad_document(version="1.1", for_training=True):
    """The document; for evaluation, v1.1 questions get a second gold answer as dev sets do."""
    articles = _v1_articles() if version == "1.1" else _v2_articles()
    if not for_training:
        for article in articles:
            for paragraph in article["paragraphs"]:
                for qa in paragraph["qas"]:
                    if qa["answers"]:
                        qa["answers"] = qa["answers"] + [dict(qa["answers"][0])]
    return {"version": "1.1" if version == "1.1" else "v2.0", "data": articles}


def write_squad(path, version="1.1", for_training=True, document=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        json.dump(document or squad_document(version, for_training), file, ensure_ascii=False)
    return path


YEAR = r"\b(1[5-9]\d\d|20\d\d)\b"


def write_year_task(directory, corpus_dir, seed=0, train_questions=600, dev_questions=150,
                    unanswerable=False):
    """A span task made from the demo corpus's real sentences: "In which year?".

    Each context is two or three consecutive sentences of one document
    holding exactly one four-digit year, which is the answer (its character
    offset recorded as SQuAD's `answer_start`). With `unanswerable`, a third
    of the questions (v2.0) ask about contexts without any four-digit number.
    Returns (train.json, dev.json) paths.
    """
    import random
    import re

    from albert.pretraining_data.corpus import iter_documents

    documents = [[line.strip() for line in document.lines] for document, _ in
                 iter_documents([os.path.join(corpus_dir, "train.txt")])]
    answerable, empty = [], []
    for document in documents:
        for start in range(0, len(document) - 2, 2):
            context = " ".join(document[start:start + 2 + start % 3 % 2])
            if len(context) > 400:
                continue
            years = list(re.finditer(YEAR, context))
            if len(years) == 1 and len(re.findall(r"\d{4}", context)) == 1:
                answerable.append((context, years[0].group(), years[0].start()))
            elif not re.search(r"\d", context):
                empty.append(context)
    rng = random.Random(seed)
    rng.shuffle(answerable)
    rng.shuffle(empty)
    total = train_questions + dev_questions
    with_answer = total - (total // 3 if unanswerable else 0)
    if len(answerable) < with_answer or (unanswerable and len(empty) < total - with_answer):
        raise ValueError(f"the corpus has {len(answerable)} contexts with one year and "
                         f"{len(empty)} without digits")
    items = [(context, text, start) for context, text, start in answerable[:with_answer]]
    items += [(context, None, None) for context in empty[:total - with_answer]]
    rng.shuffle(items)
    paths = []
    for name, part, for_training in (("train", items[:train_questions], True),
                                     ("dev", items[train_questions:], False)):
        articles = []
        for index, (context, text, start) in enumerate(part):
            qa = {"id": f"{name}-{index}", "question": "In which year did it happen?",
                  "answers": [] if text is None else [{"text": text, "answer_start": start}]}
            if unanswerable:
                qa["is_impossible"] = text is None
            articles.append({"title": f"{name}-{index}",
                             "paragraphs": [{"context": context, "qas": [qa]}]})
        document = {"version": "v2.0" if unanswerable else "1.1", "data": articles}
        paths.append(write_squad(os.path.join(directory, f"{name}.json"), document=document))
    return tuple(paths)
