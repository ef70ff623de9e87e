"""The pre-registered designs of the ablation tables judged on differences of cells' held-out
masked-LM accuracies (docs/paper.md): Table 3 (embedding size), Table 4 (cross-layer sharing),
Table 8 (dropout), Table 11 (depth; also as the paper trained it, each depth warm-started from
the one before) and Table 12 (width), as data.

A design names its cells (their run directories and seeds), its criteria (each a verdict rule
over signed differences of cells, signed so that the paper's claim is positive), the
differences reported beside them and the words its judgement is written in;
albert.paper.difference_criteria judges any of them. A new table is a new entry here.
"""

import dataclasses
from typing import Dict, Optional, Tuple

# Verdict rules (albert.paper.difference_verdicts and, for the evaluations during training,
# albert.paper.training_curves judge each one and put it in words).
LOWER_BOUND_ABOVE_ZERO = "one difference, one-sided lower bound above 0"
TWO_SIDED_ORDER = "one difference, passes when its interval is above 0 (the paper's order)"
EACH_LOWER_BOUND_ABOVE_ZERO = "several differences, each one-sided lower bound above 0"
EACH_JUDGED_APART = "several differences, each judged as its own lower bound above 0"
SEEDS_AGREE = "every seed's own difference has its pooled difference's sign"
SAME_PARAMETERS = "every finished run's counted parameters are one number"
ABOVE_ZERO_THROUGH_TRAINING = "mean over seeds above 0 at every evaluation from a step on"
ABOVE_ZERO_IN_EVERY_SEED = "one difference, above 0 in every seed"


@dataclasses.dataclass(frozen=True)
class Difference:
    """A signed sum of cells' pooled accuracies, summed in the order of `terms`:
    ((cell label, +1 or -1), ...)."""

    name: str
    terms: Tuple[Tuple[str, int], ...]

    @property
    def cells(self) -> Tuple[str, ...]:
        return tuple(cell for cell, _ in self.terms)


def pair(name: str, first: str, second: str) -> Difference:
    """first − second."""
    return Difference(name, ((first, 1), (second, -1)))


def pair_of_pairs(name: str, first: Tuple[str, str], second: Tuple[str, str]) -> Difference:
    """(first[0] − first[1]) − (second[0] − second[1])."""
    return Difference(name, ((first[0], 1), (first[1], -1), (second[0], -1), (second[1], 1)))


@dataclasses.dataclass(frozen=True)
class SeedGroup:
    """Cells trained with one number of seeds: `--seeds` (at least `at_least`), or `fixed`.
    `name` is its key in the judgement's "seeds" (None: a design's only group, whose count
    stands alone). A group of one seed may stand for every seed in a seed's own difference."""

    name: Optional[str] = None
    fixed: Optional[int] = None
    at_least: int = 1
    one_run_for_every_seed: bool = False

    def count(self, seeds: int) -> int:
        return self.fixed or max(seeds, self.at_least)


@dataclasses.dataclass(frozen=True)
class Cell:
    """A cell: seed 1 in runs/<run_name>, seed k in runs/<run_name>-seed<k> (as `reproduce`
    writes them), trained with its seed group's seeds."""

    label: str
    run_name: str
    seed_group: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Peak:
    """Which of `cells` ((name, cell label), ...) has the highest pooled accuracy: a criterion's
    outcome ("peak at <name>"), `described` in words."""

    cells: Tuple[Tuple[str, str], ...]
    described: str


@dataclasses.dataclass(frozen=True)
class Criterion:
    """A pre-registered criterion: `rule` over its `differences` and those of the criteria named
    in `over`. The seed-agreement rule keys each difference by `agreement_key` (fields
    `criterion`, `difference`) and lists them as `agreement_shown` (field `key`), or counts them
    when that is None."""

    key: str
    text: str
    rule: str
    differences: Tuple[Difference, ...] = ()
    over: Tuple[str, ...] = ()
    peak: Optional[Peak] = None
    agreement_key: str = "{criterion}"
    agreement_shown: Optional[str] = "{key}"


