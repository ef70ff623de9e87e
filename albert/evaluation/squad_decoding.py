"""From the SQuAD heads' outputs to answer texts: n-best lists, predictions, null odds.

The rules are the original's (docs/squad.md):

- v1.1: per window, the `n_best_size` best starts × `n_best_size` best ends by
  logit (ties: the earlier position). A pair is kept when both ends fall in
  the window, the start is a position whose piece has its maximum context in
  this window (which also rules out `[CLS]` and the question), `end ≥ start`
  and the span has at most `max_answer_length` pieces. Score: start logit +
  end logit.
- v2.0: the `start_n_top × end_n_top` beam of each window, filtered the same
  way (and the start must not lie before the window); score: start log-prob
  + end log-prob. Each question's null score is the smallest `cls_logits` of
  its windows.
- The candidates of all windows of a question are sorted by score (stable);
  the text of each is the raw context between its first piece's first
  character and its last piece's last character, stripped; repeated texts are
  skipped until `n_best_size` remain. No candidate: v1.1 a single `"empty"`
  entry (scores 0), v2.0 `""` (scores −1e6). Probabilities: softmax of the
  n-best scores.
- v2.0 prediction: the best text, or `""` when a threshold is given and the
  null score is not below it.

Filtering and scoring are array operations over all windows at once; only
the final walk down each question's sorted candidates (usually a few dozen)
is a Python loop.
"""

import collections
import dataclasses
import json
import logging
import math
import time
from typing import Dict, List, Optional, Sequence

import numpy as np

from albert import io

logger = logging.getLogger("albert")

PREDICTIONS_FILE = "predictions.json"
NBEST_FILE = "nbest_predictions.json"
NULL_ODDS_FILE = "null_odds.json"
_NULL_SCORE_START = 1000000.0


@dataclasses.dataclass
class WindowTable:
    """The decoding side of every prediction window, as arrays (built once)."""

    example_index: np.ndarray  # [F]
    doc_offset: np.ndarray  # [F]
    window_length: np.ndarray  # [F]
    max_context: np.ndarray  # [F, S] bool
    tok_start_to_orig_index: List[List[int]]
    tok_end_to_orig_index: List[List[int]]

    @classmethod
    def from_features(cls, features, max_seq_length: int) -> "WindowTable":
        max_context = np.zeros((len(features), max_seq_length), bool)
        for row, feature in enumerate(features):
            max_context[row, feature.max_context_positions] = True
        return cls(np.array([f.example_index for f in features], np.int64),
                   np.array([f.doc_offset for f in features], np.int64),
                   np.array([len(f.tok_start_to_orig_index) for f in features], np.int64),
                   max_context,
                   [f.tok_start_to_orig_index for f in features],
                   [f.tok_end_to_orig_index for f in features])


@dataclasses.dataclass
class Candidates:
    """Valid spans of all windows, in window, start-rank, end-rank order."""

    window: np.ndarray
    start: np.ndarray  # position in the window
    end: np.ndarray
    start_score: np.ndarray  # float64
    end_score: np.ndarray


def _filter(table: WindowTable, starts, ends, start_scores, end_scores, max_answer_length: int,
            start_before_window_allowed: bool) -> Candidates:
    """`starts`/`ends` `[F, I, J]` absolute positions; keeps the original's valid spans."""
    offset = table.doc_offset[:, None, None]
    length = table.window_length[:, None, None]
    rows = np.broadcast_to(np.arange(len(offset))[:, None, None], starts.shape)
    valid = ((starts - offset < length) & (ends - offset < length)
             & table.max_context[rows, np.minimum(starts, table.max_context.shape[1] - 1)]
             & (ends >= starts) & (ends - starts + 1 <= max_answer_length))
    if not start_before_window_allowed:
        valid &= starts - offset >= 0
    window, i, j = np.nonzero(valid)
    return Candidates(window, starts[window, i, j] - table.doc_offset[window],
                      ends[window, i, j] - table.doc_offset[window],
                      start_scores[window, i, j].astype(np.float64),
                      end_scores[window, i, j].astype(np.float64))


def _top_indices(scores: np.ndarray, n: int) -> np.ndarray:
    """Indices of the `n` largest per row, largest first, earlier index first among ties."""
    return np.argsort(-scores, axis=1, kind="stable")[:, :n]


def v1_candidates(table: WindowTable, start_logits: np.ndarray, end_logits: np.ndarray,
                  n_best_size: int, max_answer_length: int) -> Candidates:
    start_index = _top_indices(start_logits, n_best_size)
    end_index = _top_indices(end_logits, n_best_size)
    starts = np.broadcast_to(start_index[:, :, None], (*start_index.shape, end_index.shape[1]))
    ends = np.broadcast_to(end_index[:, None, :], starts.shape)
    start_scores = np.take_along_axis(start_logits, start_index, 1)[:, :, None]
    end_scores = np.take_along_axis(end_logits, end_index, 1)[:, None, :]
    return _filter(table, starts, ends, np.broadcast_to(start_scores, starts.shape),
                   np.broadcast_to(end_scores, starts.shape), max_answer_length, True)


