"""`python -m albert.run_pretraining`: the original's documented way to run run_pretraining.py (same flags)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("run_pretraining", run_name="__main__", alter_sys=True)
