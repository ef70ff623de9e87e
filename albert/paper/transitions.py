"""The paper's Figure 1: how far each layer moves its input, in L2 distance and in angle.

`python -m albert.paper transitions --checkpoint=CKPT --input_file=TEXT --spm_model_file=SPM
--label=LABEL --output=OUT.json` runs a checkpoint of any format the package reads (detected
as `--init_checkpoint` is) over a text file: every non-empty line is one sequence
`[CLS] pieces [SEP]`, cut at `--max_seq_length` (default 64), padded per batch. For every
layer application l = 0 … L−1 it reports the mean over all real (non-padding) tokens of the
L2 distance and of the angle in degrees (arccos of the cosine similarity) between the layer's
input and its output. Layer 0's input is what the first block reads: the embeddings after the
E → H projection (the embedding output itself when E = H). A shared layer applied L times
counts once per application; with K inner groups a layer is its K blocks, as in the
original, where one layer runs every inner group of its group.

The model runs in float32 whatever precision it was trained in; the distances and angles are
computed in float64 from its float32 states. A curve's roughness is
sum over l = 1 … L−1 of |v(l) − v(l − 1)|: the paper's "smoother" as one number.

The config is `--albert_config_file`, else the one the checkpoint carries, else the
`albert_config.json` in the checkpoint's directory, or in the run directory above it when the
checkpoint is in a run's `pretraining/` folder (`runs/<run>/albert_config.json` beside
`runs/<run>/pretraining/model.ckpt-N`). A directory of TensorFlow checkpoints means its latest
one. The output says which config and which checkpoint were used; its JSON adds
`checkpoint_prefix` (the checkpoint measured), `checkpoint_step` (the N of `model.ckpt-N`, else
null) and `albert_config_file` (null: the checkpoint's own) to `checkpoint` (as given).
"""

import argparse
import dataclasses
import hashlib
import importlib.util
import os
import re
from typing import Dict, List, Optional, Sequence

import numpy as np

from albert import io, tokenization
from albert.checkpoints import (ALBERT_CONFIG_FILE, carried_config, detect_format, format_names,
                                load_into_model)
from albert.checkpoints.tf1 import resolve_checkpoint_prefix
from albert.config import AlbertConfig
from albert.errors import ConfigError, InputError
from albert.modeling import AlbertEncoder

MAX_SEQ_LENGTH = 64
BATCH_SIZE = 64
METRICS = ("l2_distance", "angle_degrees")
# Axis titles of the paper's two panels.
METRIC_TITLES = {"l2_distance": "L2 distance",
                 "angle_degrees": "cosine similarity (angle in degrees)"}
NOT_SHARED, ALL_SHARED = "not-shared", "all-shared"
# The formats that are TensorFlow checkpoints: given their directory, the latest one is read.
TF_CHECKPOINT_FORMATS = ("tf1", "model_garden")
# A training run's checkpoint prefix: model.ckpt-<step>.
_STEP = re.compile(r"model\.ckpt-(\d+)")
# The folder run_pretraining.py writes its checkpoints to inside a reproduction's run directory.
PRETRAINING_FOLDER = "pretraining"


def sharing_kind(config: AlbertConfig) -> str:
    """What the config shares across layers, in the paper's words."""
    if config.sharing_strategy == "shared_attention":
        return "shared-attention"
    if config.sharing_strategy == "shared_ffn":
        return "shared-FFN"
    if config.num_hidden_groups == config.num_hidden_layers:
        return NOT_SHARED
    if config.num_hidden_groups == 1 and config.inner_group_num == 1:
        return ALL_SHARED
    groups, inner = config.num_hidden_groups, config.inner_group_num
    return (f"{config.num_hidden_layers} layers in {groups} group{'s' * (groups > 1)} of "
            f"{inner} inner group{'s' * (inner > 1)}")


def read_sequences(path: str, tokenizer, max_seq_length: int) -> List[List[int]]:
    """Every non-empty line of `path` as the ids of `[CLS] pieces [SEP]`, cut at
    `max_seq_length`."""
    sequences = []
    for line in io.read_lines(path):
        if line.strip():
            pieces = tokenizer.encode(line)[:max_seq_length - 2]
            sequences.append([tokenizer.cls_id, *pieces, tokenizer.sep_id])
    if not sequences:
        raise InputError(f"--input_file={path} has no non-empty line")
    return sequences


