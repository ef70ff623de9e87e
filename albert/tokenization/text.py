"""Text normalisation shared by every tokenizer."""

import unicodedata


def preprocess_text(text: str, remove_space: bool = True, lower: bool = False) -> str:
    """The original's `preprocess_text`, in its order.

    1. if `remove_space`: strip and collapse all whitespace runs to one space;
    2. Unicode NFKD;
    3. drop combining characters (accents);
    4. if `lower`: `str.lower()`.

    No quote rewriting (Hugging Face's ALBERT tokenizer maps ``` `` ``` and
    `''` to `"`; the original does not). The function is idempotent.
    """
    if remove_space:
        text = " ".join(text.strip().split())
    if not text.isascii():  # ASCII text is its own NFKD form and has no combining characters
        text = unicodedata.normalize("NFKD", text)
        text = "".join(character for character in text if not unicodedata.combining(character))
    if lower:
        text = text.lower()
    return text
