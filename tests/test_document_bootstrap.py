"""Margins with intervals that resample whole documents (albert.evaluation.document_bootstrap)
and `python -m albert.paper evaluate`, which reports them."""

import dataclasses
import json

import numpy as np
import pytest

from albert.evaluation.document_bootstrap import (difference_summary, document_counts,
                                                  document_draws, interval, margin_summary,
                                                  masked_lm_summary, masked_token_counts)


def _evaluation(rng, documents, pairs_per_document, document_dependent):
    """Balanced labels; each document's pairs right at a rate of its own (0.3 or 0.8) when
    `document_dependent`, else every pair at the set's rate (0.55)."""
    ids = np.repeat(np.arange(documents), pairs_per_document)
    labels = rng.integers(0, 2, len(ids))
    if document_dependent:
        rates = np.where(rng.random(documents) < 0.5, 0.3, 0.8)[ids]
    else:
        rates = np.full(len(ids), 0.55)
    right = rng.random(len(ids)) < rates
    return ids, labels, np.where(right, labels, 1 - labels)


def _width(evaluation):
    low, high = margin_summary([document_counts(*evaluation)], resamples=2000)["margin_ci95"]
    return high - low


def test_few_documents_give_a_wider_interval_than_many_when_correctness_follows_documents():
    rng = np.random.default_rng(0)
    few = _evaluation(rng, 10, 400, document_dependent=True)      # 4,000 pairs each
    many = _evaluation(rng, 1000, 4, document_dependent=True)
    assert _width(few) > 3 * _width(many)
    # With correctness independent of the document, clustering changes little.
    independent_few = _evaluation(rng, 10, 400, document_dependent=False)
    independent_many = _evaluation(rng, 1000, 4, document_dependent=False)
    assert 0.6 < _width(independent_few) / _width(independent_many) < 1.6


def test_the_naive_error_is_reported_beside_the_clustered_interval():
    rng = np.random.default_rng(1)
    summary = margin_summary([document_counts(*_evaluation(rng, 10, 400, True))],
                             resamples=2000)
    assert summary["documents"] == 10 and summary["pairs"] == 4000
    # The naive error treats 4,000 pairs as independent: far narrower than the documents allow.
    naive_width = 2 * 1.96 * summary["naive_standard_error"]
    low, high = summary["margin_ci95"]
    assert high - low > 3 * naive_width
    assert low <= summary["margin"] <= high


def test_paired_draws_resample_the_same_documents_for_every_evaluation():
    rng = np.random.default_rng(2)
    ids, labels, predicted = _evaluation(rng, 50, 20, True)
    counts = document_counts(ids, labels, predicted)
    first, second = document_draws([[counts], [counts]], resamples=500)
    np.testing.assert_array_equal(first, second)
    # Seeds are resampled too: two different seeds widen nothing when they agree exactly.
    pooled = document_draws([[counts, counts]], resamples=500)[0]
    assert interval(pooled) == pytest.approx(interval(first), abs=0.02)


def _masked_tokens(rng, documents, records_per_document, difficulty, shift=0.0):
    """Per record: masked tokens (1-5) and correct ones, right at the document's rate
    (`difficulty`, one per document) + `shift`."""
    ids = np.repeat(np.arange(documents), records_per_document)
    tokens = rng.integers(1, 6, len(ids))
    correct = rng.binomial(tokens, np.clip(difficulty[ids] + shift, 0, 1))
    return ids, tokens, correct


def test_masked_lm_accuracy_gets_a_document_interval_that_clustering_widens():
    rng = np.random.default_rng(4)
    spread = lambda count: np.where(rng.random(count) < 0.5, 0.1, 0.4)  # noqa: E731
    few = masked_lm_summary([masked_token_counts(*_masked_tokens(rng, 10, 400, spread(10)))],
                            resamples=2000)
    many = masked_lm_summary([masked_token_counts(*_masked_tokens(rng, 1000, 4, spread(1000)))],
                             resamples=2000)
    assert few["documents"] == 10 and many["documents"] == 1000
    width = {name: summary["accuracy_ci95"][1] - summary["accuracy_ci95"][0]
             for name, summary in (("few", few), ("many", many))}
    assert width["few"] > 3 * width["many"]
    assert width["few"] > 3 * 2 * 1.96 * few["naive_standard_error"]
    ids, tokens, correct = _masked_tokens(rng, 50, 10, spread(50))
    summary = masked_lm_summary([masked_token_counts(ids, tokens, correct)], resamples=500)
    assert summary["masked_tokens"] == tokens.sum()
    assert summary["accuracy"] == pytest.approx(correct.sum() / tokens.sum())


