"""`python -m albert.run_squad`: run_squad.py (same flags)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("run_squad", run_name="__main__", alter_sys=True)
