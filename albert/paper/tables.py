"""The paper's ablation tables: their cells (one pretraining run each) and printed numbers.

Every cell is a full description of one pretraining run at paper size; a
`Scale` (albert.paper.scales) shrinks it. Cells that describe the same run
(e.g. ALBERT-base E=128 all-shared with SOP, which appears in Tables 3, 4
and 5) have the same `run_name`, so `reproduce` trains it once.
"""

import dataclasses
from typing import Dict, Optional, Tuple

from albert.config import AlbertConfig
from albert.paper.params import albert_config

DOWNSTREAM_COLUMNS = ("SQuAD1.1", "SQuAD2.0", "MNLI", "SST-2", "RACE", "Avg")
INTRINSIC_COLUMNS = ("MLM acc", "NSP acc", "SOP acc")
SENTENCE_TASKS = ("None", "NSP", "SOP")
# The paper's ablations used ALBERT v1 settings (dropout 0.1); Table 8 turns it off.
PAPER_DROPOUT = 0.1


@dataclasses.dataclass(frozen=True)
class Cell:
    """One row of a table: the variant, how it is trained, what the paper printed."""

    keys: Tuple[Tuple[str, str], ...]  # the row's identifying columns, e.g. (("E", "128"),)
    size: str = "base"
    embedding_size: int = 128
    sharing: str = "all-shared"
    num_hidden_layers: Optional[int] = None
    hidden_size: Optional[int] = None
    sentence_task: str = "SOP"  # None | NSP | SOP
    dropout: float = PAPER_DROPOUT
    warm_start_from: Optional["Cell"] = None  # Table 11: each depth starts from the previous one
    paper: Tuple[Tuple[str, str], ...] = ()  # column -> printed value
    paper_params: Optional[str] = None

    @property
    def label(self) -> str:
        return ", ".join(f"{name}={value}" for name, value in self.keys)

    def paper_config(self) -> AlbertConfig:
        config = albert_config(self.size, self.embedding_size, self.num_hidden_layers,
                               self.hidden_size, self.sharing)
        return dataclasses.replace(config, hidden_dropout_prob=self.dropout,
                                   attention_probs_dropout_prob=self.dropout)

    @property
    def run_name(self) -> str:
        """A directory name that says everything that makes this run different."""
        config = self.paper_config()
        name = (f"{self.size}-L{config.num_hidden_layers}-H{config.hidden_size}-"
                f"E{config.embedding_size}-{self.sharing}-{self.sentence_task}-"
                f"dropout{self.dropout:g}")
        if self.warm_start_from is not None:
            name += f"-from-L{self.warm_start_from.paper_config().num_hidden_layers}"
        return name


@dataclasses.dataclass(frozen=True)
class Table:
    number: int
    title: str
    key_columns: Tuple[str, ...]
    cells: Tuple[Cell, ...]
    paper_columns: Tuple[str, ...]


def _scores(values: str, columns=DOWNSTREAM_COLUMNS) -> Tuple[Tuple[str, str], ...]:
    return tuple(zip(columns, values.split()))


def _table3() -> Table:
    printed = {
        ("not-shared", 64): ("87M", "89.9/82.9 80.1/77.8 82.9 91.5 66.7 81.3"),
        ("not-shared", 128): ("89M", "89.9/82.8 80.3/77.3 83.7 91.5 67.9 81.7"),
        ("not-shared", 256): ("93M", "90.2/83.2 80.3/77.4 84.1 91.9 67.3 81.8"),
        ("not-shared", 768): ("108M", "90.4/83.2 80.4/77.6 84.5 92.8 68.2 82.3"),
        ("all-shared", 64): ("10M", "88.7/81.4 77.5/74.8 80.8 89.4 63.5 79.0"),
        ("all-shared", 128): ("12M", "89.3/82.3 80.0/77.1 81.6 90.3 64.0 80.1"),
        ("all-shared", 256): ("16M", "88.8/81.5 79.1/76.3 81.5 90.3 63.4 79.6"),
        ("all-shared", 768): ("31M", "88.6/81.5 79.2/76.6 82.0 90.6 63.3 79.8"),
    }
    cells = tuple(Cell(keys=(("sharing", sharing), ("E", str(embedding))), embedding_size=embedding,
                       sharing=sharing, paper=_scores(scores), paper_params=params)
                  for (sharing, embedding), (params, scores) in printed.items())
    return Table(3, "Embedding size E, ALBERT-base", ("sharing", "E"), cells, DOWNSTREAM_COLUMNS)


