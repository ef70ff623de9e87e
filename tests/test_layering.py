"""The package's layers point one way (docs/architecture.md, "Layers").

Every `import` of an `albert` module is counted, at module level and inside
functions alike: an import hidden in a function is still a dependency.
"""

import ast
import os
import subprocess
import sys
from collections import defaultdict

from conftest import REPO

PACKAGE = os.path.join(REPO, "albert")

# Lowest first. A part may import only parts of lower layers.
LAYERS = [
    {"errors"},
    {"io", "native_logs", "interrupts", "worker_pool"},
    {"config"},
    {"cli"},
    {"modeling", "tokenization", "evaluation", "restarts", "savedmodel", "records"},
    {"pretraining_data", "finetuning_data", "datasets"},
    {"checkpoints"},
    {"training"},
    {"tasks", "squad", "memory"},
    {"run_builder"},
    {"finetuning", "finished_runs"},
    {"export", "finetuning_cli"},
    {"paper", "demo", "predict"},
    # `python -m albert.run_classifier` etc.: the original's documented commands, which run
    # the scripts at the repository's top level.
    {"convert_checkpoint", "create_pretraining_data", "run_classifier", "run_pretraining",
     "run_race", "run_squad", "run_squad_v1", "run_squad_v2"},
]
RANK = {part: rank for rank, parts in enumerate(LAYERS) for part in parts}


def _part(module: str) -> str:
    """`albert.x.y` → `x` (a subpackage, or a module directly under albert/)."""
    return module.split(".")[1]


def _imports(package=PACKAGE):
    """{(importing part, imported part): [file:line, ...]} over the whole package."""
    root = os.path.dirname(package)
    found = defaultdict(list)
    for directory, _, files in os.walk(package):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            relative = os.path.relpath(path, root)
            parts = relative[:-3].split(os.sep)
            if len(parts) == 2 and parts[1] == "__init__":
                continue   # albert/__init__.py re-exports the public names
            source = _part(".".join(parts))
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    targets = ([f"albert.{alias.name}" for alias in node.names]
                               if node.module == "albert" else [node.module])
                else:
                    continue
                for target in targets:
                    if target.startswith("albert.") and _part(target) != source:
                        found[(source, _part(target))].append(f"{relative}:{node.lineno}")
    return found


def test_every_part_of_the_package_has_a_layer():
    def is_package(name):
        directory = os.path.join(PACKAGE, name)
        return os.path.isdir(directory) and any(f.endswith(".py") for f in os.listdir(directory))

    parts = {name[:-3] if name.endswith(".py") else name for name in os.listdir(PACKAGE)
             if (name.endswith(".py") and name != "__init__.py") or is_package(name)}
    assert parts == set(RANK), (sorted(parts - set(RANK)), sorted(set(RANK) - parts))


def test_imports_only_point_down_the_layers():
    upward = {edge: where for edge, where in _imports().items() if RANK[edge[0]] <= RANK[edge[1]]}
    assert not upward, "\n".join(f"{a} imports {b}: {', '.join(where)}"
                                 for (a, b), where in sorted(upward.items()))


# The command line: the only modules under albert/ that read absl's FLAGS. Everything
# below them takes plain settings (`run_builder.RunSettings`, `finetuning.FinetuningRuntime`).
FLAG_READERS = {
    "cli.py",               # the config flags every script shares, and the absl runner
    "finetuning_cli.py",    # the fine-tuning scripts' shared flags -> FinetuningRuntime
    "restarts.py",          # --restarts: runs a script again with some flags changed
    "memory.py",            # its main(): `python -m albert.memory`
    "predict.py",           # its main(): `python -m albert.predict`
    os.path.join("datasets", "__main__.py"),
    os.path.join("export", "__main__.py"),
    os.path.join("tokenization", "__main__.py"),
}


def _flag_readers(package=PACKAGE):
    """{file relative to the package: first line} of every module that names `FLAGS`."""
    found = {}
    for directory, _, files in os.walk(package):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read())
            lines = [node.lineno for node in ast.walk(tree)
                     if (isinstance(node, ast.Name) and node.id == "FLAGS")
                     or (isinstance(node, ast.Attribute) and node.attr == "FLAGS")]
            if lines:
                found[os.path.relpath(path, package)] = min(lines)
    return found


def test_only_the_command_line_modules_read_flags():
    readers = _flag_readers()
    assert set(readers) <= FLAG_READERS, {f: line for f, line in readers.items()
                                          if f not in FLAG_READERS}


def test_the_flag_reader_check_sees_flags_read_through_absl(tmp_path):
    package = tmp_path / "albert"
    package.mkdir()
    (package / "plain.py").write_text("def f(settings):\n    return settings.seed\n")
    (package / "hidden.py").write_text("from absl import flags\n\n\n"
                                       "def f():\n    return flags.FLAGS.random_seed\n")
    assert _flag_readers(str(package)) == {"hidden.py": 5}


def test_checkpoint_formats_never_import_the_exporter():
    edges = _imports()
    assert ("checkpoints", "export") not in edges, edges.get(("checkpoints", "export"))


