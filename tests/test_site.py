"""The documentation site (mkdocs.yml) builds in strict mode, without torch, and a broken link
fails it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: ``mkdocs build`` in a Python where ``import torch`` fails: the API reference is read from
#: the sources (griffe, statically), so the build must never import nasforge's torch parts.
BUILD = (
    "import sys; sys.modules['torch'] = None; sys.argv[0] = 'mkdocs'; "
    "from mkdocs.__main__ import cli; cli()"
)


def build(src: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """Returns the finished ``mkdocs build --strict`` of the site whose mkdocs.yml is in
    ``src``, built into ``out``."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's banner, not a warning
    return subprocess.run(
        [sys.executable, "-c", BUILD, "build", "--strict", "-f", "mkdocs.yml", "-d", str(out)],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Returns the folder of the site built from this checkout."""
    out = tmp_path_factory.mktemp("site")
    proc = build(ROOT, out)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stderr[-4000:]}"
    return out


def test_api_reference_documents_the_public_api(site: Path) -> None:
    """The API reference renders the docstrings of the public API, `load_model` included, with
    their Sphinx roles as code."""
    run_page = (site / "api/run/index.html").read_text()
    assert 'id="nasforge.run.export.load_model"' in run_page
    assert "Returns the exported architecture as a frozen" in run_page  # its docstring
    engine_page = (site / "api/engine/index.html").read_text()
    assert 'id="nasforge.engine.experiment.Experiment"' in engine_page
    assert 'id="nasforge.errors.ConfigError"' in (site / "api/errors/index.html").read_text()
    for page in (site / "api").rglob("*.html"):  # Sphinx roles are shown as code
        assert ":class:`" not in page.read_text() and ":mod:`" not in page.read_text(), page


def test_getting_started_includes_the_readme_quickstart(site: Path) -> None:
    """The Getting started page holds the README's Quickstart commands (one source)."""
    page = (site / "getting-started/index.html").read_text()
    assert "examples/digits_evolution.py" in page
    assert "--8&lt;--" not in page and "--8<--" not in page  # every include was resolved


def test_links_to_repository_files_point_at_their_copy(site: Path) -> None:
    """A docs page's link to a repository file outside docs/ works in the site: the file is
    copied under repo/ and the link points there."""
    assert (site / "repo/examples/ray_cluster.py").read_bytes() == (
        ROOT / "examples/ray_cluster.py"
    ).read_bytes()
    assert 'href="../repo/examples/ray_cluster.py"' in (site / "cluster/index.html").read_text()


def test_site_needs_no_network(site: Path) -> None:
    """No page loads a script, style sheet or font from another host."""
    for page in site.rglob("*.html"):
        text = page.read_text()
        for tag in ('<script src="http', '<link rel="stylesheet" href="http', "fonts.g"):
            assert tag not in text, f"{page.relative_to(site)} fetches {tag!r}"


#: (page, a broken link appended to it, what the build's error names)
BROKEN = [
    ("cluster.md", "[a script](../examples/no_such_script.py)", "no_such_script.py"),
    ("engine.md", "[a page](no_such_page.md)", "no_such_page.md"),
    ("api/errors.md", "[a name][nasforge.errors.NoSuchError]", "nasforge.errors.NoSuchError"),
]


@pytest.mark.slow  # a second whole build of the site: the checkout's own build stays fast
def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """A link to a missing repository file, page or API name fails the strict build, which
    names each (one build of a copy of docs/ with all three: strict mode reports every
    warning before it aborts)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("nasforge", "examples", "README.md", "mkdocs.yml", "mkdocs_hooks.py"):
        (src / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "docs", src / "docs")
    for page, broken, _ in BROKEN:
        with (src / "docs" / page).open("a") as f:
            f.write(f"\nSee {broken}.\n")
    proc = build(src, tmp_path / "out")
    assert proc.returncode != 0, "the build passed with broken links"
    for page, broken, reported in BROKEN:
        assert reported in proc.stderr, f"{broken!r} in docs/{page} was not reported"


def test_the_api_reference_covers_the_names_the_guides_use() -> None:
    """ClassificationEvaluator, RayExecutor, load_digits, mnist_tensors, mnist1d_tensors,
    DigitsCNN and suggest_float, which the guides and examples use, each have an entry: the
    module defining it is rendered by a `::: module` line of a docs/api page."""
    from nasforge import suggest_float
    from nasforge.data import load_digits, mnist_tensors
    from nasforge.data.mnist1d import mnist1d_tensors
    from nasforge.engine.classification import ClassificationEvaluator
    from nasforge.engine.ray_executor import RayExecutor
    from nasforge.spaces import DigitsCNN

    rendered = {
        line.split(":::", 1)[1].strip()
        for page in (ROOT / "docs" / "api").glob("*.md")
        for line in page.read_text().splitlines()
        if line.startswith(":::")
    }
    used = (ClassificationEvaluator, RayExecutor, load_digits, mnist_tensors, mnist1d_tensors,
            DigitsCNN, suggest_float)  # fmt: skip
    for obj in used:
        assert obj.__module__ in rendered, f"{obj.__qualname__} ({obj.__module__}) has no entry"


def test_the_readme_lists_every_extra() -> None:
    """Each optional extra of pyproject.toml (mnist1d, tensorboard, mlflow, ...) is named in
    the README's list of extras."""
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: nasforge depends on tomli there
        import tomli as tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    readme = (ROOT / "README.md").read_text()
    listed = re.search(r"with any of the extras\s*\(([^)]*)\)", readme)
    assert listed is not None, "the README lost its list of extras"
    named = set(re.findall(r"`([\w-]+)`", listed.group(1)))
    assert named == set(extras), f"missing {sorted(set(extras) - named)}"


def test_the_engine_guide_names_every_trial_record_field() -> None:
    """docs/engine.md's list of a TrialRecord's fields names each field, `id` included."""
    import dataclasses

    from nasforge.run.records import TrialRecord

    text = (ROOT / "docs" / "engine.md").read_text()
    start = text.index("return `TrialRecord`s")
    listed = text[start : text.index("\n\n", start)]
    for f in dataclasses.fields(TrialRecord):
        assert f"`{f.name}`" in listed, f"TrialRecord.{f.name} is not in docs/engine.md's list"
