"""SQuAD-shaped prediction on CPU, ours beside Hugging Face's, and the memory of feature creation.

    python benchmarks/squad_speed.py                 # ALBERT-base v2 shape, 384 / 128

Data: questions on contexts made of 4–24 consecutive real sentences of the
demo corpus (so some need several windows), a SentencePiece model trained on
it, ALBERT-base with random weights (the same weights on both sides, through
our Hugging Face export).

Reported, one process, same examples:
* ours: windows/s of the model (v1.1 head at full length, as the original;
  v1.1 with --bucket_by_length; v2.0, always length-bucketed) and the decode
  time (n-best, texts) of each;
* Hugging Face: `AlbertForQuestionAnswering` (the installed transformers) on
  the same windows, windows/s; and its question-answering pipeline (same
  max_seq_len / doc_stride / question length, top_k 20), which transformers 5
  removed, from transformers 4.57.1 in a virtual environment made under
  --work_dir (sharing this one's torch): windows/s of its forward passes and
  the time of its post-processing;
* peak RSS of making training features for the fixture file and for 10× as
  many contexts, each in a fresh process (features are streamed to the
  TFRecord, so it should barely grow).
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "tests"))


def make_examples(corpus_dir: str, count: int, path: str) -> str:
    """A SQuAD v1.1 file of `count` questions on demo-corpus contexts."""
    from albert.pretraining_data.corpus import iter_documents

    documents = [[line.strip() for line in document.lines] for document, _ in
                 iter_documents([os.path.join(corpus_dir, "train.txt")])]
    articles, index = [], 0
    for document in documents:
        position = 0
        while position < len(document) and index < count:
            size = 4 + (index * 7) % 21
            context = " ".join(document[position:position + size])
            position += size
            year = re.search(r"\b(1[5-9]\d\d|20\d\d)\b", context)
            answers = [{"text": year.group(), "answer_start": year.start()}] if year else []
            articles.append({"title": str(index), "paragraphs": [{"context": context, "qas": [
                {"id": f"q{index}", "question": "In which year did it happen?",
                 "answers": answers}]}]})
            index += 1
    with open(path, "w", encoding="utf-8") as file:
        json.dump({"version": "1.1", "data": articles}, file)
    return path


def peak_rss_of_feature_creation(copies: int, spm: str, work_dir: str) -> float:
    """MiB: a fresh process writes training features for `copies` × the fixture contexts."""
    code = f"""
import json, sys
sys.path.insert(0, {os.path.join(REPO, 'tests')!r})
from squad_fixtures import squad_document, write_squad
from albert.finetuning_data import squad
from albert.tokenization import SentencePieceTokenizer
document = squad_document("2.0")
articles = []
for copy in range({copies}):
    for article in json.loads(json.dumps(document["data"])):
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                qa["id"] = f"{{qa['id']}}-{{copy}}"
        articles.append(article)
path = write_squad({work_dir!r} + "/rss_{copies}.json", document=dict(document, data=articles))
tokenizer = SentencePieceTokenizer({spm!r})
cache = squad.plan_train_features(path, {work_dir!r} + "/rss_{copies}.tf_record", tokenizer,
                                  384, 128, 64)
squad.write_train_features(cache, tokenizer, 384, 128, 64)
# VmHWM: this process's own peak (ru_maxrss would include the parent's, kept across exec)
print([int(line.split()[1]) / 1024 for line in open("/proc/self/status")
       if line.startswith("VmHWM")][0])
"""
    for suffix in (".tf_record", ".tf_record.settings.json"):
        target = os.path.join(work_dir, f"rss_{copies}{suffix}")
        if os.path.exists(target):
            os.remove(target)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return float(result.stdout.strip().splitlines()[-1])


# transformers 5 removed the question-answering pipeline: it runs from the last release that has
# it (4.57.1), in a virtual environment that shares this one's packages (torch, tokenizers).
HF_PIPELINE_VERSION = "4.57.1"
PIPELINE_CODE = """
import json, sys, time
import numpy as np, torch, transformers
directory, questions_file, batch_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
torch.set_num_threads(torch.get_num_threads())
model = transformers.AlbertForQuestionAnswering.from_pretrained(directory).eval()
tokenizer = transformers.AlbertTokenizerFast.from_pretrained(directory)
pipe = transformers.pipeline("question-answering", model=model, tokenizer=tokenizer, device=-1)
timings = {"forward_s": 0.0, "postprocess_s": 0.0, "windows": 0}
forward, post = pipe._forward, pipe.postprocess
def timed_forward(inputs, **kwargs):
    began = time.perf_counter()
    out = forward(inputs, **kwargs)
    timings["forward_s"] += time.perf_counter() - began
    timings["windows"] += int(np.prod(inputs["input_ids"].shape[:-1]))
    return out
def timed_post(*args, **kwargs):
    began = time.perf_counter()
    out = post(*args, **kwargs)
    timings["postprocess_s"] += time.perf_counter() - began
    return out
pipe._forward, pipe.postprocess = timed_forward, timed_post
questions = json.load(open(questions_file))
options = dict(max_seq_len=384, doc_stride=128, max_question_len=64, top_k=20)
pipe(questions[:2], **options)
timings.update(forward_s=0.0, postprocess_s=0.0, windows=0)
began = time.perf_counter()
pipe(questions, batch_size=batch_size, **options)
total = time.perf_counter() - began
print(json.dumps({"transformers": transformers.__version__, "windows": timings["windows"],
                  "windows_per_s": round(timings["windows"] / timings["forward_s"], 2),
                  "postprocess_s": round(timings["postprocess_s"], 4),
                  "total_s": round(total, 2)}))
