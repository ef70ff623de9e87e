"""`python -m albert.run_classifier`: the original's documented way to run run_classifier.py (same flags)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("run_classifier", run_name="__main__", alter_sys=True)
