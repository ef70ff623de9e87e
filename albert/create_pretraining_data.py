"""`python -m albert.create_pretraining_data`: the original's documented way to run create_pretraining_data.py (same flags)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("create_pretraining_data", run_name="__main__", alter_sys=True)
