"""In-graph SentencePiece tokenization with tensorflow-text, id-for-id equal to the Python tokenizer.

`InGraphSentencePieceTokenizer` runs `preprocess_text`, SentencePiece and the
digit-comma rule as TensorFlow ops, so exported models can tokenize raw
strings without Python. Python's own behaviour is the reference; the
character classes below are computed from Python's `unicodedata` so that the
regular expressions select exactly the characters `str.split`,
`unicodedata.combining` and `str.isdigit` select.
"""

import functools
import sys
import unicodedata

import tensorflow as tf
import tensorflow_text

from albert.tokenization.sentencepiece_tokenizer import SPIECE_UNDERLINE, SentencePieceTokenizer


def _character_class(predicate) -> str:
    """An RE2 character class of every code point satisfying `predicate`."""
    ranges, start, previous = [], None, None
    for code_point in range(sys.maxunicode + 1):
        if 0xD800 <= code_point <= 0xDFFF:
            continue
        if predicate(chr(code_point)):
            if start is None:
                start = code_point
            elif code_point != previous + 1:
                ranges.append((start, previous))
                start = code_point
            previous = code_point
    if start is not None:
        ranges.append((start, previous))
    parts = [f"\\x{{{low:X}}}" if low == high else f"\\x{{{low:X}}}-\\x{{{high:X}}}"
             for low, high in ranges]
    return "[" + "".join(parts) + "]"


# Word_Break MidLetter / MidNumLet / Single_Quote characters, which Unicode
# counts as case-ignorable besides the categories Mn, Me, Cf, Lm and Sk.
_MID_LETTER = "'.:\u00b7\u0387\u05f4\u2018\u2019\u2024\u2027\ufe13\ufe52\ufe55\uff07\uff0e\uff1a"


@functools.lru_cache(maxsize=None)
def _patterns():
    whitespace = _character_class(str.isspace)
    combining = _character_class(unicodedata.combining)
    digit = _character_class(str.isdigit)
    cased = _character_class(lambda c: c.lower() != c or c.upper() != c or c.istitle())
    not_cased = "[^" + cased[1:]
    case_ignorable = _character_class(
        lambda c: unicodedata.category(c) in ("Mn", "Me", "Cf", "Lm", "Sk") or c in _MID_LETTER)
    return whitespace, combining, digit, cased, not_cased, case_ignorable


def whitespace_class() -> str:
    """An RE2 character class of the characters `str.split()` splits on."""
    return _patterns()[0]


