"""Python's `random.Random(text)` in TensorFlow ops, one generator per batch row.

Dynamic masking (`--masked_lm_budget`) defines its masks with
`random.Random(f"albert-dynamic-masking/{seed}/{position}")`. To draw the
same masks inside a `tf.data` graph (no Python on the input hosts, which
remote TPU hosts do not run), this module reproduces, bit for bit:

* the seeding of a `str`: the integer `int.from_bytes(text + sha512(text))`
  cut into 32-bit words, least significant first, fed to the Mersenne
  Twister's `init_by_array`;
* MT19937's twist and tempering (`genrand_uint32`);
* `getrandbits(k)` for k ≤ 32, `random()` (53 bits from two words) and
  `_randbelow(n)` (k = n.bit_length() bits, drawn again while ≥ n), which
  `shuffle` and `randint` use.

Every row of a batch is its own generator; a draw takes a boolean `active`
per row and advances only those rows, so rows that need different numbers of
draws stay in step. Values are uint64 tensors holding 32-bit words.
"""

import dataclasses
import functools
from typing import List

import numpy as np
import tensorflow as tf

N, M = 624, 397
_MATRIX_A, _UPPER, _LOWER = 0x9908B0DF, 0x80000000, 0x7FFFFFFF
_WORD = 0xFFFFFFFF
SHA512_BLOCK_BYTES = 128
MAX_SEED_TEXT_BYTES = SHA512_BLOCK_BYTES - 17  # one block: 0x80 and a 16-byte length follow


def _u64(value) -> tf.Tensor:
    # Through NumPy: inside a tf.function, tf.constant turns a Python list's
    # values >= 2**63 into 0 for uint64 (TensorFlow 2.20).
    return tf.constant(np.array(value, dtype=np.uint64))


def _shr(x, bits):
    return tf.bitwise.right_shift(x, _u64(bits))


def _shl(x, bits):
    return tf.bitwise.left_shift(x, _u64(bits))


