"""The demo's GLUE-format tasks: built once into a folder, and a second run into the same folder
(the demo run twice) keeps them or, from an older build, replaces them whole."""

import json

from albert.datasets.glue_demo import build_glue_demo
from scripts import run_script


def _files(root):
    return {str(path.relative_to(root)): path.read_bytes()
            for path in sorted(root.rglob("*")) if path.is_file()}


def test_a_second_run_into_the_same_folder_keeps_the_same_build(tmp_path):
    output = tmp_path / "glue"
    first = build_glue_demo(str(output))
    built = _files(output)
    assert {"SST-2/train.tsv", "SST-2/dev.tsv", "STS-B/train.tsv", "manifest.json"} <= set(built)
    assert build_glue_demo(str(output)) == first
    assert _files(output) == built
    # The command line, as the demo runs it, twice: exit 0 and the same bytes.
    for _ in range(2):
        result = run_script("-m", "albert.datasets", "glue-demo", f"--output_dir={output}")
        assert result.returncode == 0, result.stderr
    assert _files(output) == built
    assert [path.name for path in tmp_path.iterdir()] == ["glue"]  # no scratch left beside it


def test_the_reviews_csv_holds_sst2s_sentences_and_splits(tmp_path):
    from albert.finetuning_data.labelled_files import read_rows

    build_glue_demo(str(tmp_path))
    for split in ("train", "dev"):
        tsv = [line.split("\t") for line in
               (tmp_path / "SST-2" / f"{split}.tsv").read_text().splitlines()[1:]]
        _, rows = read_rows(str(tmp_path / "reviews" / f"{split}.csv"), None,
                            ("review", "sentiment"), "--train_file")
        assert [(row.fields["review"], row.fields["sentiment"]) for row in rows] == [
            (sentence, {"0": "negative", "1": "positive"}[label]) for sentence, label in tsv]


def test_an_older_build_is_replaced_whole(tmp_path):
    output = tmp_path / "glue"
    build_glue_demo(str(output))
    built = _files(output)
    manifest = json.loads((output / "manifest.json").read_text())
    (output / "manifest.json").write_text(json.dumps(dict(manifest, builder_version=-1)))
    (output / "SST-2" / "stale.tsv").write_text("from the older build")
    build_glue_demo(str(output))
    assert _files(output) == built
    assert sorted(path.name for path in tmp_path.iterdir()) == ["glue"]
