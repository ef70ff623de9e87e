"""How big the reproduced runs are: model widths, vocabulary, data and training budget.

A scale divides every width of a paper configuration (hidden size,
embedding size E, feed-forward size) by `width_divisor` and the depth by
`depth_divisor` (rounded up; a not-shared model keeps one group per layer),
and keeps the attention heads, so what the tables vary (E / H, sharing,
the order of depths and widths) stays the paper's. Every cell of a table gets the
same budget. `paper` is the paper's own setting (section 4.1): batch 4096,
sequence length 512, 125,000 LAMB steps at 0.00176 with 3,125 warm-up steps,
a 30,000-piece vocabulary.
"""

import dataclasses
import json
import math
import os
from typing import Dict, Optional

from albert.config import AlbertConfig

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLE14_FILE = os.path.join(_REPO, "configs", "finetuning", "table14.json")


@dataclasses.dataclass(frozen=True)
class Scale:
    name: str
    width_divisor: int
    depth_divisor: int
    vocab_size: int
    max_seq_length: int
    max_predictions_per_seq: int
    train_batch_size: int
    num_train_steps: int
    num_warmup_steps: int
    learning_rate: float
    dupe_factor: int
    heldout_dupe_factor: int
    save_checkpoints_steps: int
    eval_batch_size: int
    # Fine-tuning on --glue_dir tasks; None: the paper's Table 14 settings.
    finetuning_steps: Optional[int]
    finetuning_batch_size: int = 16
    finetuning_learning_rate: float = 1e-4
    runs_by_default: bool = True
    # None: the paper's. At a small width, fewer and wider attention heads compute faster on a
    # CPU (docs/pretraining.md); no table varies the number of heads.
    num_attention_heads: Optional[int] = None
    # run_pretraining.py's --mixed_precision; "auto": bfloat16 only where this CPU has it
    # natively (measured no worse than float32 per step, 1.2x faster; docs/pretraining.md).
    mixed_precision: Optional[str] = None

    def config(self, paper_config: AlbertConfig) -> AlbertConfig:
        """The paper's configuration shrunk to this scale."""
        values = paper_config.to_dict()
        for key in ("hidden_size", "embedding_size", "intermediate_size"):
            values[key] = max(1, values[key] // self.width_divisor)
        layers = values["num_hidden_layers"]
        values["num_hidden_layers"] = math.ceil(layers / self.depth_divisor)
        if values["num_hidden_groups"] == layers:  # not-shared: one group per layer
            values["num_hidden_groups"] = values["num_hidden_layers"]
        values["vocab_size"] = self.vocab_size
        if self.num_attention_heads is not None:
            values["num_attention_heads"] = self.num_attention_heads
        values["max_position_embeddings"] = max(self.max_seq_length, 512 // self.width_divisor)
        return AlbertConfig.from_dict(values, allow_unknown_keys=True)

    def finetuning(self, task: str) -> Dict[str, object]:
        """run_classifier.py settings for a GLUE task (lower-case name, e.g. "sst-2")."""
        if self.finetuning_steps is not None:
            return {"train_step": self.finetuning_steps,
                    "warmup_step": max(1, self.finetuning_steps // 10),
                    "train_batch_size": self.finetuning_batch_size,
                    "learning_rate": self.finetuning_learning_rate,
                    "max_seq_length": self.max_seq_length}
        with open(TABLE14_FILE, encoding="utf-8") as handle:
            table14 = json.load(handle)
        settings = table14.get(task.lower(), table14["sst-2"])
        return {key: settings[key] for key in ("train_step", "warmup_step", "train_batch_size",
                                                "learning_rate", "max_seq_length")}


SCALES: Dict[str, Scale] = {scale.name: scale for scale in (
    # Two CPU cores: about 6 minutes a cell, Table 5 (three cells) in about 20 minutes.
    Scale("tiny", width_divisor=8, depth_divisor=2, vocab_size=8000, max_seq_length=64,
          max_predictions_per_seq=10, train_batch_size=64, num_train_steps=600,
          num_warmup_steps=60, learning_rate=0.01, dupe_factor=5, heldout_dupe_factor=2,
          save_checkpoints_steps=150, eval_batch_size=128, finetuning_steps=200),
    # Two CPU cores, the measured recipe of docs/pretraining.md: ALBERT-base widths / 6 and depth
    # / 3 (H=128, 4 layers) with 4 heads of 32, batch 64 at LAMB 0.01, 10 % warm-up, bfloat16
    # where native. Table 5 took 1 h 37 min on 2 cores (docs/paper.md).
    Scale("cpu", width_divisor=6, depth_divisor=3, vocab_size=8000, max_seq_length=64,
          max_predictions_per_seq=10, train_batch_size=64, num_train_steps=6000,
          num_warmup_steps=600, learning_rate=0.01, dupe_factor=5, heldout_dupe_factor=4,
          save_checkpoints_steps=1000, eval_batch_size=256, finetuning_steps=300,
          num_attention_heads=4, mixed_precision="auto"),
    # A workstation GPU, a few hours per run.
    Scale("small", width_divisor=4, depth_divisor=1, vocab_size=16000, max_seq_length=128,
          max_predictions_per_seq=20, train_batch_size=128, num_train_steps=10000,
          num_warmup_steps=1000, learning_rate=0.005, dupe_factor=10, heldout_dupe_factor=4,
          save_checkpoints_steps=2000, eval_batch_size=128, finetuning_steps=1000,
          finetuning_batch_size=32, finetuning_learning_rate=5e-5),
    # The paper's model sizes on a shorter budget (one accelerator host).
    Scale("base", width_divisor=1, depth_divisor=1, vocab_size=30000, max_seq_length=128,
          max_predictions_per_seq=20, train_batch_size=256, num_train_steps=50000,
          num_warmup_steps=3125, learning_rate=0.00176, dupe_factor=10, heldout_dupe_factor=4,
          save_checkpoints_steps=5000, eval_batch_size=128, finetuning_steps=None),
    # The paper: TPU pods. Written out as commands; run only with --run.
    Scale("paper", width_divisor=1, depth_divisor=1, vocab_size=30000, max_seq_length=512,
          max_predictions_per_seq=20, train_batch_size=4096, num_train_steps=125000,
          num_warmup_steps=3125, learning_rate=0.00176, dupe_factor=40, heldout_dupe_factor=4,
          save_checkpoints_steps=5000, eval_batch_size=64, finetuning_steps=None,
          runs_by_default=False),
)}


def scale_settings(scale: Scale) -> dict:
    """The scale as recorded in a cell's settings.json (unset optional overrides are left out,
    so directories started before they existed still match)."""
    values = dataclasses.asdict(scale)
    for optional in ("num_attention_heads", "mixed_precision"):
        if values[optional] is None:
            del values[optional]
    return values