def test_a_difference_on_shared_documents_is_narrower_than_either_accuracy():
    # Two cells on the same documents: the documents' difficulty moves both alike, so paired
    # draws cancel it and the difference's interval is far narrower than each accuracy's.
    rng = np.random.default_rng(5)
    difficulty = rng.uniform(0.05, 0.6, 40)
    first = masked_token_counts(*_masked_tokens(rng, 40, 200, difficulty, shift=0.03))
    second = masked_token_counts(*_masked_tokens(rng, 40, 200, difficulty))
    summary = difference_summary([first], [second], resamples=2000)
    assert summary["difference"] == pytest.approx(first.accuracy() - second.accuracy())
    low, high = summary["difference_ci95"]
    assert low < summary["difference"] < high and low > 0
    widths = [np.subtract(*reversed(masked_lm_summary([counts], resamples=2000)["accuracy_ci95"]))
              for counts in (first, second)]
    assert high - low < min(widths) / 3
    # Unpaired draws (the two on independent document draws) would be about as wide as both.
    independent = np.subtract(*[document_draws([[counts]], resamples=2000, seed=seed)[0]
                                for counts, seed in ((first, 1), (second, 2))])
    independent_low, independent_high = interval(independent)
    assert independent_high - independent_low > 3 * (high - low)


def test_evaluate_reports_clustered_intervals_per_seed_and_pooled(tmp_path, synthetic_corpus,
                                                                  capsys):
    from albert.checkpoints import model_weights, write_checkpoint
    from albert.modeling import AlbertPretrainer
    from albert.paper.__main__ import main
    from albert.pretraining_data.creation import DataConfig, create_pretraining_data
    from albert.pretraining_data.instances import InstanceConfig
    from albert.pretraining_data.masking import MaskingConfig
    from conftest import tiny_config

    from corpora import first_documents

    corpus = first_documents(synthetic_corpus[0], 100, tmp_path / "corpus-head.txt")
    spm = synthetic_corpus[1]
    records = str(tmp_path / "heldout-sop.tfrecord")
    create_pretraining_data(corpus, records, DataConfig(
        instance=InstanceConfig(max_seq_length=32, masking=MaskingConfig(
            max_predictions_per_seq=5)), spm_model_file=spm, dupe_factor=1),
        show_progress=False)
    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    checkpoints = []
    for seed in (1, 2):
        directory = tmp_path / f"seed{seed}"
        write_checkpoint(model_weights(AlbertPretrainer(config)), config, str(directory), "tf1")
        checkpoints.append(str(directory / "model.ckpt-best"))
    output = tmp_path / "heldout.json"
    status = main(["evaluate", f"--albert_config_file={tmp_path / 'seed1' / 'albert_config.json'}",
                   f"--checkpoints={','.join(checkpoints)}", f"--records={records}",
                   f"--output={output}", "--seeds_of_one_cell", "--resamples=300"])
    assert status == 0
    results = json.loads(output.read_text())
    per_seed = [row for row in results if "checkpoint" in row]
    pooled = [row["pooled"] for row in results if "pooled" in row]
    assert len(per_seed) == 2 and len(pooled) == 1
    for row in per_seed + pooled:
        assert 50 < row["documents"] <= 100 and row["pairs"] > row["documents"]
        low, high = row["margin_ci95"]
        assert low <= row["margin"] <= high and row["naive_standard_error"] > 0
    assert pooled[0]["seeds"] == 2
    assert pooled[0]["margin"] == pytest.approx(np.mean([row["margin"] for row in per_seed]))
    for row in per_seed:  # the masked LM's interval, counted per record of the same pass
        low, high = row["masked_lm_accuracy_ci95"]
        assert low <= row["masked_lm_accuracy"] <= high and row["masked_tokens"] > row["pairs"]
    pooled_masked = [row["pooled_masked_lm"] for row in results if "pooled" in row][0]
    assert pooled_masked["accuracy"] == pytest.approx(
        np.mean([row["masked_lm_accuracy"] for row in per_seed]), abs=1e-6)
    # Data made before the documents file: still evaluated, pair by pair, with a warning.
    (tmp_path / "heldout-sop.tfrecord.documents.npz").unlink()
    status = main(["evaluate", f"--albert_config_file={tmp_path / 'seed1' / 'albert_config.json'}",
                   f"--checkpoints={checkpoints[0]}", f"--records={records}",
                   f"--output={tmp_path / 'old.json'}", "--resamples=300"])
    assert status == 0
    assert "cannot be clustered" in capsys.readouterr().err
    old = json.loads((tmp_path / "old.json").read_text())[0]
    assert old["documents"] == old["pairs"]


