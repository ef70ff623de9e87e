"""`python -m albert.convert_checkpoint`: the original's documented way to run convert_checkpoint.py (same flags)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("convert_checkpoint", run_name="__main__", alter_sys=True)