def layer_states(encoder: AlbertEncoder, word_ids: np.ndarray,
                 input_mask: np.ndarray) -> List[np.ndarray]:
    """The L + 1 hidden states `[B, S, H]` around the L layers: layer 0's input (the
    embeddings after the projection), then every layer's output."""
    outputs = encoder({"input_word_ids": word_ids, "input_mask": input_mask},
                      training=False, with_embedding_output=True)
    blocks = outputs["encoder_outputs"]
    per_layer = len(blocks) // encoder.albert_config.num_hidden_layers  # inner groups
    return [np.asarray(state) for state in [outputs["embedding_output"],
                                            *blocks[per_layer - 1::per_layer]]]


@dataclasses.dataclass
class Measurement:
    """Per layer, the mean over real tokens of each metric; and what it was taken over."""

    l2_distance: List[float]
    angle_degrees: List[float]
    sequences: int
    tokens: int

    def layers(self) -> List[dict]:
        return [{"layer": layer, "l2_distance": distance, "angle_degrees": angle}
                for layer, (distance, angle) in enumerate(zip(self.l2_distance,
                                                               self.angle_degrees))]


def roughness(values: Sequence[float]) -> float:
    """Sum over l = 1 … L−1 of |v(l) − v(l − 1)|."""
    return float(np.sum(np.abs(np.diff(np.asarray(values, np.float64)))))


def mean_over_layers(values: Sequence[float]) -> float:
    return float(np.mean(values))


def _pad(batch: Sequence[Sequence[int]]):
    length = max(len(sequence) for sequence in batch)
    word_ids = np.zeros((len(batch), length), np.int32)
    mask = np.zeros((len(batch), length), np.int32)
    for row, sequence in enumerate(batch):
        word_ids[row, :len(sequence)] = sequence
        mask[row, :len(sequence)] = 1
    return word_ids, mask


def measure(encoder: AlbertEncoder, sequences: Sequence[Sequence[int]], batch_size: int,
            progress=None) -> Measurement:
    """The transitions of every layer over `sequences` (token ids), batches padded to their
    longest sequence; `progress(done, tokens)` is called after each batch."""
    layers = encoder.albert_config.num_hidden_layers
    sums = {metric: np.zeros(layers, np.float64) for metric in METRICS}
    tokens = 0
    for start in range(0, len(sequences), batch_size):
        word_ids, mask = _pad(sequences[start:start + batch_size])
        real = mask.astype(bool)
        states = [state[real].astype(np.float64) for state in layer_states(encoder, word_ids, mask)]
        for layer in range(layers):
            before, after = states[layer], states[layer + 1]
            sums["l2_distance"][layer] += np.linalg.norm(after - before, axis=-1).sum()
            cosine = np.sum(before * after, axis=-1) / (np.linalg.norm(before, axis=-1)
                                                        * np.linalg.norm(after, axis=-1))
            sums["angle_degrees"][layer] += np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))).sum()
        tokens += int(real.sum())
        if progress:
            progress(min(start + batch_size, len(sequences)), tokens)
    return Measurement(**{metric: (sums[metric] / tokens).tolist() for metric in METRICS},
                       sequences=len(sequences), tokens=tokens)


def curve_summary(layers: Sequence[dict]) -> Dict[str, dict]:
    """{"roughness" | "mean_over_layers": {metric: value}} of per-layer entries."""
    values = {metric: [entry[metric] for entry in layers] for metric in METRICS}
    return {"roughness": {metric: roughness(values[metric]) for metric in METRICS},
            "mean_over_layers": {metric: mean_over_layers(values[metric]) for metric in METRICS}}


def plot_curves(curves: Sequence[dict], path: str, title: str) -> None:
    """The paper's layout: L2 distance and angle against the layer index, side by side, one
    line per curve. A curve: {"label", "layers": [{"layer", metric: value}], "style": matplotlib
    line keywords}. Written atomically (a PNG)."""
    # Inside: matplotlib is an optional dependency (the "demo" extra).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after choosing the file-only backend above

    figure, panels = plt.subplots(1, 2, figsize=(10, 4))
    for axes, metric in zip(panels, METRICS):
        for curve in curves:
            axes.plot([entry["layer"] for entry in curve["layers"]],
                      [entry[metric] for entry in curve["layers"]], label=curve["label"],
                      **curve.get("style", {"marker": "o"}))
        axes.set_xlabel("layer")
        axes.set_ylabel(METRIC_TITLES[metric])
        axes.set_title(METRIC_TITLES[metric], fontsize=9)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.grid(alpha=0.3)
    panels[0].legend(fontsize=7)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    with io.atomic_output_file(path) as temporary:
        figure.savefig(temporary, dpi=110, format="png")
    plt.close(figure)


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"true or false, not {text!r}")
    return text.lower() == "true"


