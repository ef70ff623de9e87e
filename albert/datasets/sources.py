"""Real text shipped inside packages from the Python package index.

The demo corpus is built from data files of the `gensim==4.4.0` wheel, which
`pip install -e ".[demo]"` puts on disk (the `demo` extra of this project). Nothing is
downloaded at run time, and gensim itself is never imported: its files are
located through the installed distribution's metadata.
"""

import hashlib
import importlib.metadata
import os

from albert.errors import InputError

GENSIM_VERSION = "4.4.0"
_TEST_DATA = "gensim/test/test_data"
WIKIPEDIA_SAMPLE = f"{_TEST_DATA}/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LEE_BACKGROUND = f"{_TEST_DATA}/lee_background.cor"
LEE = f"{_TEST_DATA}/lee.cor"
PANG_LEE_POLARITY = f"{_TEST_DATA}/pang_lee_polarity.cor"
LEE_SIMILARITIES = f"{_TEST_DATA}/similarities0-1.txt"


def gensim_file(relative_path: str) -> str:
    """Absolute path of a file of the installed gensim distribution."""
    try:
        distribution = importlib.metadata.distribution("gensim")
    except importlib.metadata.PackageNotFoundError:
        raise InputError(f"The demo corpus needs the gensim=={GENSIM_VERSION} wheel's data files; "
                         f'install the demo extra (pip install -e ".[demo]") or gensim=={GENSIM_VERSION}') from None
    if distribution.version != GENSIM_VERSION:
        raise InputError(f"gensim {distribution.version} is installed; the demo corpus is defined "
                         f"on gensim=={GENSIM_VERSION}'s data files")
    path = str(distribution.locate_file(relative_path))
    if not os.path.exists(path):
        raise InputError(f"{relative_path} is missing from the installed gensim distribution")
    return path


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
