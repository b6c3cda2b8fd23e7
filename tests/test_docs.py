"""Every fenced code block of README.md and of the pages under docs/ runs as printed.

Python blocks of one file run in order, each in a fresh namespace (a reader may copy any one
block alone, so each imports and builds what it uses); shell blocks (``bash``, ``sh``, and
plain blocks whose lines are commands) run line by line with bash; YAML and TOML blocks are
parsed, and a complete run file among them is run through ``nasforge run``. A block is left
out only by ``<!-- docs-test: skip because <reason> -->`` on the line right before its fence;
a block that takes minutes is marked ``<!-- docs-test: slow -->`` and runs in a slow test. A
shell block marked ``<!-- docs-test: server -->`` starts a server: each command runs in the
background until the first ``http://`` address it prints answers HTTP 200, and is then stopped.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: README.md and every page of the docs site, docs/api/ included (its ``::: module`` lines are
#: mkdocstrings directives, not code blocks)
DOC_FILES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
#: The venv's bin folder (not resolved: a venv's python is a symlink out of it).
VENV_BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```([\w+-]*)\s*$")
SKIP = re.compile(r"^<!--\s*docs-test:\s*skip because (?P<reason>\S.*?)\s*-->$")
SLOW = re.compile(r"^<!--\s*docs-test:\s*slow\s*-->$")
SERVER = re.compile(r"^<!--\s*docs-test:\s*server\s*-->$")
#: the first address a server command prints
URL = re.compile(r"http://[\w.\-\[\]:]+(?:/[^\s]*)?")
#: Seconds a server command may take to answer HTTP 200 at the address it prints.
SERVER_TIMEOUT = 60
DIRECTIVE = re.compile(r"^<!--\s*docs-test:")
SHELL_LANGS = {"bash", "sh", "shell", "console"}
#: Seconds one shell command may take (the slowest, the Quickstart's example, is timed by
#: benchmarks/quickstart.py, well under this).
COMMAND_TIMEOUT = 420


@dataclass(frozen=True)
class Block:
    """One fenced code block: its file, first line number, language, text and marks."""

    path: Path
    line: int
    lang: str
    text: str
    skip: str | None
    slow: bool
    server: bool = False

    @property
    def where(self) -> str:
        """Returns ``file:line`` of the block's opening fence."""
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def parse_blocks(path: Path) -> list[Block]:
    """Returns the fenced code blocks of a Markdown file, in order.

    Raises:
        ValueError: an unclosed fence, or a ``docs-test`` comment that is neither a skip with
            a reason nor ``slow``.
    """
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1).lower()
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        if j == len(lines):
            raise ValueError(f"{path.name}:{start + 1}: fence never closed")
        before = lines[start - 1].strip() if start > 0 else ""
        skip = SKIP.match(before)
        if (
            DIRECTIVE.match(before)
            and not skip
            and not SLOW.match(before)
            and not SERVER.match(before)
        ):
            raise ValueError(
                f"{path.name}:{start}: {before!r} is not '<!-- docs-test: skip because "
                "<reason> -->', '<!-- docs-test: slow -->' nor '<!-- docs-test: server -->'"
            )
        text = "\n".join(lines[start + 1 : j]) + "\n"
        blocks.append(
            Block(
                path,
                start + 1,
                lang,
                text,
                skip.group("reason") if skip else None,
                bool(SLOW.match(before)),
                bool(SERVER.match(before)),
            )
        )
        i = j + 1
    return blocks


def command_lines(text: str) -> list[str]:
    """Returns the non-empty, non-comment lines of a shell block."""
    return [
        ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]


def is_shell(block: Block) -> bool:
    """Returns whether a block holds shell commands: ``bash``/``sh``, or a plain block one of
    whose lines starts with a program found on the PATH (so a diagram stays text, while a plain
    block with a mistyped command still runs and fails)."""
    if block.lang in SHELL_LANGS:
        return True
    if block.lang:
        return False
    path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    for ln in command_lines(block.text):
        word = ln.split()[0]
        if re.fullmatch(r"[A-Za-z][\w.-]*", word) and shutil.which(word, path=path):
            return True
    return False


def doc_name(path: Path) -> str:
    """Returns a documentation file's key and test id: its path under ``docs/``
    (``engine.md``, ``api/engine.md``), or its name for the README."""
    return path.relative_to(DOCS).as_posix() if path.is_relative_to(DOCS) else path.name


ALL_BLOCKS = {doc_name(p): parse_blocks(p) for p in DOC_FILES}


def _cases(select, slow: bool = False) -> list:
    """Returns one pytest param per documentation file that has a selected block, marked
    ``slow``: running a file's blocks is an end-to-end test (whole runs, servers, benchmarks),
    so the default ``pytest`` leaves it to ``pytest -m slow``, which CI runs too. A block's own
    ``slow`` mark puts it in the separate slow-blocks test of its file."""
    cases = []
    for name, blocks in ALL_BLOCKS.items():
        if any(select(b) and b.skip is None and b.slow == slow for b in blocks):
            cases.append(pytest.param(name, marks=[pytest.mark.slow], id=name))
    return cases