def add_arguments(parser) -> None:
    parser.add_argument("--albert_config_file", default=None,
                        help="the model's config (default: the one the checkpoint carries: "
                             "Hugging Face, Keras, KerasHub, our exports; else the "
                             f"{ALBERT_CONFIG_FILE} in the checkpoint's directory, or in the run "
                             f"directory above its {PRETRAINING_FOLDER}/ folder)")
    parser.add_argument("--checkpoint", required=True,
                        help="the checkpoint to measure, in any format the package reads; a "
                             "directory of TensorFlow checkpoints: its latest (the output names "
                             "its step)")
    parser.add_argument("--input_format", default="auto", choices=["auto", *format_names()],
                        help="the checkpoint's format (default: detected)")
    parser.add_argument("--input_file", required=True,
                        help="text: every non-empty line is one sequence")
    parser.add_argument("--spm_model_file", default=None, help="the SentencePiece model")
    parser.add_argument("--vocab_file", default=None,
                        help="a WordPiece vocabulary instead of --spm_model_file")
    parser.add_argument("--do_lower_case", default=True, type=_boolean,
                        help="lower-case the text first: true (default) or false")
    parser.add_argument("--max_seq_length", type=int, default=MAX_SEQ_LENGTH,
                        help="tokens per sequence, [CLS] and [SEP] included; longer lines are "
                             "cut")
    parser.add_argument("--batch_size", type=int, default=BATCH_SIZE,
                        help="sequences per batch, padded to the batch's longest")
    parser.add_argument("--label", required=True,
                        help="the model's name in the output and the plot, e.g. "
                             "'all-shared, seed 1' (what `criteria --table=1` reads)")
    parser.add_argument("--output", required=True, help="JSON file to write (must not exist)")
    parser.add_argument("--plot", default=None,
                        help="also a PNG of both curves (must not exist; needs the demo "
                             "extra's matplotlib)")


def _check_arguments(args) -> None:
    io.refuse_existing(args.output, "--output")
    io.refuse_existing(args.plot, "--plot")
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise InputError("--plot needs matplotlib: pip install -e '.[demo]'")
    if not io.isfile(args.input_file):
        raise InputError(f"--input_file={args.input_file} is not a file")
    if args.albert_config_file and not io.isfile(args.albert_config_file):
        raise InputError(f"--albert_config_file={args.albert_config_file} is not a file")
    if args.max_seq_length < 3:
        raise InputError(f"--max_seq_length must be at least 3 ([CLS], a piece, [SEP]), got "
                         f"{args.max_seq_length}")
    if args.batch_size < 1:
        raise InputError(f"--batch_size must be at least 1, got {args.batch_size}")
    if not args.label.strip():
        raise InputError("--label is empty")


@dataclasses.dataclass
class Checkpoint:
    """What was measured: the checkpoint as read, its format, its step, and the config file
    used (None: the config the checkpoint carries)."""

    path: str
    format_name: str
    step: Optional[int]
    config_file: Optional[str]

    def describe(self) -> str:
        step = "" if self.step is None else f"step {self.step}, "
        config = self.config_file or "the checkpoint's own"
        return f"{self.path} ({step}{self.format_name}; config: {config})"


def resolve_checkpoint(path: str, checkpoint_format: str) -> str:
    """The checkpoint to read: a TensorFlow checkpoint's prefix (a directory's latest, resolved
    once, so a run still writing checkpoints cannot change it between reads), else `path`."""
    return resolve_checkpoint_prefix(path) if checkpoint_format in TF_CHECKPOINT_FORMATS else path


def checkpoint_step(path: str) -> Optional[int]:
    """The N of a training run's `model.ckpt-N`, or None (`model.ckpt-best`, other formats)."""
    match = _STEP.fullmatch(io.basename(path))
    return int(match[1]) if match else None


def config_files_beside(given: str, resolved: str) -> List[str]:
    """Where a training run leaves the checkpoint's albert_config.json: the checkpoint's
    directory, then the run directory above it when that is a run's `pretraining/` folder."""
    directory = given.rstrip("/") if io.isdir(given) else io.dirname(resolved)
    candidates = [io.join(directory, ALBERT_CONFIG_FILE)]
    if io.basename(directory) == PRETRAINING_FOLDER:
        candidates.append(io.join(io.dirname(directory), ALBERT_CONFIG_FILE))
    return candidates


