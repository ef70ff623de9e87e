"""The training loop's progress display: a bar on a terminal, log lines otherwise.

A tqdm bar redraws itself with carriage returns. On a terminal that is one
line; in a file (a job's log, `2> run.log`) every redraw is kept and the bars
end up interleaved with the log lines. When stderr is not a terminal the same
calls therefore log one line now and then instead.
"""

import logging
import sys
import time

from tqdm import tqdm

logger = logging.getLogger("albert")


class LoggedProgress:
    """tqdm's `update` / `set_postfix` / `close`, as a log line at most every `interval` seconds.

    Args:
      total: steps of the run.
      initial: the step it starts from (a resumed run).
      interval: seconds between two lines (the last step is always logged).
    """

    def __init__(self, total: int, initial: int = 0, interval: float = 60.0):
        self.total = total
        self.step = initial
        self.interval = interval
        self.postfix = {}
        self._last = time.monotonic()

    def update(self, count: int) -> None:
        self.step += count
        if time.monotonic() - self._last >= self.interval or self.step >= self.total:
            self._log()

    def set_postfix(self, refresh: bool = True, **values) -> None:
        del refresh
        self.postfix = values

    def _log(self) -> None:
        self._last = time.monotonic()
        values = "".join(f", {key} {value}" for key, value in self.postfix.items())
        logger.info("training: step %d/%d (%d%%)%s", self.step, self.total,
                    100 * self.step // max(self.total, 1), values)

    def close(self) -> None:
        pass


def training_progress(total: int, initial: int):
    """A tqdm bar when stderr is a terminal, else `LoggedProgress`."""
    if not sys.stderr.isatty():
        return LoggedProgress(total, initial)

    return tqdm(total=total, initial=initial, unit="step", desc="training", mininterval=1.0,
                dynamic_ncols=True)
