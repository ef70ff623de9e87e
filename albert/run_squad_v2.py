"""`python -m albert.run_squad_v2`: the original's documented way to run run_squad_v2.py."""

import runpy

if __name__ == "__main__":
    runpy.run_module("run_squad_v2", run_name="__main__", alter_sys=True)
