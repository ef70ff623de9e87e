"""The repository stands on its own: docs that match the code, a light install."""

import importlib.metadata
import os
import re
import subprocess

import pytest

from albert.checkpoints import format_names, formats
from conftest import REPO
from scripts import run_script


def _tracked_files():
    listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout.strip():
        return [os.path.join(REPO, name) for name in listed.stdout.split()]
    return [os.path.join(root, name) for root, _, names in os.walk(REPO)
            if ".git" not in root for name in names]


def test_no_file_cites_a_document_users_do_not_have():
    citing = []
    for path in _tracked_files():
        if path.endswith((".py", ".md", ".json", ".txt", ".ini", ".cfg")) and os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                if re.search(r"SPEC\s*§", handle.read()):
                    citing.append(os.path.relpath(path, REPO))
    assert citing == []


# Every committed result file must repeat from any checkout.
RELATIVE_RESULT_DIRECTORIES = ("docs/paper/",)


def test_the_committed_result_files_hold_no_paths_of_the_machine_that_ran_them():
    absolute = []
    for path in _tracked_files():
        relative = os.path.relpath(path, REPO)
        if relative.startswith(RELATIVE_RESULT_DIRECTORIES) and relative.endswith(
                (".json", ".sh", ".md", ".txt", ".jsonl")):
            with open(path, encoding="utf-8", errors="replace") as handle:
                if re.search(r"(?<![\w.])/(work|tmp|root|home)/", handle.read()):
                    absolute.append(relative)
    assert absolute == []


def test_docs_exist_and_name_the_seams():
    architecture = open(os.path.join(REPO, "docs", "architecture.md"), encoding="utf-8").read()
    for seam in ("CheckpointFormat", "HeadTable", "TaskInput", "distribute_datasets_from_function",
                 "registry._MODULES"):
        assert seam in architecture, seam
    fidelity = open(os.path.join(REPO, "docs", "fidelity.md"), encoding="utf-8").read()
    for topic in ("partial last batch", "n-gram candidate list a second time", "num_hidden_groups",
                  "--masked_lm_budget", "--digit_comma_rule"):
        assert topic in fidelity, topic


def test_the_checkpoint_docs_list_exactly_the_registered_checkpoint_formats():
    page = open(os.path.join(REPO, "docs", "checkpoints.md"), encoding="utf-8").read()
    table = re.search(r"\| format \| reads \| writes \|\n\|[-| ]+\|\n((?:\|.*\n)+)", page).group(1)
    listed = [re.match(r"\| `([a-z_0-9]+)` \|", row).group(1) for row in table.splitlines()]
    assert sorted(listed) == sorted(format_names()) == sorted(formats())
    for name, fmt in formats().items():
        assert fmt.name == name and fmt.output_files and fmt.description


def test_the_demo_packages_are_an_extra_not_a_dependency():
    requirements = importlib.metadata.requires("albert-tf2")
    demo = [r for r in requirements if re.match(r"(gensim|mwparserfromhell|syntok)\b", r)]
    assert len(demo) >= 6   # each listed for the demo and the test extras
    assert all('extra == "demo"' in r or 'extra == "test"' in r for r in demo), demo
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    assert 'pip install -e ".[demo]" && python -m albert.demo' in readme


def test_the_original_requirements_file_is_what_the_package_requires_and_is_installed():
    """`pip install -r albert/requirements.txt`, the original's first documented step, installs
    the package's own requirements; the environment running the suite satisfies them."""
    from packaging.requirements import Requirement

    with open(os.path.join(REPO, "albert", "requirements.txt"), encoding="utf-8") as handle:
        listed = [Requirement(line) for line in handle.read().splitlines()
                  if line.strip() and not line.strip().startswith("#")]
    declared = [Requirement(r) for r in importlib.metadata.requires("albert-tf2")
                if "extra ==" not in r]
    assert sorted(map(str, listed)) == sorted(map(str, declared))
    for requirement in listed:
        version = importlib.metadata.version(requirement.name)
        assert requirement.specifier.contains(version, prereleases=True), (requirement, version)


