"""The paper's tables, reproduced.

    python -m albert.paper params                       # parameter columns (Tables 1, 3, 4, 11, 12)
    python -m albert.paper reproduce --table=5 --scale=tiny --corpus=... --heldout=... \
        --output_dir=...                                # the ablation experiments
    python -m albert.paper evaluate|criteria|by-source ...   # held-out margins with
                                                        # document-level intervals
    python -m albert.paper transitions ...              # Figure 1 on any checkpoint
    python -m albert.paper speed ...                    # Table 2's speed column, here

Modules: `params` (parameter counts), `tables` (the cells and printed
numbers), `scales` (how big the runs are), `reproduce` (runs the cells
through the project's scripts), `report` (table<N>.md / .json / .png),
`criteria` (the pre-registered Table 5 criteria), `difference_criteria`
(the judge of Tables 3, 4, 8 and 11: pooled differences of cells with
document-and-seed intervals; their designs are data in `preregistrations`;
`difference_runs`, `difference_verdicts`, `training_curves` and
`difference_report` are its parts), `figure1_criteria` and `transitions`
(Figure 1), `speed` and `speed_worker` (Table 2's training speed),
`by_source` (margins per held-out source, post hoc).
"""

from albert.paper.params import (SHAPES, VOCAB_SIZE, Row, albert_config, bert_config,
                                 format_markdown, parameter_rows)

__all__ = ["SHAPES", "VOCAB_SIZE", "Row", "albert_config", "bert_config", "format_markdown",
           "parameter_rows"]
