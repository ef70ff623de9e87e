"""Hand-written GLUE task folders in the exact layouts of the real files.

Headers and column orders are those of the GLUE release (CoLA train/dev
have no header; MNLI dev files have five annotator labels; QQP has a short
row; quotes are literal). Texts are written here for the tests.
"""

import os
import random

from conftest import tiny_config
from corpora import SYLLABLES

ROWS = {
    "CoLA": {
        "train.tsv": [["gj04", "1", "", "The sailors rode the breeze clear of the rocks."],
                      ["gj04", "0", "*", "The more we study verbs, the crazier they get get."],
                      ["gj04", "1", "", 'She said "hello" to the café owner.']],
        "dev.tsv": [["gj04", "1", "", "Bill coughed his way out of the restaurant."],
                    ["gj04", "0", "*", "Him saw the dog."]],
        "test.tsv": [["index", "sentence"], ["0", "Bill floated into the cave."],
                     ["1", "Mary wondered who John saw."]],
    },
    "SST-2": {
        "train.tsv": [["sentence", "label"], ["a gorgeous , witty , seductive movie . ", "1"],
                      ["the plot is nothing but boilerplate clichés ", "0"],
                      ['"the film" is 90,000 miles of fun ', "1"]],
        "dev.tsv": [["sentence", "label"], ["it 's a charming and often affecting journey . ", "1"],
                    ["unflinchingly bleak and desperate ", "0"]],
        "test.tsv": [["index", "sentence"], ["0", "uneasy mishmash of styles and genres ."],
                     ["1", "this film 's relationship to actual tension is the same ."]],
    },
    "MRPC": {
        "train.tsv": [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                      ["1", "702876", "702977", "Amrozi accused his brother of lying .",
                       "Referring to him , Amrozi accused his brother ."],
                      ["0", "2108705", "2108831", "Yucaipa owned Dominick 's before selling .",
                       "Yucaipa bought Dominick 's in 1995 for $ 693 million ."]],
        "dev.tsv": [["Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                    ["1", "1355540", "1355592", "He said the foodservice pie business doesn 't fit .",
                     "The foodservice pie business does not fit , he said ."]],
        "test.tsv": [["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
                     ["0", "1089874", "1089925", "PCCW 's chief operating officer will leave .",
                      "Current Chief Operating Officer Mike Butcher will leave ."]],
    },
    "STS-B": {
        "train.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                       "sentence1", "sentence2", "score"],
                      ["0", "main-captions", "MSRvid", "2012test", "0001", "none", "none",
                       "A plane is taking off.", "An air plane is taking off.", "5.000"],
                      ["1", "main-captions", "MSRvid", "2012test", "0004", "none", "none",
                       "A man is playing a large flute.", "A man is playing a flute.", "3.800"]],
        "dev.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                     "sentence1", "sentence2", "score"],
                    ["0", "main-captions", "MSRvid", "2012test", "0000", "none", "none",
                     "A man with a hard hat is dancing.", "A man wearing a hard hat is dancing.",
                     "5.000"],
                    ["1", "main-captions", "MSRvid", "2012test", "0002", "none", "none",
                     "A young child is riding a horse.", "A child is riding a horse.", "4.750"]],
        "test.tsv": [["index", "genre", "filename", "year", "old_index", "source1", "source2",
                      "sentence1", "sentence2"],
                     ["0", "main-captions", "MSRvid", "2012test", "0024", "none", "none",
                      "A girl is styling her hair.", "A girl is brushing her hair."]],
    },
    "QQP": {
        "train.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                      ["133273", "213221", "213222", "How is the life of a math student?",
                       "Which level of prepration is enough?", "0"],
                      ["402555", "536040"],   # a short row, skipped as the original does
                      ["360472", "364011", "490273", "How do I control my anger?",
                       "How do I control anger and impulses?", "1"]],
        "dev.tsv": [["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
                    ["201359", "303345", "303346", "Why are African-Americans so beautiful?",
                     "Why are hispanics so beautiful?", "0"]],
        "test.tsv": [["id", "question1", "question2"],
                     ["0", "Why am I mentally very lonely?", "Find the remainder when 2^100 is divided by 7?"]],
    },
    "MNLI": {
        "train.tsv": [["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                       "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                       "sentence2", "label1", "gold_label"],
                      ["0", "31193", "31193n", "government", "( ( Conceptually ...", "( ( Product ...",
                       "(ROOT ...", "(ROOT ...", "Conceptually cream skimming has two basic dimensions.",
                       "Product and geography are what make cream skimming work. ", "neutral",
                       "neutral"],
                      ["1", "101457", "101457e", "telephone", "( you ...", "( You ...", "(ROOT ...",
                       "(ROOT ...", "you know during the season i guess",
                       "You lose the things to the following level.", "entailment", "entailment"]],
        "dev_matched.tsv": [["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                             "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                             "sentence1", "sentence2", "label1", "label2", "label3", "label4",
                             "label5", "gold_label"],
                            ["0", "63735", "63735n", "slate", "( ( The ...", "( The ...", "(ROOT ...",
                             "(ROOT ...", "The new rights are nice enough",
                             "Everyone really likes the newest benefits ", "neutral", "entailment",
                             "neutral", "neutral", "neutral", "neutral"]],
        "dev_mismatched.tsv": [["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                                "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                                "sentence1", "sentence2", "label1", "label2", "label3", "label4",
                                "label5", "gold_label"],
                               ["0", "75290", "75290c", "letters", "( ( Your ...", "( ( Your ...",
                                "(ROOT ...", "(ROOT ...", "Your contribution helped make it possible.",
                                "Your contributions were of no help.", "contradiction",
                                "contradiction", "contradiction", "contradiction", "contradiction",
                                "contradiction"]],
        "test_matched.tsv": [["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                              "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                              "sentence1", "sentence2"],
                             ["0", "31493", "31493", "travel", "( ( ( Hierbas ...", "( ( Hierbas ...",
                              "(ROOT ...", "(ROOT ...", "Hierbas, ans seco, ans dulce, and frigola.",
                              "Hierbas is a name worth looking out for."]],
        "test_mismatched.tsv": [["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                                 "sentence2_binary_parse", "sentence1_parse", "sentence2_parse",
                                 "sentence1", "sentence2"],
                                ["0", "16130", "16130", "facetoface", "( ( What ...", "( ( I ...",
                                 "(ROOT ...", "(ROOT ...", "What have you decided, what are you going to do?",
                                 "So what's your decision?"]],
    },
    "QNLI": {
        "train.tsv": [["index", "question", "sentence", "label"],
                      ["0", "When did the third Digimon series begin?",
                       "Unlike the two seasons before it, it was set in the real world.",
                       "not_entailment"]],
        "dev.tsv": [["index", "question", "sentence", "label"],
                    ["0", "What came into force after the new constitution was herald?",
                     "As of that day, the new constitution heralding the Second Republic came into force.",
                     "entailment"]],
        "test.tsv": [["index", "question", "sentence"],
                     ["0", "What organization is devoted to Jihad against Israel?",
                      "For some decades prior to the First Palestine Intifada in 1987, the Muslim Brotherhood was active."]],
    },
    "RTE": {
        "train.tsv": [["index", "sentence1", "sentence2", "label"],
                      ["0", "No Weapons of Mass Destruction Found in Iraq Yet.",
                       "Weapons of Mass Destruction Found in Iraq.", "not_entailment"]],
        "dev.tsv": [["index", "sentence1", "sentence2", "label"],
                    ["0", "Dana Reeve, the widow of the actor, died at 44.",
                     "Christopher Reeve had an accident.", "not_entailment"]],
        "test.tsv": [["index", "sentence1", "sentence2"],
                     ["0", "Mangla was summoned after Madhumita's sister Nidhi Shukla complained.",
                      "Shukla is related to Mangla."]],
    },
    "WNLI": {
        "train.tsv": [["index", "sentence1", "sentence2", "label"],
                      ["0", "I stuck a pin through a carrot. When I pulled the pin out, it had a hole.",
                       "The carrot had a hole.", "1"]],
        "dev.tsv": [["index", "sentence1", "sentence2", "label"],
                    ["0", "The drain is clogged with hair. It has to be cleaned.",
                     "The hair has to be cleaned.", "0"]],
        "test.tsv": [["index", "sentence1", "sentence2"],
                     ["0", "Maude and Dora had seen the trains rushing across the prairie.",
                      "The trains were seen."]],
    },
    "diagnostic": {
        "diagnostic.tsv": [["index", "sentence1", "sentence2"],
                           ["0", "The cat sat on the mat.", "The cat did not sit on the mat."]],
    },
}