"""


def hf_pipeline_python(work_dir: str) -> str:
    """A Python with transformers 4.57.1 (made once under work_dir: a venv over this one)."""
    venv = os.path.join(work_dir, f"transformers-{HF_PIPELINE_VERSION}")
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q",
                        f"transformers=={HF_PIPELINE_VERSION}"], check=True)
    return python


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default=os.path.join(REPO, "configs", "albert_base_v2.json"))
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--work_dir", default=os.path.join(tempfile.gettempdir(),
                                                          "albert-squad-bench"))
    parser.add_argument("--hf_pipeline_python", default=None,
                        help="A Python with transformers 4.x (default: a venv made in work_dir)")
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)

    import torch
    import transformers

    from albert.checkpoints import model_weights, write_checkpoint
    from albert.config import AlbertConfig
    from albert.finetuning_data import squad
    from albert.datasets.demo_corpus import build_demo_corpus
    from albert.modeling import AlbertSquadV1, AlbertSquadV2
    from albert.tasks.squad import SquadEvaluation, SquadTask
    from albert.tokenization import SentencePieceTokenizer
    from albert.tokenization.training import train_sentencepiece

    corpus = os.path.join(args.work_dir, "corpus")
    build_demo_corpus(corpus)
    prefix = os.path.join(args.work_dir, "spm8000")
    if not os.path.exists(prefix + ".model"):
        train_sentencepiece([os.path.join(corpus, "train.txt")], prefix, vocab_size=8000)
    spm = prefix + ".model"
    data = make_examples(corpus, args.questions, os.path.join(args.work_dir, "dev.json"))
    tokenizer = SentencePieceTokenizer(spm)
    config = AlbertConfig.from_json_file(args.config)

    for name in ("dev.tf_record", "dev_left.json"):
        if os.path.exists(os.path.join(args.work_dir, name)):
            os.remove(os.path.join(args.work_dir, name))
    began = time.perf_counter()
    predict = squad.prepare_predict_features(data, os.path.join(args.work_dir, "dev.tf_record"),
                                             os.path.join(args.work_dir, "dev_left.json"),
                                             tokenizer, 384, 128, 64)
    feature_seconds = time.perf_counter() - began
    dataset = json.load(open(data))["data"]
    windows = len(predict.features)
    report = {"questions": len(predict.examples), "windows": windows,
              "feature_creation_s": round(feature_seconds, 2)}

    def ours(version_2, bucket):
        model = AlbertSquadV2(config) if version_2 else AlbertSquadV1(config)
        task = SquadTask(config=config, max_seq_length=384, version_2=version_2,
                         evaluation=SquadEvaluation(predict, dataset, args.work_dir,
                                                    bucket_v1=bucket))
        task.raw_outputs(model, args.batch_size)  # warm-up (tracing)
        began = time.perf_counter()
        outputs = task.raw_outputs(model, args.batch_size)
        model_seconds = time.perf_counter() - began
        began = time.perf_counter()
        task.decode(outputs)
        return model, {"windows_per_s": round(windows / model_seconds, 2),
                       "decode_s": round(time.perf_counter() - began, 4)}

    model_v1, report["ours_v1_full_length"] = ours(False, False)
    _, report["ours_v1_bucketed"] = ours(False, True)
    _, report["ours_v2"] = ours(True, True)

    print(json.dumps(report), file=sys.stderr, flush=True)  # partial results

    hf_dir = os.path.join(args.work_dir, "hf")
    write_checkpoint(model_weights(model_v1), config, hf_dir, "hf", head="squad_v1",
                     overwrite=True)
    shutil.copy(spm, os.path.join(hf_dir, "spiece.model"))
    torch.set_num_threads(os.cpu_count() or 1)
    hf_model = transformers.AlbertForQuestionAnswering.from_pretrained(hf_dir).eval()
    inputs = predict.model_inputs()

    def hf_forward():
        with torch.no_grad():
            for start in range(0, windows, args.batch_size):
                rows = slice(start, start + args.batch_size)
                hf_model(input_ids=torch.tensor(inputs["input_word_ids"][rows]).long(),
                         attention_mask=torch.tensor(inputs["input_mask"][rows]).long(),
                         token_type_ids=torch.tensor(inputs["input_type_ids"][rows]).long())

    hf_forward()  # warm-up
    began = time.perf_counter()
    hf_forward()
    report["huggingface_model_same_windows"] = {
        "transformers": transformers.__version__,
        "windows_per_s": round(windows / (time.perf_counter() - began), 2)}
    print(json.dumps(report), file=sys.stderr, flush=True)

    python = args.hf_pipeline_python or hf_pipeline_python(args.work_dir)
    questions = [{"question": e.question_text, "context": e.paragraph_text}
                 for e in predict.examples]
    with open(os.path.join(args.work_dir, "pipeline_questions.json"), "w") as file:
        json.dump(questions, file)
    result = subprocess.run([python, "-c", PIPELINE_CODE, hf_dir,
                             os.path.join(args.work_dir, "pipeline_questions.json"),
                             str(args.batch_size)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"the Hugging Face pipeline failed:\n{result.stderr[-3000:]}")
    report["huggingface_pipeline"] = json.loads(result.stdout.strip().splitlines()[-1])

    report["feature_creation_peak_rss_mib"] = {
        "fixture_x1": round(peak_rss_of_feature_creation(1, spm, args.work_dir), 1),
        "fixture_x10": round(peak_rss_of_feature_creation(10, spm, args.work_dir), 1)}
    report["this_process_peak_rss_mib"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