class InGraphSentencePieceTokenizer(tf.Module):
    """`SentencePieceTokenizer.encode` as TensorFlow ops.

    Args:
      tokenizer: the Python `SentencePieceTokenizer` to mirror (model,
        `do_lower_case`, digit-comma rule).

    Example:
        in_graph = InGraphSentencePieceTokenizer(SentencePieceTokenizer("m.model"))
        ids = in_graph.tokenize(tf.constant(["Hello world", "Second line"]))  # ragged int32
    """

    def __init__(self, tokenizer: SentencePieceTokenizer, name=None):
        super().__init__(name=name)
        self.do_lower_case = tokenizer.do_lower_case
        self.digit_comma_rule = tokenizer.digit_comma_rule
        self._sentencepiece = tensorflow_text.SentencepieceTokenizer(
            model=tokenizer.model_proto, out_type=tf.int32)
        (self._whitespace, self._combining, self._digit, cased, not_cased,
         case_ignorable) = _patterns()
        # Python lower-cases a capital sigma to the final form when a cased
        # letter precedes it and none follows (case-ignorable characters
        # skipped); per-character lowering would always give the medial form.
        self._final_sigma = (f"({cased}{case_ignorable}*)\u03a3({case_ignorable}*)"
                             f"({not_cased}|$)")
        # The rule only fires on pieces ending in a digit and a comma; most
        # vocabularies have none, and then the graph can skip it.
        self._has_digit_comma_pieces = tokenizer.has_digit_comma_pieces
        self._comma_id = tokenizer.sp_model.PieceToId(",")

    def preprocess(self, text):
        """`preprocess_text(text, lower=do_lower_case)` on a string tensor."""
        text = tf.strings.regex_replace(text, self._whitespace + "+", " ")
        text = tf.strings.regex_replace(text, "^ | $", "")
        text = tensorflow_text.normalize_utf8(text, "NFKD")
        text = tf.strings.regex_replace(text, self._combining, "")
        if self.do_lower_case:
            text = tf.strings.regex_replace(text, self._final_sigma, "\\1\u03c2\\2\\3")
            text = tf.strings.lower(text, encoding="utf-8")
        return text

    def tokenize(self, text):
        """Token ids (ragged int32 `[batch, (tokens)]`) of a 1-D string tensor."""
        ids = self._sentencepiece.tokenize(self.preprocess(text))
        if self._has_digit_comma_pieces:
            ids = self._apply_digit_comma_rule(ids)
        return ids

    def tokenize_with_offsets(self, text):
        """(ids, starts, ends): `tokenize(text)` and each piece's byte span in `text`.

        Offsets point into the caller's strings, not into the preprocessed
        text: each input character is preprocessed on its own (whitespace runs
        become one space, or nothing at either end; NFKD; combining marks
        removed; lower-casing), which gives the same text as `preprocess` and
        tells which input character every preprocessed byte comes from. A
        piece spans the input characters its bytes come from; a lone "▁"
        piece that SentencePiece gives no bytes has an empty span (a ligature
        such as "ﬁ" split into two pieces gives both the ligature's span).
        Pieces the digit-comma rule splits off keep their source piece's
        span, the comma its last byte.
        """
        characters = tf.strings.unicode_split(text, "UTF-8")
        _, character_starts = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
        flat = characters.flat_values
        normalized = tf.strings.regex_replace(
            tensorflow_text.normalize_utf8(flat, "NFKD"), self._combining, "")
        if self.do_lower_case:
            normalized = tf.strings.lower(normalized, encoding="utf-8")
        space = characters.with_flat_values(
            tf.strings.regex_full_match(flat, self._whitespace)).to_tensor(default_value=True)
        not_space = tf.cast(tf.logical_not(space), tf.int32)
        after_text = tf.cast(tf.math.cumsum(not_space, axis=1), tf.bool)
        before_text = tf.cast(tf.math.cumsum(not_space, axis=1, reverse=True), tf.bool)
        previous_space = tf.concat([tf.ones_like(space[:, :1]), space[:, :-1]], axis=1)
        # A whitespace run becomes one space, or nothing at the start or the end.
        kept_space = space & tf.logical_not(previous_space) & after_text & before_text
        output = tf.where(space, tf.where(kept_space, " ", ""),
                          characters.with_flat_values(normalized).to_tensor(default_value=""))
        output_ends = tf.math.cumsum(tf.strings.length(output), axis=1)

        ids, starts, ends = self._sentencepiece.tokenize_with_offsets(self.preprocess(text))
        if self._has_digit_comma_pieces:
            expanded = self._expand_digit_comma(ids)
            counts = expanded.values.row_lengths()
            flagged = counts > 1
            new_rows = tf.repeat(tf.range(tf.shape(counts, out_type=tf.int64)[0]), counts)
            last = tf.gather(tf.math.cumsum(counts) - 1, new_rows) == tf.range(
                tf.shape(new_rows, out_type=tf.int64)[0])
            comma = last & tf.gather(flagged, new_rows)
            flat_ends = tf.gather(ends.flat_values, new_rows)
            flat_starts = tf.where(comma, flat_ends - 1, tf.gather(starts.flat_values, new_rows))
            lengths = expanded.row_lengths()   # pieces per row before expansion
            row_counts = tf.math.segment_sum(counts, tf.repeat(
                tf.range(tf.shape(lengths, out_type=tf.int64)[0]), lengths))
            ids = expanded.merge_dims(1, 2)
            starts = tf.RaggedTensor.from_row_lengths(flat_starts, row_counts)
            ends = tf.RaggedTensor.from_row_lengths(flat_ends, row_counts)

        def original(positions, inclusive_end):
            dense = tf.cast(positions.to_tensor(), tf.int32) - (1 if inclusive_end else 0)
            index = tf.minimum(tf.searchsorted(output_ends, dense, side="right"),
                               tf.shape(output_ends)[1] - 1)
            starts_of = character_starts.to_tensor()
            value = tf.gather(starts_of, index, batch_dims=1)
            if inclusive_end:
                sizes = characters.with_flat_values(tf.strings.length(flat)).to_tensor()
                value = value + tf.cast(tf.gather(sizes, index, batch_dims=1), value.dtype)
            return tf.RaggedTensor.from_tensor(value, lengths=positions.row_lengths())

        original_starts, original_ends = original(starts, False), original(ends, True)
        # A zero-width piece (a lone "▁" before a word) stays zero-width.
        empty = tf.equal(starts.flat_values, ends.flat_values)
        original_ends = original_ends.with_flat_values(
            tf.where(empty, original_starts.flat_values, original_ends.flat_values))
        return ids, original_starts, original_ends

    def _apply_digit_comma_rule(self, ids):
        return self._expand_digit_comma(ids).merge_dims(1, 2)

    def _expand_digit_comma(self, ids):
        """`[batch, (pieces), (replacements)]`: each piece, or what the rule splits it into."""
        flat_ids = ids.flat_values
        pieces = self._sentencepiece.id_to_string(flat_ids)
        flagged = tf.strings.regex_full_match(pieces, f"(?s).*{self._digit},")
        # Re-encode every flagged piece without its comma and without `▁`.
        without_comma = tf.strings.regex_replace(pieces, ",$", "")
        stripped = tf.strings.regex_replace(without_comma, SPIECE_UNDERLINE, "")
        reencoded = self._sentencepiece.tokenize(tf.where(flagged, stripped, ""))
        first = reencoded[:, :1]
        rest = reencoded[:, 1:]
        if self.digit_comma_rule == "intended":
            # Drop the leading `▁` of the first new piece when the original
            # piece did not start with one (remove the piece if it was just `▁`).
            first_pieces = self._sentencepiece.id_to_string(first.flat_values)
            original_starts = tf.strings.regex_full_match(pieces, f"(?s){SPIECE_UNDERLINE}.*")
            first_rows = first.value_rowids()
            drop_marker = tf.logical_and(
                tf.logical_not(tf.gather(original_starts, first_rows)),
                tf.strings.regex_full_match(first_pieces, f"(?s){SPIECE_UNDERLINE}.*"))
            shortened = tf.strings.regex_replace(first_pieces, f"^{SPIECE_UNDERLINE}", "")
            new_first_ids = tf.where(drop_marker,
                                     self._sentencepiece.string_to_id(shortened),
                                     first.flat_values)
            keep = tf.logical_not(tf.logical_and(drop_marker, tf.equal(shortened, "")))
            first = tf.RaggedTensor.from_value_rowids(
                tf.boolean_mask(new_first_ids, keep), tf.boolean_mask(first_rows, keep),
                nrows=first.nrows())
        comma = tf.ones_like(flat_ids) * self._comma_id
        flagged_expansion = tf.concat(
            [first, rest, tf.RaggedTensor.from_tensor(comma[:, None])], axis=1)
        unchanged = tf.RaggedTensor.from_tensor(flat_ids[:, None])
        # Row i of the result is row i of `unchanged`, or of `flagged_expansion`
        # (stacked after it) when piece i is flagged.
        count = tf.shape(flat_ids, out_type=tf.int64)[0]
        rows = tf.range(count) + tf.where(flagged, count, tf.zeros_like(count))
        expansion = tf.gather(tf.concat([unchanged, flagged_expansion], axis=0), rows)
        return ids.with_flat_values(expansion)
