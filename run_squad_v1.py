"""The original's run_squad_v1.py: run_squad.py for SQuAD v1.1 (same flags)."""
import runpy, sys

if __name__ == "__main__":
    sys.argv.append("--noversion_2_with_negative")
    runpy.run_module("run_squad", run_name="__main__", alter_sys=True)
