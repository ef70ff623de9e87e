"""The end-to-end demo: real text -> vocabulary -> pretraining data -> a small pretrained ALBERT.

    python -m albert.demo --output_dir=albert_demo

Runs the project's own command-line tools, printing each command:

1. `python -m albert.datasets demo-corpus`: English prose from the gensim
   4.4.0 wheel (Wikipedia sample + news), held-out news documents apart;
2. `python -m albert.tokenization train`: a SentencePiece vocabulary with the
   official ALBERT recipe;
3. `create_pretraining_data.py`: TFRecords for training and for held-out
   evaluation (sentence-order pairs only, so chance is 0.5);
4. `run_pretraining.py`: a few minutes of MLM + SOP pretraining of a small
   ALBERT with LAMB, evaluated on the held-out data at every checkpoint;
5. `python -m albert.paper params`: the paper's parameter tables.

Everything is cached under --output_dir; re-running resumes. Nothing is
downloaded.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys

from albert import io

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A small ALBERT: factorised embeddings (E < H), all layers sharing one block.
DEMO_CONFIG = {
    "embedding_size": 64, "hidden_size": 128, "num_hidden_layers": 4, "num_hidden_groups": 1,
    "inner_group_num": 1, "num_attention_heads": 4, "intermediate_size": 512,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
    "max_position_embeddings": 128, "type_vocab_size": 2, "initializer_range": 0.02,
}


def run(command, env=None):
    printable = " ".join(shlex.quote(part) for part in command)
    print(f"\n$ {printable}", flush=True)
    result = subprocess.run(command, cwd=REPO, env=env)
    if result.returncode != 0:
        sys.exit(f"demo step failed (exit {result.returncode}): {printable}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m albert.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="albert_demo")
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--max_seq_length", type=int, default=64)
    parser.add_argument("--num_train_steps", type=int, default=1500)
    parser.add_argument("--train_batch_size", type=int, default=64)
    args = parser.parse_args(argv)

    out = os.path.abspath(args.output_dir)
    python = sys.executable
    corpus, vocab, data, run_dir = (os.path.join(out, name) for name in
                                    ("corpus", "vocab", "data", "pretraining"))
    predictions = max(1, round(args.max_seq_length * 0.15))

    run([python, "-m", "albert.datasets", "demo-corpus", f"--output_dir={corpus}"])
    spm_prefix = os.path.join(vocab, f"spm{args.vocab_size}")
    if not os.path.exists(spm_prefix + ".model"):
        run([python, "-m", "albert.tokenization", "train", f"--input={corpus}/train.txt",
             f"--model_prefix={spm_prefix}", f"--vocab_size={args.vocab_size}"])
    for split, extra in (("train", ["--dupe_factor=5"]),
                         ("heldout", ["--dupe_factor=4", "--nosingle_segment_random_document"])):
        target = os.path.join(data, f"{split}.tfrecord")
        if not os.path.exists(target):
            run([python, "create_pretraining_data.py", f"--input_file={corpus}/{split}.txt",
                 f"--output_file={target}", f"--spm_model_file={spm_prefix}.model",
                 f"--max_seq_length={args.max_seq_length}",
                 f"--max_predictions_per_seq={predictions}", *extra])
    config_file = os.path.join(out, "albert_config.json")
    io.write_json_atomically(config_file, dict(DEMO_CONFIG, vocab_size=args.vocab_size))
    run([python, "run_pretraining.py", f"--albert_config_file={config_file}",
         f"--input_file={data}/train.tfrecord", f"--eval_file={data}/heldout.tfrecord",
         f"--output_dir={run_dir}",
         f"--train_batch_size={args.train_batch_size}",
         f"--num_train_steps={args.num_train_steps}",
         f"--num_warmup_steps={args.num_train_steps // 10}", "--learning_rate=0.01",
         f"--save_checkpoints_steps={max(args.num_train_steps // 5, 1)}", "--do_eval",
         "--max_eval_steps=100", "--steps_per_loop=50"])
    run([python, "-m", "albert.paper", "params"])

    results = io.read_json(os.path.join(run_dir, "eval_results.json"))
    log = [json.loads(line) for line in io.read_text(os.path.join(run_dir, "train_log.jsonl"))
           .splitlines()]
    first = sum(r["masked_lm_loss"] for r in log[:50]) / len(log[:50])
    last = sum(r["masked_lm_loss"] for r in log[-50:]) / len(log[-50:])
    final = results["evaluations"][-1]
    print("\nDemo finished.")
    print(f"  training MLM loss: {first:.3f} (first 50 steps) -> {last:.3f} (last 50 steps)")
    print(f"  held-out at step {final['step']}: masked_lm_accuracy {final['masked_lm_accuracy']:.4f}, "
          f"sentence_order_accuracy {final['sentence_order_accuracy']:.4f} (chance 0.5)")
    print(f"  checkpoints: {run_dir} (model.ckpt-best by masked_lm_accuracy)")
    print(f"  TensorBoard: tensorboard --logdir={os.path.join(run_dir, 'tensorboard')}")


if __name__ == "__main__":
    main()
