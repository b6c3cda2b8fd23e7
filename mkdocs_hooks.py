"""mkdocs hooks of the documentation site (mkdocs.yml's ``hooks:``): links from ``docs/`` to
repository files outside it; and a griffe extension for the API reference's docstrings
(``SphinxRoles``).

A page may link a repository file by its relative path (``[script](../examples/x.py)``), which
is what works when the Markdown is read in the repository. The site has no such file, so strict
mode would call the link broken. This hook copies every such file that exists into the site
under ``repo/`` and points the link there; a link to a file that does not exist is left as it
is, so mkdocs still reports it and the strict build fails.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

import griffe

__all__ = ["on_files", "on_page_markdown", "SphinxRoles"]

#: ``](target)`` of a Markdown link or image whose target is a relative path (not a URL, not
#: an anchor); the target ends at ``)``, a space (a title follows) or ``#``
LINK = re.compile(r"\]\((?P<target>(?![a-z][a-z0-9+.-]*:|/|#)[^)\s#]+)(?P<rest>[^)]*)\)")
#: the folder of the site that holds the copied repository files
REPO_DIR = "repo"


def _outside_target(page_src: str, target: str, docs_dir: Path, root: Path) -> str | None:
    """Returns the repository path (POSIX, relative to the root) of ``target`` as linked from
    the page ``page_src`` when it is an existing file outside ``docs_dir`` and not a Markdown
    page; otherwise None."""
    path = (docs_dir / posixpath.dirname(page_src) / target).resolve()
    if path.is_relative_to(docs_dir.resolve()) or not path.is_relative_to(root):
        return None
    if not path.is_file() or path.suffix == ".md":
        return None  # left as it is: mkdocs reports a missing file, and a page outside docs/
    return path.relative_to(root).as_posix()


def _roots(config: Any) -> tuple[Path, Path]:
    """Returns the docs folder and the repository root (the folder of mkdocs.yml)."""
    docs_dir = Path(config["docs_dir"])
    return docs_dir, Path(config["config_file_path"]).resolve().parent


def on_files(files: Any, config: Any) -> Any:
    """Returns ``files`` plus a copy under ``repo/`` of each existing repository file outside
    ``docs/`` that a page links."""
    from mkdocs.structure.files import File

    docs_dir, root = _roots(config)
    wanted: set[str] = set()
    for f in files.documentation_pages():
        text = Path(f.abs_src_path).read_text(encoding="utf-8")
        for m in LINK.finditer(text):
            rel = _outside_target(f.src_uri, m.group("target"), docs_dir, root)
            if rel is not None:
                wanted.add(rel)
    for rel in sorted(wanted):
        files.append(File.generated(config, f"{REPO_DIR}/{rel}", abs_src_path=str(root / rel)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Returns the page's Markdown with each link to an existing repository file outside
    ``docs/`` pointed at its copy under ``repo/``."""
    docs_dir, root = _roots(config)
    src = page.file.src_uri

    def relink(m: re.Match[str]) -> str:
        rel = _outside_target(src, m.group("target"), docs_dir, root)
        if rel is None:
            return m.group(0)
        new = posixpath.relpath(f"{REPO_DIR}/{rel}", posixpath.dirname(src) or ".")
        return f"]({new}{m.group('rest')})"

    return LINK.sub(relink, markdown)


#: a Sphinx cross-reference role in a docstring: ``:class:`~nasforge.run.store.Store```
ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):`(?P<tilde>~?)(?P<target>[^`]+)`")


def _as_code(m: re.Match[str]) -> str:
    """Returns a Sphinx role as Markdown inline code: its target, or with ``~`` its last part
    (as Sphinx shows it)."""
    target = m.group("target").lstrip(".")
    return f"`{target.rsplit('.', 1)[-1] if m.group('tilde') else target}`"


class SphinxRoles(griffe.Extension):
    """A griffe extension (mkdocs.yml's mkdocstrings ``extensions``) that shows the Sphinx
    roles of nasforge's docstrings (``:class:`Store```, ``:mod:`~nasforge.run```) as inline
    code; Markdown would print them as they are written."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrites the roles in ``obj``'s docstring."""
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(_as_code, obj.docstring.value)