def test_draws_of_the_same_seeds_pair_the_seeds_too():
    rng = np.random.default_rng(3)
    seeds = [document_counts(*_evaluation(rng, 40, 10, True)) for _ in range(2)]
    shifted = [dataclasses.replace(counts, correct=np.minimum(counts.correct + 1, counts.pairs))
               for counts in seeds]
    later, earlier = document_draws([shifted, seeds], resamples=400, same_seeds=True)
    independent_later, independent_earlier = document_draws([shifted, seeds], resamples=400)
    # One more right answer per document in every seed: paired growth is positive in every
    # draw; drawing the two evaluations' seeds independently loses that.
    assert np.all(later - earlier > 0)
    assert np.std(independent_later - independent_earlier) > np.std(later - earlier)


def _judged(counts_of):
    """criteria.judge on stand-in evaluations: counts_of(objective, step, kind) -> seeds."""
    from albert.paper.criteria import judge

    class StandIn:
        seeds = 2

        def counts(self, objective, step, kind, across_sets=False, seeds=None):
            found = counts_of(objective, step, kind)
            return [found[seed - 1] for seed in seeds] if seeds else found

    return judge(StandIn(), final_step=12000, early_step=6000, resamples=1000)["criteria"]


def _counts_at(rate, documents=300, pairs=12, seed=0):
    """A seed's counts on balanced pairs, right at `rate` (documents all alike)."""
    rng = np.random.default_rng(seed)
    ids = np.repeat(np.arange(documents), pairs)
    labels = np.tile([0, 1], len(ids) // 2)
    right = rng.random(len(ids)) < rate
    return document_counts(ids, labels, np.where(right, labels, 1 - labels))


def test_the_criteria_pass_on_the_papers_pattern_and_fail_without_it():
    paper = {("None", "NSP"): 0.5, ("None", "SOP"): 0.5, ("NSP", "NSP"): 0.75,
             ("NSP", "SOP"): 0.5, ("SOP", "NSP"): 0.62, ("SOP", "SOP"): 0.8}

    def pattern(rates, early_sop_on_nsp):
        def counts_of(objective, step, kind):
            rate = rates[objective, kind]
            if (objective, kind, step) == ("SOP", "NSP", 6000):
                rate = early_sop_on_nsp
            return [_counts_at(rate, seed=seed + 10 * len(objective + kind)) for seed in (1, 2)]
        return counts_of

    judged = _judged(pattern(paper, early_sop_on_nsp=0.55))
    assert {key: entry["passes"] for key, entry in judged.items()} == dict.fromkeys("abcdef", True)
    # No transfer (SOP model at chance on NSP), no growth: (b), (c) and (f) fail, the rest hold.
    flat = {**paper, ("SOP", "NSP"): 0.5}
    judged = _judged(pattern(flat, early_sop_on_nsp=0.5))
    assert [key for key, entry in judged.items() if not entry["passes"]] == ["b", "c", "f"]
    # A "None" model that learned a sentence skill fails (d).
    judged = _judged(pattern({**paper, ("None", "SOP"): 0.7}, early_sop_on_nsp=0.55))
    assert not judged["d"]["passes"] and judged["a"]["passes"]


# Slow tier (about 26 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_criteria_command_judges_a_reproductions_runs_and_caches_their_counts(
        tmp_path, synthetic_corpus, capsys):
    import shutil

    from albert.checkpoints import model_weights, write_checkpoint
    from albert.modeling import AlbertPretrainer
    from albert.paper.__main__ import main
    from albert.paper.criteria import cell_run_names
    from albert.pretraining_data.creation import DataConfig, create_pretraining_data
    from albert.pretraining_data.instances import InstanceConfig
    from albert.pretraining_data.masking import MaskingConfig
    from conftest import tiny_config

    from corpora import first_documents

    # 100 documents: every cell is evaluated 4 times, and the criteria need no more to run.
    corpus = first_documents(synthetic_corpus[0], 100, tmp_path / "corpus-head.txt")
    spm = synthetic_corpus[1]
    (tmp_path / "data").mkdir()
    for kind in ("nsp", "sop"):
        create_pretraining_data(corpus, str(tmp_path / "data" / f"heldout-{kind}.tfrecord"),
                                DataConfig(instance=InstanceConfig(
                                    max_seq_length=32, random_next_sentence=kind == "nsp",
                                    masking=MaskingConfig(max_predictions_per_seq=5)),
                                    spm_model_file=spm, dupe_factor=1), show_progress=False)
    config = tiny_config(vocab_size=1200, max_position_embeddings=64)
    write_checkpoint(model_weights(AlbertPretrainer(config)), config, str(tmp_path / "model"),
                     "tf1")
    for run_name in cell_run_names().values():
        pretraining = tmp_path / "runs" / run_name / "pretraining"
        pretraining.mkdir(parents=True)
        shutil.copy(tmp_path / "model" / "albert_config.json", pretraining)
        for step in (6000, 12000):
            for part in (tmp_path / "model").glob("model.ckpt-best.*"):
                shutil.copy(part, pretraining / part.name.replace("best", str(step)))
    arguments = ["criteria", f"--output_dir={tmp_path}", "--seeds=1", "--resamples=300"]
    assert main([*arguments, f"--output={tmp_path / 'criteria.json'}"]) == 0
    result = json.loads((tmp_path / "criteria.json").read_text())
    assert sorted(result["criteria"]) == list("abcdef")
    assert all(isinstance(entry["passes"], bool) for entry in result["criteria"].values())
    margins = result["margins"]["SOP model, NSP set"]
    assert 50 < margins["documents"] <= 100 and margins["pairs"] > margins["documents"]
    # A set's own intervals are those `evaluate` reports for it (its own documents resampled).
    assert main(["evaluate", f"--albert_config_file={tmp_path / 'model' / 'albert_config.json'}",
                 f"--checkpoints={tmp_path / 'model' / 'model.ckpt-best'}",
                 f"--records={tmp_path / 'data' / 'heldout-nsp.tfrecord'}",
                 f"--output={tmp_path / 'evaluate.json'}", "--resamples=300"]) == 0
    evaluated = json.loads((tmp_path / "evaluate.json").read_text())[0]
    assert margins["margin_ci95"] == pytest.approx(evaluated["margin_ci95"])
    assert margins["documents"] == evaluated["documents"]
    # The same untrained weights everywhere: no growth from step 6000 to 12000, exactly.
    assert result["criteria"]["f"]["growth"] == 0
    printed = capsys.readouterr().out
    assert "| (f) |" in printed and "| SOP model, NSP set | " in printed
    caches = sorted(p.name for p in (tmp_path / "runs").glob("*/documents-*.json"))
    assert caches == ["documents-12000.json"] * 3 + ["documents-6000.json"]
    # Judged again from the cached counts, with the same numbers; nothing is overwritten.
    assert main([*arguments, f"--output={tmp_path / 'again.json'}",
                 f"--plot={tmp_path / 'margins.png'}"]) == 0
    assert json.loads((tmp_path / "again.json").read_text()) == result
    assert (tmp_path / "margins.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main([*arguments, f"--output={tmp_path / 'again.json'}"]) == 1
    assert "is not overwritten" in capsys.readouterr().err
    # A finished run whose final checkpoint and cache are gone: its result.json's per-document
    # counts (each set on its own documents, as the runner records them) stand for that step.
    run = tmp_path / "runs" / cell_run_names()["NSP"]
    cached = json.loads((run / "documents-12000.json").read_text())
    (run / "documents-12000.json").unlink()
    for part in (run / "pretraining").glob("model.ckpt-12000.*"):
        part.unlink()
    own = {}
    for kind, counts in cached.items():
        kept = [index for index, pairs in enumerate(counts["pairs"]) if pairs]
        own[f"{kind} acc"] = {field: [values[index] for index in kept]
                              for field, values in counts.items()}
    finished = {"intrinsic": {"documents": own},
                "commands": ["python run_pretraining.py --num_train_steps=12000 --do_train"]}
    (run / "result.json").write_text(json.dumps(finished))
    assert main([*arguments, f"--output={tmp_path / 'recorded.json'}"]) == 0
    assert json.loads((tmp_path / "recorded.json").read_text()) == result
    assert not (run / "documents-12000.json").exists()
    # ... but only for the step it records.
    finished["commands"] = ["python run_pretraining.py --num_train_steps=9000 --do_train"]
    (run / "result.json").write_text(json.dumps(finished))
    assert main([*arguments, f"--output={tmp_path / 'other.json'}"]) == 1
    assert "seed 1 has not reached step 12000" in capsys.readouterr().err
    assert main([*arguments, "--seeds=2", f"--output={tmp_path / 'two.json'}"]) == 1
    assert "seed 2 has not reached step 12000" in capsys.readouterr().err
    assert main([*arguments, "--early_step_seeds=2", f"--output={tmp_path / 'two.json'}"]) == 1
    assert "only seeds 1 to 1 were run" in capsys.readouterr().err


def test_the_criteria_say_when_runs_were_evaluated_on_different_held_out_sets(capsys):
    from albert.paper.criteria import format_markdown, judge

    def judged(changed_text):
        def counts_of(objective, step, kind):
            seeds = [_counts_at(0.6, seed=seed) for seed in (1, 2)]
            if changed_text and (objective, kind) == ("SOP", "NSP"):
                # The second seed's records were made again from changed text: one document
                # lost two pairs.
                pairs = seeds[1].pairs.copy()
                pairs[7] -= 2
                seeds[1] = dataclasses.replace(seeds[1], pairs=pairs,
                                               correct=np.minimum(seeds[1].correct, pairs),
                                               label_one=np.minimum(seeds[1].label_one, pairs))
            return seeds

        class StandIn:
            seeds = 2

            def counts(self, objective, step, kind, across_sets=False, seeds=None):
                return counts_of(objective, step, kind)

        return judge(StandIn(), final_step=12000, early_step=6000, resamples=200)

    result = judged(changed_text=True)
    assert result["held_out_sets_differ"] == {"NSP": {"documents": 1,
                                                      "pairs_range": [3598, 3600]}}
    assert result["margins"]["SOP model, NSP set"]["seed_pairs"] == [3600, 3598]
    assert "NSP held-out set's pairs per document are not the same" in capsys.readouterr().err
    assert "| 3,598 / 3,600 |" in format_markdown(result)
    assert "held_out_sets_differ" not in judged(changed_text=False)
    assert "not the same" not in capsys.readouterr().err


def test_growth_can_rest_on_the_seeds_whose_early_checkpoint_is_left():
    from albert.errors import InputError
    from albert.paper.criteria import judge

    rates = {("SOP", "NSP", 12000): 0.62, ("SOP", "NSP", 6000): 0.55}

    class FirstSeedsEarlyCheckpointGone:
        seeds = 2

        def counts(self, objective, step, kind, across_sets=False, seeds=None):
            seeds = seeds or [1, 2]
            if step == 6000 and 1 in seeds:
                raise InputError("model.ckpt-6000 does not exist")
            return [_counts_at(rates.get((objective, kind, step), 0.5), seed=seed + step)
                    for seed in seeds]

    with pytest.raises(InputError, match="does not exist"):
        judge(FirstSeedsEarlyCheckpointGone(), final_step=12000, early_step=6000, resamples=200)
    growth = judge(FirstSeedsEarlyCheckpointGone(), final_step=12000, early_step=6000,
                   resamples=200, early_seeds=[2])["criteria"]["f"]
    assert growth["seeds"] == [2] and growth["passes"]
    late, early = (_counts_at(rates["SOP", "NSP", step], seed=2 + step).margin()
                   for step in (12000, 6000))
    assert growth["growth"] == pytest.approx(late - early)