@dataclasses.dataclass(frozen=True)
class SizeCurves:
    """A panel of accuracy against a size (log 2 axis) beside the differences: each series
    (name, colour, x shift, its cell at each of `sizes`); `trained` is the albert_config field
    the runs trained with, reported per cell and shown where it is not the paper's size."""

    axis: str
    sizes: Tuple[int, ...]
    series: Tuple[Tuple[str, str, float, Tuple[str, ...]], ...]
    trained: str


@dataclasses.dataclass(frozen=True)
class TrainingCurves:
    """The runs' own held-out evaluations (pretraining/eval_results.json), every `interval`
    steps, `treatment` − `baseline` judged from `first_step` on; names as the table and plot
    show them."""

    first_step: int
    interval: int
    baseline: Tuple[str, str, str]    # (cell label, name, colour)
    treatment: Tuple[str, str, str]
    columns: Tuple[str, str, str]     # baseline, treatment, their difference
    difference_axis: str


REFUSED_FLAGS = ("early_step", "early_step_seeds", "figure_dir")


@dataclasses.dataclass(frozen=True)
class Design:
    """A table's pre-registration. `seeds_phrase` and `plot_title` are str.format templates of
    `seeds` and `seeds_text` (the judgement's counts, and as "k seeds"), `seeds_at` ("k at
    <group>, ...") and `final_step`; a refused flag's error is `refusal` (fields `flag`,
    `owner`)."""

    table: int
    runs_name: str          # "no finished <runs_name> run"
    owner: str              # whose criteria, in a refusal
    heading: str
    signed: str
    seeds_phrase: str
    plot_title: str
    seed_groups: Tuple[SeedGroup, ...]
    cells: Tuple[Cell, ...]
    criteria: Tuple[Criterion, ...]
    descriptive: Tuple[Difference, ...] = ()
    seeds: int = 3
    final_step: int = 6000
    size_curves: Optional[SizeCurves] = None
    training_curves: Optional[TrainingCurves] = None
    refused_flags: Tuple[str, ...] = REFUSED_FLAGS
    refusal: str = ("--{flag} is not {owner}'s: its criteria are judged at --final_step from "
                    "the runs' result.json files")


SIGNED = "signed so that the paper's claim is positive"


def _run(embedding: int, strategy: str, layers: int = 12, dropout: str = "0.1") -> str:
    """The run directory `reproduce` writes for an ALBERT-base cell at paper size."""
    return f"base-L{layers}-H768-E{embedding}-{strategy}-SOP-dropout{dropout}"


# ------------------------------------------------------------------ Table 4: cross-layer sharing

ALL, ATTENTION, FFN, NONE = "all-shared", "shared-attention", "shared-FFN", "not-shared"


def table4_label(embedding: int, strategy: str) -> str:
    """A Table 4 cell's label, e.g. 'E=768, strategy=all-shared'."""
    return f"E={embedding}, strategy={strategy}"


_t4 = table4_label   # short, for the entries below


def _t4_pair(embedding: int, first: str, second: str) -> Difference:
    return pair(f"E={embedding}: {first} − {second}", _t4(embedding, first),
                _t4(embedding, second))


def _t4_across(strategy: str) -> Difference:
    return pair(f"{strategy}: E=768 − E=128", _t4(768, strategy), _t4(128, strategy))


