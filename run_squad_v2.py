"""The original's run_squad_v2.py: run_squad.py for SQuAD v2.0 (same flags)."""

from absl import flags

import run_squad
from albert import cli

# --help lists run_squad.py's flags, as they are this script's.
flags.adopt_module_key_flags(run_squad)

if __name__ == "__main__":
    run_squad.fix_version(True, "run_squad_v2.py")
    cli.run(run_squad.main)