def _selected(name: str, select, slow: bool = False) -> list[Block]:
    """Returns the selected, not skipped blocks of one file with the given slowness."""
    return [b for b in ALL_BLOCKS[name] if select(b) and b.skip is None and b.slow == slow]


def _is_python(b: Block) -> bool:
    return b.lang in ("python", "py")


def _is_config(b: Block) -> bool:
    return b.lang in ("yaml", "yml", "toml")


def _env() -> dict[str, str]:
    """Returns the environment of documented commands: the venv first on PATH, the repository
    importable, one torch thread per process."""
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("NASFORGE_THREADS", "1")
    env["MPLBACKEND"] = "Agg"
    return env


def _workdir(tmp_path: Path) -> Path:
    """Returns a fresh working directory with ``examples``, ``benchmarks`` and ``.venv`` linked
    in."""
    work = tmp_path / "work"
    work.mkdir()
    for name in ("examples", "benchmarks"):
        (work / name).symlink_to(ROOT / name)
    # The README's commands use the venv by path, as in a clone where `.venv` was created.
    (work / ".venv").symlink_to(VENV_BIN.parent)
    return work


def _answers(url: str) -> bool:
    """Returns whether ``url`` answers HTTP 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _run_server(block: Block, cmd: str, work: Path, env: dict[str, str]) -> None:
    """Starts ``cmd`` in the background, waits until the first address it prints answers
    HTTP 200 (at most ``SERVER_TIMEOUT`` seconds), then stops it and every process it
    started."""
    log = work / f"server-{block.line}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["bash", "-c", cmd],
            cwd=work,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline, url = time.monotonic() + SERVER_TIMEOUT, None
        while time.monotonic() < deadline and proc.poll() is None:
            found = URL.search(log.read_text(errors="replace"))
            url = found.group(0) if found else None
            if url and _answers(url):
                return
            time.sleep(0.5)
        pytest.fail(
            f"{block.where}: `{cmd}` did not answer HTTP 200 at {url or 'an address it prints'} "
            f"within {SERVER_TIMEOUT}s (exit status {proc.poll()})\n"
            f"--- output ---\n{log.read_text(errors='replace')[-4000:]}"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _run_shell(blocks: list[Block], work: Path) -> None:
    """Runs every command line of the blocks in order in ``work``; each must exit with 0, or
    in a server block, answer HTTP 200 at the address it prints."""
    env = _env()
    for block in blocks:
        for cmd in command_lines(block.text):
            if block.server:
                _run_server(block, cmd, work, env)
                continue
            proc = subprocess.run(
                ["bash", "-c", cmd],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
            )
            assert proc.returncode == 0, (
                f"{block.where}: `{cmd}` exited with {proc.returncode}\n"
                f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
            )


def test_parser_finds_blocks_and_marks() -> None:
    """The parser returns every block with its language, and reads skip and slow marks."""
    readme = ALL_BLOCKS["README.md"]
    assert any(_is_python(b) for b in readme) and any(is_shell(b) for b in readme)
    for blocks in ALL_BLOCKS.values():
        for b in blocks:
            assert b.skip is None or b.skip.strip(), b.where
    diagram = next(b for b in ALL_BLOCKS["architecture.md"] if not b.lang)
    assert not is_shell(diagram)
    assert is_shell(Block(ROOT, 1, "", "nasforge status runs/x\n", None, False))
    servers = [b for b in ALL_BLOCKS["dashboard.md"] if b.server]
    assert len(servers) == 3 and all(b.text.startswith("nasforge serve") for b in servers)


def test_every_page_of_the_site_is_read() -> None:
    """Pages in subfolders of docs/ (the API reference) are read too, keyed by their path."""
    assert {"README.md", "getting-started.md", "api/run.md", "api/index.md"} <= set(ALL_BLOCKS)
    assert ALL_BLOCKS["api/run.md"] == []  # `::: nasforge.run.store` lines are not code blocks


#: What a skip may name: install or CI commands (CI runs them itself), or something absent
#: on the test machine (a GPU, the network).
ALLOWED_SKIP = re.compile(r"\b(install|CI|GPU|CUDA|network|download)", re.I)


def test_skips_name_an_allowed_reason() -> None:
    """A block is skipped only for install/CI commands or for a GPU or network it needs."""
    for blocks in ALL_BLOCKS.values():
        for b in blocks:
            if b.skip is not None:
                assert ALLOWED_SKIP.search(b.skip), (
                    f"{b.where}: skip reason {b.skip!r} is not an install/CI command nor a "
                    "missing GPU or network; make the block run instead"
                )


def run_python_blocks(blocks: list[Block]) -> list[dict]:
    """Returns the namespace of each block after running the blocks in order, each in a fresh
    namespace of its own."""
    scopes = []
    for block in blocks:
        # a module of its own, as a reader's script is: not this file's __future__ imports
        # (dont_inherit), and found in sys.modules while it runs (a dataclass looks it up)
        module = types.ModuleType(f"docs_{block.path.stem}_{block.line}")
        sys.modules[module.__name__] = module
        try:
            exec(compile(block.text, block.where, "exec", dont_inherit=True), module.__dict__)
        finally:
            del sys.modules[module.__name__]
        scopes.append(module.__dict__)
    return scopes


def test_each_python_block_runs_alone() -> None:
    """A block that uses a name only an earlier block defined fails: blocks share nothing."""
    first = Block(ROOT / "README.md", 1, "python", "x = 1\n", None, False)
    second = Block(ROOT / "README.md", 5, "python", "y = x + 1\n", None, False)
    assert run_python_blocks([first])[0]["x"] == 1
    with pytest.raises(NameError, match="'x'"):
        run_python_blocks([first, second])


@pytest.mark.parametrize("name", _cases(_is_python))
def test_python_blocks(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All Python blocks of one file run in order, each on its own in a fresh namespace, in a
    fresh directory."""
    torch.set_num_threads(1)
    monkeypatch.chdir(_workdir(tmp_path))
    monkeypatch.setenv("NASFORGE_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    scopes = run_python_blocks(_selected(name, _is_python))
    if name == "README.md":
        _check_concepts(scopes[0])


def _check_concepts(scope: dict) -> None:
    """The README's concepts example built a space, sampled an architecture of it and froze
    a working model."""
    ss, arch, model = scope["ss"], scope["arch"], scope["model"]
    assert set(arch) == set(ss)
    assert model(torch.randn(2, 1, 8, 8)).shape == (2, 10)


def test_quickstart_time_is_one_figure_from_its_benchmark() -> None:
    """The Quickstart quotes one time, that of benchmarks/quickstart.py, which runs exactly the
    Quickstart's commands."""
    import importlib.util

    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Quickstart") :]
    section = section[: section.index("\n## ", 1)]
    # the test command's snippet sits in the Quickstart but times the test suite, not it
    start, end = "<!-- --8<-- [start:test-command] -->", "<!-- --8<-- [end:test-command] -->"
    if start in section:
        section = section[: section.index(start)] + section[section.index(end) :]
    assert "benchmarks/quickstart.py" in section
    times = re.findall(r"\b\d+(?:\.\d+)? ?(?:s|seconds?|min|minutes?)\b|\bminutes?\b", section)
    assert len(times) == 1, f"the Quickstart quotes {times}; keep the benchmark's one figure"
    spec = importlib.util.spec_from_file_location("quickstart", ROOT / "benchmarks/quickstart.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    first, last = (text[: text.index(h)].count("\n") + 1 for h in ("## Quickstart", "## Concepts"))
    (block,) = [b for b in ALL_BLOCKS["README.md"] if b.slow and first < b.line < last]
    printed = [ln.split("#", 1)[0].strip() for ln in command_lines(block.text)]
    assert bench.quickstart_commands() == printed


@pytest.mark.parametrize("name", _cases(is_shell))
def test_shell_blocks(name: str, tmp_path: Path) -> None:
    """Every command of the file's shell blocks exits with status 0, in order, in one folder."""
    _run_shell(_selected(name, is_shell), _workdir(tmp_path))


@pytest.mark.parametrize("name", _cases(is_shell, slow=True))
def test_slow_shell_blocks(name: str, tmp_path: Path) -> None:
    """Every command of the file's slow shell blocks exits with status 0."""
    _run_shell(_selected(name, is_shell, slow=True), _workdir(tmp_path))


@pytest.mark.parametrize("name", _cases(_is_config))
def test_config_blocks(name: str, tmp_path: Path) -> None:
    """YAML and TOML blocks parse; a complete run file among them runs with ``nasforge run``."""
    work = _workdir(tmp_path)
    for k, block in enumerate(_selected(name, _is_config)):
        if block.lang == "toml":
            data = tomllib.loads(block.text)
            suffix = ".toml"
        else:
            data = yaml.safe_load(block.text)
            suffix = ".yaml"
        assert isinstance(data, dict), f"{block.where}: not a mapping"
        if "space" in data and ("kind" in data or "strategy" in data):
            run_file = work / f"block{k}{suffix}"
            run_file.write_text(block.text)
            cmd = f"nasforge run {run_file.name} --dir runs/block{k}"
            _run_shell([Block(block.path, block.line, "bash", cmd + "\n", None, False)], work)


def test_every_python_m_build_installs_build_first() -> None:
    """A block that runs `python -m build` installs `build` before it (a fresh venv from the
    Quickstart does not have it, and `python -m build` then fails)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        for block in parse_blocks(page):
            lines = command_lines(block.text)
            for i, line in enumerate(lines):
                if "-m build" in line and "mkdocs" not in line:
                    before = " ".join(lines[:i])
                    assert re.search(r"pip install[^|;&]*\bbuild\b", before), (
                        f"{block.where}: `python -m build` without installing `build` first"
                    )