TABLE4 = Design(
    table=4, runs_name="Table 4", owner="Table 4",
    heading="criteria of the multi-seed Table 4", signed=SIGNED,
    seeds_phrase="{seeds_text[E=768]} per E=768 cell, {seeds[E=128]} per E=128 cell",
    plot_title="Table 4, step {final_step:,}, {seeds}",
    # The E=128 cells' one seed stands for every seed; E=128 shared-attention is not run.
    seed_groups=(SeedGroup("E=768"), SeedGroup("E=128", fixed=1, one_run_for_every_seed=True)),
    cells=tuple(Cell(_t4(embedding, strategy), _run(embedding, strategy), f"E={embedding}")
                for embedding, strategies in ((768, (ALL, ATTENTION, FFN, NONE)),
                                              (128, (ALL, FFN, NONE)))
                for strategy in strategies),
    criteria=(
        Criterion("a", "sharing everything costs MLM accuracy at E=768", LOWER_BOUND_ABOVE_ZERO,
                  (_t4_pair(768, NONE, ALL),)),
        Criterion("b", "it costs more at E=768 than at E=128", LOWER_BOUND_ABOVE_ZERO,
                  (pair_of_pairs(f"{NONE} − {ALL}: E=768 − E=128",
                                 (_t4(768, NONE), _t4(768, ALL)),
                                 (_t4(128, NONE), _t4(128, ALL))),)),
        Criterion("c", "the paper's sub-block order at E=768: sharing the FFN costs more than "
                  "sharing attention", TWO_SIDED_ORDER, (_t4_pair(768, ATTENTION, FFN),)),
        Criterion("d", "every seed agrees in sign with its pooled difference", SEEDS_AGREE,
                  over=("a", "b", "c"), agreement_shown="({key})"),
    ),
    # Not judged: the other differences of two strategies at one E, each strategy's E=768 − E=128.
    descriptive=(_t4_pair(768, ATTENTION, ALL), _t4_pair(768, FFN, ALL),
                 _t4_pair(768, NONE, ATTENTION), _t4_pair(768, NONE, FFN),
                 _t4_pair(128, NONE, ALL), _t4_pair(128, FFN, ALL), _t4_pair(128, NONE, FFN),
                 _t4_across(ALL), _t4_across(FFN), _t4_across(NONE)),
    refused_flags=("early_step", "early_step_seeds"),
    refusal=("--early_step and --early_step_seeds are Table 5's: Table 4's criteria are judged "
             "at --final_step alone"))

# ------------------------------------------------------------------ Table 3: embedding size E

EMBEDDINGS = (64, 128, 256, 768)   # the paper's E (at the cpu scale E ÷ 6)


def _t3(strategy: str, embedding: int) -> str:
    return f"sharing={strategy}, E={embedding}"


def _t3_across(strategy: str, first: int, second: int) -> Difference:
    return pair(f"{strategy}: E={first} − E={second}", _t3(strategy, first),
                _t3(strategy, second))


TABLE3 = Design(
    table=3, runs_name="Table 3", owner="Table 3",
    heading="criteria of Table 3 (embedding size E)",
    signed=SIGNED + "; a seed's own difference compares only cells that have that seed",
    seeds_phrase="{seeds_text[E=64]} per E=64, 128 and 256 cell, {seeds[E=768]} per E=768 cell",
    plot_title="Table 3, step {final_step:,}, seeds per cell: {seeds_at}",
    # The E=768 cells are Table 4's runs, with its 3 seeds (or --seeds, if more).
    seed_groups=(SeedGroup("E=64"), SeedGroup("E=128"), SeedGroup("E=256"),
                 SeedGroup("E=768", at_least=3)),
    seeds=2,
    cells=tuple(Cell(_t3(strategy, embedding), _run(embedding, strategy), f"E={embedding}")
                for strategy in (NONE, ALL) for embedding in EMBEDDINGS),
    criteria=(
        Criterion("a", "not-shared gains with E", EACH_LOWER_BOUND_ABOVE_ZERO,
                  tuple(_t3_across(NONE, larger, smaller)
                        for smaller, larger in zip(EMBEDDINGS, EMBEDDINGS[1:]))),
        Criterion("b", "all-shared peaks at E=128", EACH_LOWER_BOUND_ABOVE_ZERO,
                  tuple(_t3_across(ALL, 128, other) for other in (64, 256, 768)),
                  peak=Peak(tuple((f"E={embedding}", _t3(ALL, embedding))
                                  for embedding in EMBEDDINGS), "highest all-shared accuracy")),
        Criterion("c", "E matters less when all-shared (the paper's \"nearly flat\")",
                  EACH_LOWER_BOUND_ABOVE_ZERO,
                  (pair_of_pairs(f"E=768 − E=64: {NONE} − {ALL}", (_t3(NONE, 768), _t3(NONE, 64)),
                                 (_t3(ALL, 768), _t3(ALL, 64))),)),
        Criterion("d", "every seed agrees: each seed's own difference has the pooled "
                  "difference's sign", SEEDS_AGREE, over=("a", "b", "c"),
                  agreement_key="({criterion}) {difference}", agreement_shown=None),
    ),
    # Not judged: all-shared's remaining neighbours, the two halves of (c), the cost of sharing
    # at each E.
    descriptive=(_t3_across(ALL, 768, 256), _t3_across(NONE, 768, 64), _t3_across(ALL, 768, 64),
                 *(pair(f"E={embedding}: {NONE} − {ALL}", _t3(NONE, embedding),
                        _t3(ALL, embedding)) for embedding in EMBEDDINGS)),
    size_curves=SizeCurves(
        "embedding size E (the paper's)", EMBEDDINGS,
        tuple((strategy, colour, shift, tuple(_t3(strategy, embedding) for embedding in EMBEDDINGS))
              for strategy, colour, shift in ((NONE, "tab:blue", 0.97), (ALL, "tab:orange", 1.03))),
        trained="embedding_size"))