def _config(args, checkpoint: str, checkpoint_format: str):
    """(config, the file it came from or None when the checkpoint carries it)."""
    if args.albert_config_file:
        return AlbertConfig.from_json_file(args.albert_config_file), args.albert_config_file
    candidates = config_files_beside(args.checkpoint, checkpoint)
    beside = next((path for path in candidates if io.isfile(path)), None)
    try:
        carried = carried_config(checkpoint, checkpoint_format)
    except ConfigError:
        # A format that carries no config and cannot be read without one (Model Garden).
        if beside is None:
            raise
        carried = None
    if carried is not None:
        return carried, None
    if beside is None:
        raise InputError(f"{args.checkpoint} carries no config and there is none at "
                         f"{' or '.join(candidates)}: pass --albert_config_file")
    return AlbertConfig.from_json_file(beside), beside


def _load_encoder(args):
    """(encoder in float32 with the checkpoint's weights, its config, the `Checkpoint`)."""
    checkpoint_format = (detect_format(args.checkpoint) if args.input_format == "auto"
                         else args.input_format)
    path = resolve_checkpoint(args.checkpoint, checkpoint_format)
    config, config_file = _config(args, path, checkpoint_format)
    if args.max_seq_length > config.max_position_embeddings:
        raise InputError(f"--max_seq_length={args.max_seq_length} exceeds the config's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    encoder = AlbertEncoder(config, dtype="float32")
    load_into_model(encoder, path, checkpoint_format)
    return encoder, config, Checkpoint(path, checkpoint_format, checkpoint_step(path),
                                       config_file)


def main(args) -> int:
    _check_arguments(args)
    encoder, config, checkpoint = _load_encoder(args)
    tokenizer = tokenization.load_tokenizer(args.vocab_file, args.spm_model_file,
                                            args.do_lower_case)
    tokenization.require_special_tokens(tokenizer)
    tokenization.require_vocabulary_within(tokenizer, config.vocab_size)
    sequences = read_sequences(args.input_file, tokenizer, args.max_seq_length)
    print(f"{args.label}: {checkpoint.describe()}", flush=True)
    print(f"{args.label}: {sharing_kind(config)}, {config.num_hidden_layers} layers, "
          f"{len(sequences):,} sequences of {args.input_file}", flush=True)
    shown = 0

    def progress(done: int, tokens: int) -> None:
        nonlocal shown
        # About ten lines per run.
        if done == len(sequences) or done >= shown + len(sequences) / 10:
            shown = done
            print(f"{args.label}: {done:,}/{len(sequences):,} sequences, {tokens:,} tokens",
                  flush=True)

    found = measure(encoder, sequences, args.batch_size, progress)
    layers = found.layers()
    result = {
        "label": args.label,
        "checkpoint": args.checkpoint,
        "checkpoint_format": checkpoint.format_name,
        # Added after the first Figure 1 runs (their files lack them): what was read.
        "checkpoint_prefix": checkpoint.path,
        "checkpoint_step": checkpoint.step,
        "albert_config_file": checkpoint.config_file,
        "config": {"num_hidden_layers": config.num_hidden_layers,
                   "hidden_size": config.hidden_size,
                   "embedding_size": config.embedding_size,
                   "num_hidden_groups": config.num_hidden_groups,
                   "inner_group_num": config.inner_group_num,
                   "sharing": sharing_kind(config)},
        "input_file": args.input_file,
        "input_sha256": hashlib.sha256(io.read_bytes(args.input_file)).hexdigest(),
        "max_seq_length": args.max_seq_length,
        "precision": "float32 model, distances and angles computed in float64",
        "sequences": found.sequences,
        "tokens": found.tokens,
        "layers": layers,
        **curve_summary(layers),
        "plot": os.path.basename(args.plot) if args.plot else None,
    }
    for entry in layers:
        print(f"{args.label}: layer {entry['layer']}: L2 distance {entry['l2_distance']:.4f}, "
              f"angle {entry['angle_degrees']:.3f} degrees")
    print(f"{args.label}: roughness: L2 distance {result['roughness']['l2_distance']:.4f}, "
          f"angle {result['roughness']['angle_degrees']:.3f} degrees")
    io.write_json_atomically(args.output, result)
    print(f"Wrote {args.output}")
    if args.plot:
        plot_curves([{"label": args.label, "layers": layers}], args.plot,
                    f"{args.label}: {found.sequences:,} sequences, {found.tokens:,} tokens of "
                    f"{os.path.basename(args.input_file)}")
        print(f"Wrote {args.plot}")
    return 0