def test_the_demo_output_is_ignored_by_git():
    ignored = open(os.path.join(REPO, ".gitignore"), encoding="utf-8").read().split()
    assert "albert_demo/" in ignored


# Slow tier (30-40 s on 2 cores: a process per script), to keep the default suite within
# 15 minutes.
@pytest.mark.slow
def test_the_original_documented_module_commands_run_the_scripts(tmp_path):
    """`python -m albert.run_race` etc., as the original's README runs them, from any directory."""
    import sys

    for script, flag in (("run_pretraining", "--max_predictions_per_seq"),
                         ("run_classifier", "--task_name"), ("run_race", "--max_qa_length"),
                         ("run_squad", "--doc_stride"), ("run_squad_v1", "--n_best_size"),
                         ("run_squad_v2", "--start_n_top"),
                         ("create_pretraining_data", "--dupe_factor"),
                         ("convert_checkpoint", "--output_format")):
        assert os.path.isfile(os.path.join(REPO, f"{script}.py"))
        if script == "run_race":
            # One in a process of its own, without PYTHONPATH: the installed package finds
            # the top-level script from any directory.
            shown = subprocess.run([sys.executable, "-m", f"albert.{script}", "--helpshort"],
                                   cwd=tmp_path, capture_output=True, text=True, timeout=300)
        else:
            shown = run_script("-m", f"albert.{script}", "--helpshort", cwd=tmp_path)
        assert flag in shown.stdout and "Traceback" not in shown.stderr, (script, shown.stderr)
        assert shown.returncode == 0, script   # absl's help exits 1; ours 0


# Slow tier (about 29 s on 2 cores), to keep the default suite within 15 minutes.
@pytest.mark.slow
def test_the_scripts_start_without_tensorflows_native_info_lines():
    """`import albert` quiets TensorFlow's C++ start-up lines (CUDA probing, oneDNN, CPU
    features) before TensorFlow loads; a script that imported TensorFlow or Keras ahead of
    `albert` would print them."""
    import sys

    native_info = re.compile(r"^\S+ \S+: I |^I0000 ", re.MULTILINE)   # TF's C++ INFO lines
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    for script in ("run_pretraining.py", "run_classifier.py"):
        shown = subprocess.run([sys.executable, script, "--helpshort"], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=300)
        assert not native_info.search(shown.stderr), (script, shown.stderr[:2000])


def _heading_anchor(heading: str) -> str:
    # GitHub's rule: lower case, punctuation other than hyphens dropped, spaces to hyphens.
    anchor = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return anchor.replace(" ", "-")


def test_every_relative_link_in_the_readme_and_docs_resolves():
    pages = [os.path.join(REPO, "README.md")] + [
        os.path.join(REPO, "docs", name) for name in sorted(os.listdir(os.path.join(REPO, "docs")))
        if name.endswith(".md")]
    broken = []
    for page in pages:
        text = open(page, encoding="utf-8").read()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(resolved):
                broken.append(f"{os.path.relpath(page, REPO)}: {target}")
            elif anchor and resolved.endswith(".md"):
                headings = re.findall(r"^#+\s+(.*)$", open(resolved, encoding="utf-8").read(),
                                      re.MULTILINE)
                if anchor not in {_heading_anchor(h) for h in headings}:
                    broken.append(f"{os.path.relpath(page, REPO)}: {target} (no such heading)")
    assert broken == []


def test_the_readmes_results_are_the_scorecards_verdicts():
    """The README's results block is made from docs/paper.md's scorecard (python -m albert.paper
    readme): a verdict changed on one page and not the other fails here."""
    from albert.paper import readme_table

    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    paper_md = open(os.path.join(REPO, "docs", "paper.md"), encoding="utf-8").read()
    assert readme_table.updated_readme(readme, paper_md) == readme, (
        "README.md's results are stale: run python -m albert.paper readme")
    date, rows = readme_table.scorecard(paper_md)
    assert f"as of **{date}**" in readme and len(rows) == 16
    stale = readme_table.updated_readme(readme, paper_md.replace("**reproduced**", "**gone**", 1))
    assert stale != readme
