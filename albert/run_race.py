"""`python -m albert.run_race`: the original's documented way to run run_race.py (same flags)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("run_race", run_name="__main__", alter_sys=True)