# ------------------------------------------------------------- Table 8 (and Figure 2b): dropout

DROPOUT_MODEL = _t4(768, ALL)   # Table 4's cell, with its dropout (0.1) and without
WITH_DROPOUT, WITHOUT_DROPOUT = f"{DROPOUT_MODEL}, dropout=0.1", f"{DROPOUT_MODEL}, dropout=0"
FINAL = pair("without dropout − with dropout (0.1)", WITHOUT_DROPOUT, WITH_DROPOUT)

TABLE8 = Design(
    table=8, runs_name="dropout", owner="the dropout runs",
    heading=f"dropout criteria (Table 8, Figure 2b) on {DROPOUT_MODEL}",
    signed="without dropout − with dropout (0.1)",
    seeds_phrase="{seeds_text} per cell",
    plot_title=f"Dropout (Table 8, Figure 2b): {DROPOUT_MODEL}, {{seeds}}",
    seed_groups=(SeedGroup(),),
    cells=(Cell(WITH_DROPOUT, _run(768, ALL)),
           Cell(WITHOUT_DROPOUT, _run(768, ALL, dropout="0"))),
    criteria=(
        Criterion("a", "removing dropout raises held-out MLM accuracy at the end",
                  LOWER_BOUND_ABOVE_ZERO, (FINAL,)),
        Criterion("b", "and through training", ABOVE_ZERO_THROUGH_TRAINING),
        Criterion("c", "every seed agrees: (a)'s difference is above 0 in each seed",
                  ABOVE_ZERO_IN_EVERY_SEED, over=("a",)),
    ),
    training_curves=TrainingCurves(
        first_step=2000, interval=1000,   # the runs' --save_checkpoints_steps
        baseline=(WITH_DROPOUT, "with dropout (0.1)", "tab:blue"),
        treatment=(WITHOUT_DROPOUT, "without dropout", "tab:red"),
        columns=("with dropout", "without dropout", "without − with (mean over seeds, points)"),
        difference_axis="without − with dropout (points of held-out MLM accuracy)"))

# ------------------------------------------------------------------ Table 11: depth

DEPTHS = {1: 3, 2: 6, 4: 12, 8: 24, 12: 36}   # layers at the cpu scale: `reproduce --layers`


def _t11(depth: int) -> str:
    return f"layers={depth}"


def _gain(deeper: int, shallower: int) -> Difference:
    return pair(f"A{deeper} − A{shallower}", _t11(deeper), _t11(shallower))


def _gains(first: Tuple[int, int], second: Tuple[int, int]) -> Difference:
    (a, b), (c, d) = first, second
    return pair_of_pairs(f"(A{a} − A{b}) − (A{c} − A{d})", (_t11(a), _t11(b)), (_t11(c), _t11(d)))


TABLE11 = Design(
    table=11, runs_name="Table 11", owner="Table 11",
    heading="criteria of Table 11 (depth)", signed=SIGNED,
    seeds_phrase="{seeds_text} per depth",
    plot_title="Table 11, step {final_step:,}, {seeds}",
    seed_groups=(SeedGroup(),),
    # Table 4's E=768 all-shared model at each depth (4 layers: Table 4's own runs).
    cells=tuple(Cell(_t11(depth), _run(768, ALL, layers=layers))
                for depth, layers in DEPTHS.items()),
    criteria=(
        Criterion("a", "deeper is better up to 8 layers", EACH_JUDGED_APART,
                  (_gain(2, 1), _gain(4, 2), _gain(8, 4))),
        Criterion("b", "the gains shrink (the first doubling gains more than the last)",
                  EACH_JUDGED_APART, (_gains((2, 1), (8, 4)),)),
        Criterion("c", "depth levels off (8 to 12 layers gains less than 4 to 8)",
                  EACH_JUDGED_APART, (_gains((8, 4), (12, 8)),)),
        Criterion("d", "the parameter count does not grow", SAME_PARAMETERS),
        Criterion("e", "every seed agrees", SEEDS_AGREE, over=("a", "b", "c"),
                  agreement_key="{difference}"),
    ),
    descriptive=(_gain(12, 8), _gain(12, 1)))