def _table4() -> Table:
    printed = {
        (768, "all-shared"): ("31M", "88.6/81.5 79.2/76.6 82.0 90.6 63.3 79.8"),
        (768, "shared-attention"): ("83M", "89.9/82.7 80.0/77.2 84.0 91.4 67.7 81.6"),
        (768, "shared-FFN"): ("57M", "89.2/82.1 78.2/75.4 81.5 90.8 62.6 79.5"),
        (768, "not-shared"): ("108M", "90.4/83.2 80.4/77.6 84.5 92.8 68.2 82.3"),
        (128, "all-shared"): ("12M", "89.3/82.3 80.0/77.1 82.0 90.3 64.0 80.1"),
        (128, "shared-attention"): ("64M", "89.9/82.8 80.7/77.9 83.4 91.9 67.6 81.7"),
        (128, "shared-FFN"): ("38M", "88.9/81.6 78.6/75.6 82.3 91.7 64.4 80.2"),
        (128, "not-shared"): ("89M", "89.9/82.8 80.3/77.3 83.2 91.5 67.9 81.6"),
    }
    cells = tuple(Cell(keys=(("E", str(embedding)), ("strategy", sharing)),
                       embedding_size=embedding, sharing=sharing, paper=_scores(scores),
                       paper_params=params)
                  for (embedding, sharing), (params, scores) in printed.items())
    return Table(4, "Cross-layer parameter-sharing strategies, ALBERT-base", ("E", "strategy"),
                 cells, DOWNSTREAM_COLUMNS)


def _table5() -> Table:
    printed = {
        "None": "54.9 52.4 53.3 88.6/81.5 78.1/75.3 81.5 89.9 61.7 79.0",
        "NSP": "54.5 90.5 52.0 88.4/81.5 77.2/74.6 81.6 91.1 62.3 79.2",
        "SOP": "54.0 78.9 86.5 89.3/82.3 80.0/77.1 82.0 90.3 64.0 80.1",
    }
    columns = INTRINSIC_COLUMNS + DOWNSTREAM_COLUMNS
    cells = tuple(Cell(keys=(("SP task", task),), sentence_task=task, paper=_scores(scores, columns),
                       paper_params="12M")
                  for task, scores in printed.items())
    return Table(5, "Sentence-prediction objective, ALBERT-base", ("SP task",), cells, columns)


def _table8() -> Table:
    printed = {0.1: "94.7/89.2 89.6/86.9 90.0 96.3 85.7 90.4",
               0.0: "94.8/89.5 89.9/87.2 90.4 96.5 86.1 90.7"}
    cells = tuple(Cell(keys=(("dropout", "with" if dropout else "without"),), size="xxlarge",
                       dropout=dropout, paper=_scores(scores), paper_params="235M")
                  for dropout, scores in printed.items())
    return Table(8, "Dropout, ALBERT-xxlarge", ("dropout",), cells, DOWNSTREAM_COLUMNS)


def _table11() -> Table:
    printed = {1: "31.1/22.9 50.1/50.1 66.4 80.8 40.1 52.9",
               3: "79.8/69.7 64.4/61.7 77.7 86.7 54.0 71.2",
               6: "86.4/78.4 73.8/71.1 81.2 88.9 60.9 77.2",
               12: "89.8/83.3 80.7/77.9 83.3 91.7 66.7 81.5",
               24: "90.3/83.3 81.8/79.0 83.3 91.5 68.7 82.1",
               48: "90.0/83.1 81.8/78.9 83.4 91.9 66.9 81.8"}
    cells, previous = [], None
    for layers, scores in printed.items():
        previous = Cell(keys=(("layers", str(layers)),), size="large", num_hidden_layers=layers,
                        warm_start_from=previous, paper=_scores(scores), paper_params="18M")
        cells.append(previous)
    return Table(11, "Depth, ALBERT-large (each depth warm-started from the previous)",
                 ("layers",), tuple(cells), DOWNSTREAM_COLUMNS)


def _table12() -> Table:
    printed = {1024: ("18M", "79.8/69.7 64.4/61.7 77.7 86.7 54.0 71.2"),
               2048: ("60M", "83.3/74.1 69.1/66.6 79.7 88.6 58.2 74.6"),
               4096: ("225M", "85.0/76.4 71.0/68.1 80.3 90.4 60.4 76.3"),
               6144: ("499M", "84.7/75.8 67.8/65.4 78.1 89.1 56.0 74.0")}
    cells = tuple(Cell(keys=(("hidden", str(hidden)),), size="large", num_hidden_layers=3,
                       hidden_size=hidden, paper=_scores(scores), paper_params=params)
                  for hidden, (params, scores) in printed.items())
    return Table(12, "Hidden size, 3-layer ALBERT-large", ("hidden",), cells, DOWNSTREAM_COLUMNS)


TABLES: Dict[int, Table] = {table.number: table for table in (
    _table3(), _table4(), _table5(), _table8(), _table11(), _table12())}