def v2_candidates(table: WindowTable, outputs: Dict[str, np.ndarray],
                  max_answer_length: int) -> Candidates:
    start_index, start_scores = outputs["start_top_index"], outputs["start_top_log_probs"]
    k_start = start_index.shape[1]
    end_index = outputs["end_top_index"].reshape(len(start_index), k_start, -1)
    end_scores = outputs["end_top_log_probs"].reshape(end_index.shape)
    starts = np.broadcast_to(start_index[:, :, None], end_index.shape)
    return _filter(table, starts, end_index, np.broadcast_to(start_scores[:, :, None],
                                                             end_index.shape),
                   end_scores, max_answer_length, False)


def _softmax(scores: Sequence[float]) -> List[float]:
    """The original's softmax, in Python floats."""
    if not scores:
        return []
    largest = max(scores)
    exps = [math.exp(score - largest) for score in scores]
    total = 0.0
    for value in exps:  # added one by one as the original: sum() compensates from Python 3.12
        total += value
    return [value / total for value in exps]


@dataclasses.dataclass
class Decoded:
    """Per question (reading order): its n-best list, best text and (v2) null score."""

    nbest: "collections.OrderedDict[str, list]"
    best_text: "collections.OrderedDict[str, str]"
    null_scores: Optional["collections.OrderedDict[str, float]"] = None

    def predictions(self, threshold: Optional[float] = None) -> Dict[str, str]:
        """qid → text; with a threshold (v2), `""` where the null score is not below it."""
        if threshold is None or self.null_scores is None:
            return collections.OrderedDict(self.best_text)
        return collections.OrderedDict(
            (qid, text if self.null_scores[qid] < threshold else "")
            for qid, text in self.best_text.items())


def decode(examples, table: WindowTable, candidates: Candidates, n_best_size: int,
           version_2: bool, cls_logits: Optional[np.ndarray] = None) -> Decoded:
    """n-best lists of every question from the valid spans of its windows."""
    began = time.perf_counter()
    example_of = table.example_index[candidates.window]
    total = candidates.start_score + candidates.end_score
    order = np.lexsort((-total, example_of))  # stable: ties keep window/rank order
    bounds = np.searchsorted(example_of[order], np.arange(len(examples) + 1))
    null_scores = None
    if version_2:
        null_scores = collections.OrderedDict()
        smallest = np.full(len(examples), _NULL_SCORE_START)
        np.minimum.at(smallest, table.example_index, cls_logits.astype(np.float64))
    nbest_json, best_text = collections.OrderedDict(), collections.OrderedDict()
    window, start, end = candidates.window, candidates.start, candidates.end
    for index, example in enumerate(examples):
        seen, entries = set(), []
        context = example.paragraph_text
        for position in order[bounds[index]:bounds[index + 1]]:
            if len(entries) >= n_best_size:
                break
            w = window[position]
            text = context[table.tok_start_to_orig_index[w][start[position]]:
                           table.tok_end_to_orig_index[w][end[position]] + 1].strip()
            if text in seen:
                continue
            seen.add(text)
            entries.append((text, float(candidates.start_score[position]),
                            float(candidates.end_score[position])))
        if not entries:
            entries = [("", -1e6, -1e6)] if version_2 else [("empty", 0.0, 0.0)]
        probabilities = _softmax([s + e for _, s, e in entries])
        nbest_json[example.qas_id] = [
            collections.OrderedDict(text=text, probability=probability, start_log_prob=s,
                                    end_log_prob=e)
            for (text, s, e), probability in zip(entries, probabilities)]
        best_text[example.qas_id] = entries[0][0]
        if version_2:
            null_scores[example.qas_id] = float(smallest[index])
    logger.info("Decoded %d questions from %d candidate spans in %.3f s", len(examples),
                len(total), time.perf_counter() - began)
    return Decoded(nbest_json, best_text, null_scores)


def write_prediction_files(output_dir: str, decoded: Decoded,
                           predictions: Dict[str, str]) -> List[str]:
    """predictions.json, nbest_predictions.json and (v2) null_odds.json, as the original."""
    files = [(PREDICTIONS_FILE, predictions), (NBEST_FILE, decoded.nbest)]
    if decoded.null_scores is not None:
        files.append((NULL_ODDS_FILE, decoded.null_scores))
    written = []
    for name, value in files:
        path = io.join(output_dir, name)
        io.write_text_atomically(path, json.dumps(value, indent=4) + "\n")
        written.append(path)
    return written
