"""The README and the user guide hold together (issue 31, item 13).

The guide is the Markdown files of ``docs/``, built as a site by ``mkdocs build --strict`` in the
README's test command, which fails on a broken link between pages, a missing anchor or a page left
out of ``nav``. What that build does not see is checked here: the README's relative links (the README
is not a page of the site), that ``.ci/run`` runs the README's test command, that the build step is
one whose warnings count, that every page is reachable from the README, and that the settings file
the guide quotes is the one the notebook loads.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: A Markdown link or image: ``[text](target)``, the target without spaces.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub and MkDocs' ``toc`` both make it for plain headings: lower case,
    punctuation dropped, spaces as ``-``."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"\s+", "-", text)


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def _test_command(text: str) -> list[str]:
    """The steps (``&&``-separated) of the one line of ``text`` that installs ``.[test]``."""
    lines = [line for line in text.splitlines() if "pip install '.[test]'" in line]
    assert len(lines) == 1, lines
    return [step.strip() for step in lines[0].split("&&")]


def test_the_readmes_relative_links_point_at_files_that_exist() -> None:
    links = [t for t in LINK.findall(_readme()) if not re.match(r"[a-z]+:", t)]
    assert len(links) >= 10, links  # the "Read on" list at least
    broken = []
    for target in links:
        file, _, anchor = target.partition("#")
        path = ROOT / file
        if not path.is_file() or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(target)
    assert broken == []


def test_ci_runs_the_readmes_test_command() -> None:
    assert _test_command((ROOT / ".ci" / "run").read_text(encoding="utf-8")) == _test_command(_readme())


def test_the_test_command_builds_the_guide_so_that_warnings_fail_it() -> None:
    """MkDocs 1.6 counts no warning under ``-q``/``--quiet`` (its issue 4126: a strict build with a
    broken link passes) and checks no anchor under ``-v`` (issue 3991); ``--strict`` must be given or
    set in ``mkdocs.yml``."""
    builds = [shlex.split(step) for step in _test_command(_readme()) if "mkdocs" in step]
    assert len(builds) == 1, builds
    words = builds[0]
    assert words[:2] == [".venv/bin/mkdocs", "build"] and "--strict" in words
    assert not {"-q", "--quiet", "-v", "--verbose"} & set(words)
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert config["strict"] is True
    assert config["validation"] == {"omitted_files": "warn", "absolute_links": "warn",
                                    "unrecognized_links": "warn", "anchors": "warn"}


def test_every_page_of_the_guide_is_in_nav_and_linked_from_the_readme() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = [next(iter(entry.values())) for entry in config["nav"]]
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(nav) == pages
    linked = {t.partition("#")[0] for t in LINK.findall(_readme())}
    assert {f"docs/{page}" for page in pages if page != "index.md"} <= linked


def test_the_settings_file_the_guide_quotes_is_the_one_the_notebook_loads() -> None:
    page = (DOCS / "outside-world.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```toml\n(.*?)^```$", page, re.M | re.S)
    quoted = [b for b in blocks if "[profiles.llm.desk]" in b]
    assert len(quoted) == 1
    file = (ROOT / "notebooks" / "examples" / "orders-desk.toml").read_text(encoding="utf-8")
    body = "\n".join(line for line in file.splitlines() if not line.startswith("#")).strip()
    assert body == quoted[0].strip()
    notebook = (ROOT / "notebooks" / "outside-world.ipynb").read_text(encoding="utf-8")
    assert "%config examples/orders-desk.toml" in notebook
