"""`python -m albert.run_squad_v1`: the original's documented way to run run_squad_v1.py."""

import runpy

if __name__ == "__main__":
    runpy.run_module("run_squad_v1", run_name="__main__", alter_sys=True)
