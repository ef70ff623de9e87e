"""reproduce's Table 11 ladder warm-started from the previous depth, Table 12's widths at the cpu
scale, and their pre-registered designs (albert.paper.__main__, albert.paper.preregistrations)."""

import pytest

from albert.errors import InputError
from albert.paper.__main__ import depth_ladder, scaled_widths
from albert.paper.preregistrations import TABLE11, TABLE12, WARM_STARTED_DESIGNS
from albert.paper.scales import SCALES
from albert.paper.tables import TABLES


def _all_shared_768():
    return next(cell for cell in TABLES[4].cells if cell.label == "E=768, strategy=all-shared")


def test_each_rung_starts_from_the_one_below_and_the_designs_name_those_runs():
    top = depth_ladder(_all_shared_768(), 36, "3,6,12,24")
    chain, cell = [], top
    while cell is not None:
        chain.append((SCALES["cpu"].config(cell.paper_config()).num_hidden_layers, cell.run_name))
        cell = cell.warm_start_from
    assert [layers for layers, _ in chain] == [12, 8, 4, 2, 1]
    assert chain[0][1] == "base-L36-H768-E768-all-shared-SOP-dropout0.1-from-L24"
    assert chain[-1][1] == "base-L3-H768-E768-all-shared-SOP-dropout0.1"   # from scratch
    warm = WARM_STARTED_DESIGNS[11]
    assert sorted(c.run_name for c in warm.cells) == sorted(name for _, name in chain)
    assert [c.label for c in warm.cells] == [c.label for c in TABLE11.cells]
    assert warm.criteria == TABLE11.criteria   # the same criteria, judged on other runs
    assert depth_ladder(_all_shared_768(), 6, None).warm_start_from is None
    for wrong in ("6,3", "3,36", "0,3"):
        with pytest.raises(InputError, match="ascending paper depths"):
            depth_ladder(_all_shared_768(), 36, wrong)


def test_table12_widths_keep_the_papers_ratios_at_the_cpu_scale():
    scale = SCALES["cpu"]
    cells = scaled_widths(list(TABLES[12].cells), "128,256,512,768", scale.width_divisor)
    configs = [scale.config(cell.paper_config()) for cell in cells]
    assert [(c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.embedding_size)
            for c in configs] == [(128, 512, 1, 21), (256, 1024, 1, 21), (512, 2048, 1, 21),
                                  (768, 3072, 1, 21)]
    assert [cell.run_name for cell in cells] == [cell.run_name for cell in TABLE12.cells]
    assert [cell.label for cell in cells] == [cell.label for cell in TABLE12.cells]
    with pytest.raises(InputError, match="one positive size per cell"):
        scaled_widths(list(TABLES[12].cells), "128,256", scale.width_divisor)
