"""Plain prose from MediaWiki XML dumps: articles only, markup stripped with mwparserfromhell."""

import bz2
import re
import xml.etree.ElementTree as ElementTree
from typing import Iterator, Tuple

import mwparserfromhell

# Sections that hold lists of references rather than prose.
_DROPPED_SECTIONS = {"references", "external links", "see also", "further reading", "notes",
                     "bibliography", "sources", "footnotes", "citations", "works cited"}
# Links into these namespaces are media, categories or other-language links, not text.
_NON_TEXT_LINK = re.compile(r"^\s*(file|image|media|category|[a-z]{2,3}(-[a-z]+)?)\s*:", re.I)
_DROPPED_TAGS = {"ref", "table", "gallery", "math", "timeline", "imagemap", "references", "score"}
# What is left of markup the parser could not pair up (tables cut off in the
# shortened dump, unclosed references): such paragraphs are dropped.
_TABLE_ROW_STARTS = ("{|", "|", "!")
_RESIDUAL_MARKUP = ("{{", "}}", "[[", "]]", "<ref", "</ref>", "'''", "==")


def iter_articles(path: str) -> Iterator[Tuple[str, str]]:
    """(title, wikitext) of every main-namespace, non-redirect page of a `.xml.bz2` dump."""
    with bz2.open(path) as stream:
        for _, element in ElementTree.iterparse(stream):
            if element.tag.rsplit("}", 1)[-1] != "page":
                continue
            namespace = element.findtext("{*}ns")
            redirect = element.find("{*}redirect") is not None
            if namespace == "0" and not redirect:
                yield element.findtext("{*}title"), element.findtext("{*}revision/{*}text") or ""
            element.clear()


def _remove(wikicode, nodes) -> None:
    for node in nodes:
        try:
            wikicode.remove(node)
        except ValueError:  # already removed with an enclosing node
            pass


def article_paragraphs(wikitext: str) -> list:
    """The prose paragraphs of an article, markup removed."""
    wikicode = mwparserfromhell.parse(wikitext)
    for section in wikicode.get_sections(levels=[2]):
        headings = section.filter_headings(recursive=False)
        if headings and headings[0].title.strip_code().strip().lower() in _DROPPED_SECTIONS:
            _remove(wikicode, [section])
    _remove(wikicode, wikicode.filter_tags(matches=lambda tag: str(tag.tag).lower() in _DROPPED_TAGS))
    _remove(wikicode, wikicode.filter_wikilinks(matches=lambda link: _NON_TEXT_LINK.match(str(link.title))))
    _remove(wikicode, wikicode.filter_headings())
    _remove(wikicode, wikicode.filter_comments())
    text = wikicode.strip_code(normalize=True, collapse=True)
    paragraphs = [line.strip() for line in text.split("\n") if line.strip()]
    return [paragraph for paragraph in paragraphs
            if not paragraph.startswith(_TABLE_ROW_STARTS)
            and not any(marker in paragraph for marker in _RESIDUAL_MARKUP)]