# ------------------------------------------------------------------ SHA-512
def _integer_root(value: int, degree: int) -> int:
    """floor(value ** (1/degree)) for big integers (Newton's method)."""
    root = 1 << -(-value.bit_length() // degree)
    while True:
        better = ((degree - 1) * root + value // root ** (degree - 1)) // degree
        if better >= root:
            return root
        root = better


@functools.lru_cache(maxsize=None)
def _sha512_constants():
    """FIPS 180-4: fractional bits of the square / cube roots of the first primes."""
    primes, candidate = [], 2
    while len(primes) < 80:
        if all(candidate % p for p in primes):
            primes.append(candidate)
        candidate += 1
    initial = [_integer_root(p << 128, 2) & (2**64 - 1) for p in primes[:8]]
    rounds = [_integer_root(p << 192, 3) & (2**64 - 1) for p in primes]
    return initial, rounds


def _rotr(x, bits):
    return tf.bitwise.bitwise_or(_shr(x, bits), _shl(x, 64 - bits))


def _xor(*values):
    result = values[0]
    for value in values[1:]:
        result = tf.bitwise.bitwise_xor(result, value)
    return result


def sha512_one_block(words):
    """The SHA-512 digest (uint64 `[B, 8]`) of one padded 128-byte block (uint64 `[B, 16]`).

    The 80 rounds run in a loop that carries the next 16 message-schedule words.
    """
    initial, rounds = _sha512_constants()
    band = tf.bitwise.bitwise_and
    round_constants = _u64(rounds)

    def one_round(t, window, a, b, c, d, e, f, g, h):
        big_sigma1 = _xor(_rotr(e, 14), _rotr(e, 18), _rotr(e, 41))
        choose = tf.bitwise.bitwise_xor(band(e, f), band(tf.bitwise.invert(e), g))
        t1 = h + big_sigma1 + choose + tf.gather(round_constants, t) + window[:, 0]
        big_sigma0 = _xor(_rotr(a, 28), _rotr(a, 34), _rotr(a, 39))
        majority = _xor(band(a, b), band(a, c), band(b, c))
        w1, w14 = window[:, 1], window[:, 14]
        following = (_xor(_rotr(w14, 19), _rotr(w14, 61), _shr(w14, 6)) + window[:, 9]
                     + _xor(_rotr(w1, 1), _rotr(w1, 8), _shr(w1, 7)) + window[:, 0])
        window = tf.concat([window[:, 1:], following[:, None]], axis=1)
        return t + 1, window, t1 + big_sigma0 + majority, a, b, c, d + t1, e, f, g

    start = [tf.fill(tf.shape(words)[:1], _u64(v)) for v in initial]
    _, _, *final = tf.while_loop(lambda t, *_: t < 80, one_round,
                                 (tf.constant(0), words, *start))
    return tf.stack([x + _u64(v) for x, v in zip(final, initial)], axis=1)


def _big_endian_words(byte_values, word_bytes: int):
    """uint8 `[B, n·word_bytes]` → uint64 `[B, n]`, each word read big-endian."""
    grouped = tf.reshape(tf.cast(byte_values, tf.uint64), [-1, byte_values.shape[1] // word_bytes,
                                                           word_bytes])
    weights = _u64([1 << (8 * (word_bytes - 1 - i)) for i in range(word_bytes)])
    return tf.reduce_sum(grouped * weights, axis=-1)


def _text_bytes(texts, width: int):
    """The bytes of string `[B]` as uint8 `[B, width]` (zero-padded) and the lengths."""
    lengths = tf.cast(tf.strings.length(texts), tf.int32)
    characters = tf.strings.bytes_split(texts).to_tensor(default_value="\0", shape=[None, width])
    return tf.reshape(tf.io.decode_raw(characters, tf.uint8), [-1, width]), lengths


def seed_key(texts):
    """`init_by_array`'s key of `random.Random(text)` for string `[B]`: (uint64 `[B, K]`
    least-significant word first, key lengths int32 `[B]`)."""
    message, lengths = _text_bytes(texts, MAX_SEED_TEXT_BYTES)
    tf.debugging.assert_less_equal(lengths, MAX_SEED_TEXT_BYTES,
                                   message="a dynamic-masking seed text is too long")
    positions = tf.range(SHA512_BLOCK_BYTES)[None, :]
    padded = tf.pad(message, [[0, 0], [0, SHA512_BLOCK_BYTES - MAX_SEED_TEXT_BYTES]])
    padded = tf.where(positions == lengths[:, None], tf.constant(0x80, tf.uint8), padded)
    bit_length = tf.cast(lengths, tf.uint64) * 8
    for i in range(8):  # the length's low 8 bytes, big-endian, end the block
        byte = tf.cast(tf.bitwise.bitwise_and(_shr(bit_length, 8 * i), _u64(0xFF)), tf.uint8)
        padded = tf.where(positions == SHA512_BLOCK_BYTES - 1 - i, byte[:, None], padded)
    digest = sha512_one_block(_big_endian_words(padded, 8))
    shifts = _u64([8 * (7 - i) for i in range(8)])
    digest_bytes = tf.reshape(tf.cast(tf.bitwise.bitwise_and(
        tf.bitwise.right_shift(digest[:, :, None], shifts), _u64(0xFF)), tf.uint8), [-1, 64])
    # text + digest as one big-endian integer, right-aligned in whole 32-bit words.
    joined = tf.concat([message, digest_bytes], axis=1)
    total = lengths + 64
    width = -(-(MAX_SEED_TEXT_BYTES + 64) // 4) * 4
    offset = tf.range(width)[None, :] - (width - total[:, None])
    source = tf.where(offset < lengths[:, None], offset, offset - lengths[:, None]
                      + MAX_SEED_TEXT_BYTES)
    aligned = tf.where(offset >= 0, tf.gather(joined, tf.maximum(source, 0), batch_dims=1),
                       tf.zeros([], tf.uint8))
    key = tf.reverse(_big_endian_words(aligned, 4), axis=[1])
    return key, (total + 3) // 4


# ------------------------------------------------------------------ MT19937
@functools.lru_cache(maxsize=None)
def _init_genrand_19650218() -> List[int]:
    state = [19650218]
    for i in range(1, N):
        previous = state[-1]
        state.append((1812433253 * (previous ^ (previous >> 30)) + i) & _WORD)
    return state


def _mix(previous, multiplier):
    return tf.bitwise.bitwise_xor(previous, _shr(previous, 30)) * _u64(multiplier)


_UNROLL = 16  # recurrence steps per loop iteration (fast to trace, few iterations to run)


def _recurrence(olds, addends, previous, multiplier):
    """`w[t] = ((old[t] ^ mix(w[t-1])) + addend[t]) mod 2^32`, `w[-1] = previous`; uint64 `[T, B]`."""
    steps = olds.shape[0]
    padding = -steps % _UNROLL
    olds = tf.pad(olds, [[0, padding], [0, 0]])
    addends = tf.pad(addends, [[0, padding], [0, 0]])
    chunks = (steps + padding) // _UNROLL

    def body(chunk, previous, written):
        values = []
        for u in range(_UNROLL):
            t = chunk * _UNROLL + u
            previous = tf.bitwise.bitwise_and(
                tf.bitwise.bitwise_xor(olds[t], _mix(previous, multiplier)) + addends[t],
                _u64(_WORD))
            values.append(previous)
        return chunk + 1, previous, written.write(chunk, tf.stack(values))

    _, _, written = tf.while_loop(
        lambda chunk, *_: chunk < chunks, body,
        (tf.constant(0), previous, tf.TensorArray(tf.uint64, size=chunks)))
    return tf.reshape(written.stack(), [chunks * _UNROLL, -1])[:steps]


def init_by_array(key, key_length):
    """MT19937 state uint64 `[624, B]` of `init_by_array(key)` (all keys shorter than 624 words).

    With a key shorter than 624 words the C loops write `mt[1..623]`, then
    `mt[1]` again (after `mt[0] = mt[623]`), then `mt[2..623]` and `mt[1]`:
    each write reads the previous write, so both passes are one recurrence
    over the values they overwrite.
    """
    rows = tf.shape(key)[0]
    initial = _init_genrand_19650218()
    # Word-major `[624, B]` throughout: TensorFlow's Transpose of 64-bit integers logs a
    # misleading oneDNN error line.
    j = tf.range(N)[:, None] % key_length[None, :]
    row = tf.broadcast_to(tf.range(rows)[None, :], tf.shape(j))
    addends = tf.gather_nd(key, tf.stack([row, j], axis=-1)) + tf.cast(j, tf.uint64)
    olds = tf.tile(_u64(initial[1:])[:, None], [1, rows])
    first = _recurrence(olds, addends[:N - 1], tf.fill([rows], _u64(initial[0])), 1664525)
    # The 624th write goes to mt[1] again, over the first pass's first value.
    again = _recurrence(first[:1], addends[N - 1:], first[-1], 1664525)
    written = tf.concat([first, again], axis=0)          # mt[1..623], then mt[1]
    minus_i = _u64([2**64 - i for i in list(range(2, N)) + [1]])[:, None]
    second = _recurrence(written[1:], tf.broadcast_to(minus_i, [N - 1, rows]), written[-1],
                         1566083941)                      # mt[2..623], then mt[1]
    return tf.concat([tf.fill([1, rows], _u64(0x80000000)), second[-1:], second[:-1]], axis=0)


def _twist_rows(old, new_next, far):
    """`mt[kk] = far ^ (y >> 1) ^ mag01[y & 1]`, y from mt[kk]'s upper and mt[kk+1]'s lower bits."""
    y = tf.bitwise.bitwise_or(tf.bitwise.bitwise_and(old, _u64(_UPPER)),
                              tf.bitwise.bitwise_and(new_next, _u64(_LOWER)))
    odd = tf.bitwise.bitwise_and(y, _u64(1)) * _u64(_MATRIX_A)
    return _xor(far, _shr(y, 1), odd)


def twist(state):
    """The next 624 words' state `[624, B]` (genrand_uint32's refill), in four vectorised pieces."""
    first = _twist_rows(state[:N - M], state[1:N - M + 1], state[M:])
    second = _twist_rows(state[N - M:2 * (N - M)], state[N - M + 1:2 * (N - M) + 1], first)
    third = _twist_rows(state[2 * (N - M):N - 1], state[2 * (N - M) + 1:N],
                        second[:N - 1 - 2 * (N - M)])
    last = _twist_rows(state[N - 1:], first[:1], second[M - (N - M) - 1:M - (N - M)])
    return tf.concat([first, second, third, last], axis=0)


def temper(y):
    y = tf.bitwise.bitwise_xor(y, _shr(y, 11))
    y = tf.bitwise.bitwise_xor(y, tf.bitwise.bitwise_and(_shl(y, 7), _u64(0x9D2C5680)))
    y = tf.bitwise.bitwise_xor(y, tf.bitwise.bitwise_and(_shl(y, 15), _u64(0xEFC60000)))
    return tf.bitwise.bitwise_xor(y, _shr(y, 18))


@dataclasses.dataclass
class Generators:
    """One MT19937 per row: the state `[624, B]` and the index of the next word `[B]`."""

    state: tf.Tensor
    index: tf.Tensor

    @classmethod
    def seeded(cls, texts) -> "Generators":
        state = init_by_array(*seed_key(texts))
        return cls(state, tf.fill(tf.shape(texts), tf.constant(N, tf.int32)))

    def as_tuple(self):
        return self.state, self.index

    def uint32(self, active):
        """genrand_uint32 for the `active` rows (0 elsewhere); those rows advance."""
        refill = tf.logical_and(active, self.index >= N)
        self.state = tf.cond(tf.reduce_any(refill),
                             lambda: tf.where(refill[None, :], twist(self.state), self.state),
                             lambda: self.state)
        self.index = tf.where(refill, 0, self.index)
        rows = tf.range(tf.shape(self.index)[0])
        word = temper(tf.gather_nd(self.state,
                                   tf.stack([tf.minimum(self.index, N - 1), rows], axis=1)))
        self.index += tf.cast(active, tf.int32)
        return tf.where(active, word, tf.zeros_like(word))

    def random(self, active):
        """`random()` as float64 for the `active` rows (two words each)."""
        high = _shr(self.uint32(active), 5)
        low = _shr(self.uint32(active), 6)
        return tf.cast(high * _u64(67108864) + low, tf.float64) / 9007199254740992.0

    def draw_below(self, limit, active):
        """One try of `_randbelow(limit)` for the `active` rows: `getrandbits(k)`, k the bit
        length of `limit` (int64 `[B]`); the caller keeps it only if it is below `limit`."""
        bits = tf.cast(tf.math.floor(tf.math.log(tf.cast(limit, tf.float64)) / np.log(2.0)) + 1,
                       tf.int64)
        # float log2 can be off by one at exact powers of two: correct with integer tests.
        bits = tf.where(tf.bitwise.left_shift(tf.ones_like(bits), bits - 1) > limit, bits - 1, bits)
        bits = tf.where(tf.bitwise.left_shift(tf.ones_like(bits), bits) <= limit, bits + 1, bits)
        return tf.cast(tf.bitwise.right_shift(self.uint32(active), tf.cast(32 - bits, tf.uint64)),
                       tf.int64)

    def below(self, limit, active):
        """`_randbelow(limit)` for the `active` rows: int64 in [0, limit); `limit` a Python int
        or an int64 `[B]` tensor, each row drawing again while its draw is ≥ its limit."""
        limit = tf.cast(tf.broadcast_to(limit, tf.shape(active)), tf.int64)
        result = tf.zeros_like(limit)
        pending = active

        def draw(result, pending, state, index):
            self.state, self.index = state, index
            value = self.draw_below(limit, pending)
            accepted = tf.logical_and(pending, value < limit)
            return (tf.where(accepted, value, result), tf.logical_and(pending, ~accepted),
                    self.state, self.index)

        result, _, self.state, self.index = tf.while_loop(
            lambda result, pending, state, index: tf.reduce_any(pending), draw,
            (result, pending, self.state, self.index))
        return result
