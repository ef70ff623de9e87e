import json


from albert import paper
from albert.config import AlbertConfig
from scripts import run_script


def _rows():
    return {(row.table, row.config): row for row in paper.parameter_rows()}


def test_exact_backbone_counts_with_pooler():
    rows = _rows()
    assert rows[("Table 1", "ALBERT-base")].ours == 11_683_584
    assert rows[("Table 1", "ALBERT-large")].ours == 17_683_968
    assert rows[("Table 1", "ALBERT-xlarge")].ours == 58_724_864
    assert rows[("Table 1", "ALBERT-xxlarge")].ours == 222_595_584
    assert rows[("Table 1", "BERT-base")].ours_without_pooler == 108_490_752
    assert rows[("Table 1", "BERT-large")].ours_without_pooler == 333_557_760


def test_table_4_rows_agree_with_the_paper_within_its_rounding():
    table4 = [row for row in paper.parameter_rows() if row.table == "Table 4"]
    assert len(table4) == 8
    expected = {"ALBERT-base E=768 shared-attention": 83_078_400,
                "ALBERT-base E=768 shared-FFN": 57_117_696,
                "ALBERT-base E=128 shared-attention": 63_647_232,
                "ALBERT-base E=128 shared-FFN": 37_686_528}
    for row in table4:
        assert row.agrees != "no", row
        if row.config in expected:
            assert row.ours == expected[row.config]


def test_paper_values_that_no_accounting_reproduces_are_flagged():
    flagged = {(row.table, row.config) for row in paper.parameter_rows() if row.agrees == "no"}
    assert flagged == {("Table 1", "ALBERT-xlarge"), ("Table 1", "ALBERT-xxlarge"),
                       ("Table 12", "H=2048"), ("Table 12", "H=4096"), ("Table 12", "H=6144")}
    xxlarge = _rows()[("Table 1", "ALBERT-xxlarge")]
    assert "235M" in xxlarge.note and "222.6M" in xxlarge.note


def test_all_tables_are_present():
    tables = [row.table for row in paper.parameter_rows()]
    assert {t: tables.count(t) for t in set(tables)} == {
        "Table 1": 6, "Table 3": 8, "Table 4": 8, "Table 11": 6, "Table 12": 4}


def test_counting_builds_no_model(monkeypatch):
    from albert.modeling import AlbertEncoder

    def refuse(*args, **kwargs):
        raise AssertionError("the parameter table must not allocate models")

    monkeypatch.setattr(AlbertEncoder, "__init__", refuse)
    assert len(paper.parameter_rows()) == 32


def test_paper_base_row_is_the_released_base_shape(repo_path):
    released = AlbertConfig.from_json_file(repo_path("configs", "albert_base_v2.json"))
    ours = paper.albert_config("base")
    for key in ("vocab_size", "embedding_size", "hidden_size", "num_hidden_layers",
                "num_attention_heads", "intermediate_size", "num_hidden_groups"):
        assert getattr(ours, key) == getattr(released, key)


def test_command_line_json_and_markdown():
    result = run_script("-m", "albert.paper", "params", "--format=json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert len(rows) == 32
    assert {"table", "config", "ours", "paper"} <= set(rows[0])
    markdown = run_script("-m", "albert.paper", "params")
    assert markdown.returncode == 0
    assert "| Table 4 | ALBERT-base E=128 shared-FFN | 37,686,528 |" in markdown.stdout


def test_hf_counts_the_same_base_backbone():
    import transformers

    config = paper.albert_config("base")
    hf = transformers.AlbertModel(transformers.AlbertConfig(
        vocab_size=config.vocab_size, embedding_size=128, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072))
    assert hf.num_parameters() == _rows()[("Table 1", "ALBERT-base")].ours