# ------------------------------------------- Table 11 as the paper trained it: warm-started depths
# Pre-registered 2026-12-06, before any of its runs: the ladder above, each depth from 2 layers
# on initialised from the final (step-6,000) checkpoint of the depth before (the first from
# scratch) and trained 6,000 more steps with the same schedule; 3 seeds a depth, float32.
WARM_FROM = {3: None, 6: 3, 12: 6, 24: 12, 36: 24}   # paper depth -> the depth it starts from


def _warm_run(layers: int) -> str:
    previous = WARM_FROM[layers]
    return _run(768, ALL, layers=layers) + ("" if previous is None else f"-from-L{previous}")


TABLE11_WARM = dataclasses.replace(
    TABLE11, heading="criteria of Table 11 (depth), each depth warm-started from the previous",
    runs_name="warm-started Table 11",
    plot_title="Table 11 warm-started, step {final_step:,} of each depth, {seeds}",
    cells=tuple(Cell(_t11(depth), _warm_run(layers)) for depth, layers in DEPTHS.items()))

# ------------------------------------------------------------------ Table 12: width
# Pre-registered 2026-12-06, before any of its runs: a 1-layer (3 ÷ 3) all-shared ALBERT-large
# (E = 128 ÷ 6 = 21, 4 heads) at H = 128, 256, 512, 768 (the paper's 1024, 2048, 4096, 6144 in
# the same 1:2:4:6 ratios, from the cpu scale's H=128; 1024 ÷ 6 is no multiple of 4 heads),
# feed-forward 4H, 6,000 steps, 2 seeds a width, float32.
WIDTHS = {1024: 128, 2048: 256, 4096: 512, 6144: 768}   # the paper's H -> H at the cpu scale


def _t12(paper_width: int) -> str:
    return f"hidden={paper_width}"


def _wider(wide: int, narrow: int) -> Difference:
    return pair(f"A{wide} − A{narrow}", _t12(wide), _t12(narrow))


TABLE12 = Design(
    table=12, runs_name="Table 12", owner="Table 12",
    heading="criteria of Table 12 (width)", signed=SIGNED,
    seeds_phrase="{seeds_text} per width",
    plot_title="Table 12, step {final_step:,}, {seeds}",
    seed_groups=(SeedGroup(),), seeds=2,
    # Run names carry the paper-size width that the cpu scale divides by 6 (128 × 6 = 768, ...).
    cells=tuple(Cell(_t12(paper), f"large-L3-H{6 * width}-E128-{ALL}-SOP-dropout0.1")
                for paper, width in WIDTHS.items()),
    criteria=(
        Criterion("a", "wider is better up to H=4096 (the paper: 71.2, 74.6, 76.3)",
                  EACH_JUDGED_APART, (_wider(2048, 1024), _wider(4096, 2048))),
        Criterion("b", "the widest is worse than H=4096 (the paper: 74.0 against 76.3)",
                  EACH_JUDGED_APART,
                  (pair("A4096 − A6144", _t12(4096), _t12(6144)),)),
        Criterion("c", "every seed agrees", SEEDS_AGREE, over=("a", "b"),
                  agreement_key="{difference}"),
    ),
    descriptive=(_wider(6144, 1024), _wider(4096, 1024)))

DESIGNS: Dict[int, Design] = {design.table: design
                              for design in (TABLE3, TABLE4, TABLE8, TABLE11, TABLE12)}
# `criteria --warm_started`: the same table trained as the paper trained it.
WARM_STARTED_DESIGNS: Dict[int, Design] = {11: TABLE11_WARM}