def test_the_walker_sees_an_import_hidden_in_a_function(tmp_path):
    """The kind of import that used to hide the checkpoints -> export cycle."""
    package = tmp_path / "albert"
    (package / "checkpoints").mkdir(parents=True)
    (package / "checkpoints" / "savedmodel.py").write_text(
        "def write():\n    from albert.export.hub import save\n    return save\n")
    (package / "export").mkdir()
    (package / "export" / "hub.py").write_text("from albert import io\n")
    edges = _imports(str(package))
    assert edges[("checkpoints", "export")] == [os.path.join("albert", "checkpoints",
                                                             "savedmodel.py") + ":2"]
    assert ("export", "io") in edges


def _unexplained_function_imports(package=PACKAGE):
    """file:line of every import inside a function with no comment saying why, in the
    package and in the scripts beside it.

    A comment on the import's own line, or on the line just above its block of
    consecutive imports, counts.
    """
    root = os.path.dirname(package)
    scripts = [os.path.join(root, name) for name in sorted(os.listdir(root)) if name.endswith(".py")]
    package_files = [os.path.join(directory, name) for directory, _, files in os.walk(package)
                     for name in sorted(files) if name.endswith(".py")]
    found = []
    for path in scripts + package_files:
        with open(path, encoding="utf-8") as handle:
            source = handle.read()
        lines = source.splitlines()
        for function in ast.walk(ast.parse(source)):
            if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(function):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                above = node.lineno - 2   # index of the line above
                while above >= 0 and lines[above].strip().startswith(("import ", "from ")):
                    above -= 1
                explained = "#" in lines[node.lineno - 1] or (
                    above >= 0 and lines[above].strip().startswith("#"))
                if not explained:
                    found.append(f"{os.path.relpath(path, root)}:{node.lineno}")
    return sorted(set(found))


def test_imports_inside_functions_say_why():
    """Only a fast start (no TensorFlow where a command does not need it) or an optional
    dependency justifies an import inside a function, and a comment says which."""
    assert not _unexplained_function_imports(), _unexplained_function_imports()


def test_an_import_inside_a_function_without_a_comment_is_found(tmp_path):
    package = tmp_path / "albert"
    package.mkdir()
    (package / "a.py").write_text(
        "def f():\n    import json\n    return json\n\n"
        "def g():\n    # optional dependency\n    import yaml\n    import toml\n    return yaml, toml\n")
    assert _unexplained_function_imports(str(package)) == [os.path.join("albert", "a.py") + ":2"]


def test_the_data_creation_script_starts_without_tensorflow():
    """create_pretraining_data.py and its worker processes need neither TensorFlow nor Keras:
    the imports kept inside functions for that reason keep doing their job."""
    probe = ("import runpy, sys\n"
             "sys.argv = ['create_pretraining_data.py', '--helpshort']\n"
             "try:\n"
             "    runpy.run_path('create_pretraining_data.py', run_name='__main__')\n"
             "except SystemExit:\n"
             "    pass\n"
             "heavy = sorted(m for m in ('tensorflow', 'keras') if m in sys.modules)\n"
             "print('HEAVY=' + ','.join(heavy))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert "HEAVY=\n" in result.stdout, (result.stdout[-2000:], result.stderr[-2000:])


# The extras' packages (setup.py): the package must import without any of them.
OPTIONAL_PACKAGES = ("gensim", "mwparserfromhell", "syntok", "matplotlib", "tf2onnx",
                     "onnxruntime", "torch", "transformers", "apache_beam")
# Modules whose whole job needs an extra.
NEEDS_AN_EXTRA = {"albert.datasets.wikitext", "albert.pretraining_data.beam_pipeline"}


def test_every_module_imports_without_the_optional_packages():
    """A module-level import of a module that needs an extra would make commands such as
    `python -m albert.paper` fail for users who installed only the core dependencies."""
    modules = []
    for directory, _, files in os.walk(PACKAGE):
        for name in sorted(files):
            if name.endswith(".py"):
                relative = os.path.relpath(os.path.join(directory, name), REPO)[:-3]
                module = relative.replace(os.sep, ".").removesuffix(".__init__")
                if module not in NEEDS_AN_EXTRA:
                    modules.append(module)
    probe = (f"import importlib, sys\n"
             f"class Uninstalled:   # as if the extras were not installed\n"
             f"    def find_spec(self, name, path=None, target=None):\n"
             f"        if name.split('.')[0] in {OPTIONAL_PACKAGES!r}:\n"
             f"            raise ModuleNotFoundError(f'No module named {{name!r}}')\n"
             f"sys.meta_path.insert(0, Uninstalled())\n"
             f"for module in {modules!r}:\n"
             f"    importlib.import_module(module)\n"
             f"print('IMPORTED', len({modules!r}))\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                            text=True, timeout=300, env=dict(os.environ, PYTHONPATH=REPO))
    assert f"IMPORTED {len(modules)}" in result.stdout, result.stderr[-3000:]