def write_glue(directory: str) -> str:
    """Writes every task folder under `directory`; returns it."""
    for task, files in ROWS.items():
        os.makedirs(os.path.join(directory, task), exist_ok=True)
        for name, rows in files.items():
            with open(os.path.join(directory, task, name), "w", encoding="utf-8") as handle:
                handle.write("".join("\t".join(row) + "\n" for row in rows))
    return directory


def write_learnable_sst2(directory, train=96, dev=32, seed=0):
    """An SST-2-layout task a tiny model learns in a few dozen steps: class 1 sentences use
    the first half of the syllables, class 0 the second half."""
    rng = random.Random(seed)
    halves = (SYLLABLES[12:], SYLLABLES[:12])

    def rows(count):
        out = []
        for index in range(count):
            label = index % 2
            out.append([" ".join(rng.choice(halves[label]) for _ in range(rng.randint(4, 9))),
                        str(label)])
        return out

    task = directory / "SST-2"
    task.mkdir(parents=True)
    for name, data in (("train.tsv", rows(train)), ("dev.tsv", rows(dev))):
        (task / name).write_text("sentence\tlabel\n" + "".join("\t".join(r) + "\n"
                                                                for r in data))
    (task / "test.tsv").write_text("index\tsentence\n0\tka lo mi\n")
    return directory


def classifier_command(tmp_path, spm, out, **overrides):
    """A tiny run_classifier.py command on write_learnable_sst2's task (in tmp_path/glue)."""
    config = tmp_path / "config.json"
    config.write_text(tiny_config(vocab_size=1200, max_position_embeddings=64).to_json_string())
    values = dict(task_name="SST-2", data_dir=tmp_path / "glue", albert_config_file=config,
                  spm_model_file=spm, output_dir=out, max_seq_length=24, train_batch_size=8,
                  eval_batch_size=32, train_step=40, save_checkpoints_steps=40, do_train=True,
                  do_eval=True, progress=False, learning_rate=3e-3, warmup_step=4)
    values.update(overrides)
    return ["run_classifier.py", *(f"--{k}" if v is True else f"--{k}={v}"
                                   for k, v in values.items() if v is not None)]
