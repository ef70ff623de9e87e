"""The original's run_squad_v2.py: run_squad.py for SQuAD v2.0 (same flags)."""
import runpy, sys

if __name__ == "__main__":
    sys.argv.append("--version_2_with_negative")
    runpy.run_module("run_squad", run_name="__main__", alter_sys=True)
