"""The paper's parameter columns, recomputed (Tables 1, 3, 4, 11, 12).

    python -m albert.paper params               # markdown table
    python -m albert.paper params --format=json # the same rows as JSON

Counts come from the checkpoint name table's shapes, so nothing is allocated
and the xxlarge and H = 6144 models are counted in milliseconds. `ours` counts
the backbone including the pooler; `ours_without_pooler` excludes it. The
paper is not consistent about the pooler: shared rows match when
it is counted, not-shared and BERT rows when it is not. `agrees` says which
accounting rounds to the printed value, or "no" (with a note) for the rows
where no accounting reproduces the paper.
"""

import dataclasses
from typing import List, Optional

from albert.checkpoints.naming import count_parameters
from albert.config import AlbertConfig

VOCAB_SIZE = 30000  # ALBERT's SentencePiece vocabulary, also used for the paper's BERT rows

# (layers, hidden, intermediate, heads) of the released shapes.
SHAPES = {
    "base": (12, 768, 3072, 12),
    "large": (24, 1024, 4096, 16),
    "xlarge": (24, 2048, 8192, 16),
    "xxlarge": (12, 4096, 16384, 64),
}

# Context for rows where the printed value is not reproducible.
_EXTRA_NOTES = {
    ("Table 1", "ALBERT-xxlarge"): (
        "; the paper also prints 233M in its text and 225M for the same shape in Table 12; "
        "HF and KerasHub report ~223M"),
}


@dataclasses.dataclass
class Row:
    table: str
    config: str
    settings: dict
    ours: int
    ours_without_pooler: int
    paper: str
    agrees: str
    note: str = ""


def albert_config(size: str = "base", embedding_size: int = 128, num_hidden_layers: Optional[int] = None,
                  hidden_size: Optional[int] = None, sharing: str = "all-shared") -> AlbertConfig:
    """A paper configuration: `sharing` is one of the four strategies of Table 4."""
    layers, hidden, intermediate, heads = SHAPES[size]
    if hidden_size is not None:  # Table 12: I = 4H, N = H / 64
        hidden, intermediate, heads = hidden_size, 4 * hidden_size, hidden_size // 64
    layers = num_hidden_layers or layers
    groups = layers if sharing == "not-shared" else 1
    strategy = {"shared-attention": "shared_attention", "shared-FFN": "shared_ffn"}.get(sharing, "groups")
    return AlbertConfig(vocab_size=VOCAB_SIZE, embedding_size=embedding_size, hidden_size=hidden,
                        num_hidden_layers=layers, num_hidden_groups=groups,
                        num_attention_heads=heads, intermediate_size=intermediate,
                        sharing_strategy=strategy)


def bert_config(size: str) -> AlbertConfig:
    """BERT in ALBERT terms: E = H, one group per layer (no sharing)."""
    hidden = SHAPES[size][1]
    return albert_config(size, embedding_size=hidden, sharing="not-shared")


def _row(table: str, name: str, config: AlbertConfig, printed_millions: int, sharing: str) -> Row:
    ours = count_parameters(config)
    without_pooler = count_parameters(config, include_pooler=False)
    if round(ours / 1e6) == printed_millions:
        agrees = "with pooler"
    elif round(without_pooler / 1e6) == printed_millions:
        agrees = "without pooler"
    else:
        agrees = "no"
    settings = {"L": config.num_hidden_layers, "H": config.hidden_size, "E": config.embedding_size,
                "I": config.intermediate_size, "N": config.num_attention_heads, "V": config.vocab_size,
                "sharing": sharing}
    note = ""
    if agrees == "no":
        with_heads = count_parameters(config, include_heads=True)
        note = (f"paper prints {printed_millions}M; the analytic count is {ours / 1e6:.1f}M "
                f"({with_heads / 1e6:.1f}M with MLM+SOP heads, {without_pooler / 1e6:.1f}M "
                f"without pooler)" + _EXTRA_NOTES.get((table, name), ""))
    return Row(table, name, settings, ours, without_pooler, f"{printed_millions}M", agrees, note)


def parameter_rows() -> List[Row]:
    rows = [
        _row("Table 1", "BERT-base", bert_config("base"), 108, "not-shared"),
        _row("Table 1", "BERT-large", bert_config("large"), 334, "not-shared"),
    ]
    for size, printed in (("base", 12), ("large", 18), ("xlarge", 60), ("xxlarge", 235)):
        rows.append(_row("Table 1", f"ALBERT-{size}", albert_config(size), printed, "all-shared"))

    table3 = {("not-shared", 64): 87, ("not-shared", 128): 89, ("not-shared", 256): 93,
              ("not-shared", 768): 108, ("all-shared", 64): 10, ("all-shared", 128): 12,
              ("all-shared", 256): 16, ("all-shared", 768): 31}
    for (sharing, embedding), printed in table3.items():
        rows.append(_row("Table 3", f"ALBERT-base {sharing} E={embedding}",
                         albert_config("base", embedding, sharing=sharing), printed, sharing))

    table4 = {768: (31, 83, 57, 108), 128: (12, 64, 38, 89)}
    for embedding, printed_values in table4.items():
        for sharing, printed in zip(("all-shared", "shared-attention", "shared-FFN", "not-shared"),
                                    printed_values):
            rows.append(_row("Table 4", f"ALBERT-base E={embedding} {sharing}",
                             albert_config("base", embedding, sharing=sharing), printed, sharing))

    for layers in (1, 3, 6, 12, 24, 48):
        rows.append(_row("Table 11", f"ALBERT-large L={layers}",
                         albert_config("large", num_hidden_layers=layers), 18, "all-shared"))

    for hidden, printed in ((1024, 18), (2048, 60), (4096, 225), (6144, 499)):
        rows.append(_row("Table 12", f"H={hidden}",
                         albert_config("large", num_hidden_layers=3, hidden_size=hidden),
                         printed, "all-shared"))
    return rows


def format_markdown(rows: List[Row]) -> str:
    lines = ["| table | configuration | ours (with pooler) | ours (without pooler) | paper | agrees | note |",
             "|---|---|---:|---:|---:|---|---|"]
    for row in rows:
        lines.append(f"| {row.table} | {row.config} | {row.ours:,} | {row.ours_without_pooler:,} | "
                     f"{row.paper} | {row.agrees} | {row.note} |")
    return "\n".join(lines) + "\n"
