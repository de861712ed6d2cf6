"""Near misses: which known word a misspelled key meant (``did you mean 'else'?``).

One rule for every place a key is looked up by name and not found: a fragment's commands
(:mod:`.fragments.kind`), a command's fields (:mod:`.fragments.parser`), the settings
(:mod:`.settings`) and the kernel's magics (:func:`near_misses`, several at once). A key is a near
miss of a word when it is the word in another case, the same letters in another order (``fro`` →
``for``), or close by ``difflib``'s ratio (at least :data:`CUTOFF`); a key far longer than every
word is none (``difflib`` on a 10-million-character key takes seconds).

:func:`words_at` names the words a pydantic model accepts at a location of its input, so an
``extra_forbidden`` error of a nested model (``inputs[0].nmae``, ``profiles.llm.mine.scirpt``) can say
what was meant.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel

#: ``difflib.SequenceMatcher`` ratio from which a key is a near miss of a word, a heuristic and not a bound
#: (``vars``/``var`` 0.86, ``retrun``/``return`` 0.83, ``onEror``/``onError`` 0.92; ``tasks``/``ask`` 0.75 is
#: not one).
CUTOFF = 0.8


def near_misses(key: str, words: Iterable[str], n: int = 1) -> list[str]:
    """The (at most ``n``) words of ``words`` that ``key`` is a near miss of (see the module doc), the
    likeliest first: same letters before close by ratio; ``[]`` also when ``key`` is itself one of the
    words, or not text. Used for fragments, settings and the kernel's magics alike."""
    if not isinstance(key, str):
        return []
    known = sorted(w for w in words if isinstance(w, str))
    if not known or key in known or len(key) > 2 * max(map(len, known)):
        return []  # far longer than any word: no ratio reaches CUTOFF
    same = [word for word in known
            if key.lower() == word.lower() or (len(key) > 2 and sorted(key.lower()) == sorted(word.lower()))]
    close = difflib.get_close_matches(key, known, n=n, cutoff=CUTOFF)
    return list(dict.fromkeys([*same, *close]))[:n]


def closest(key: str, words: Iterable[str]) -> str | None:
    """The word of ``words`` that ``key`` is a near miss of (see the module doc), or ``None`` (also when
    ``key`` is itself one of the words, or not text)."""
    found = near_misses(key, words)
    return found[0] if found else None


def did_you_mean(key: str, words: Iterable[str]) -> str:
    """`` (did you mean 'else'?)`` when ``key`` is a near miss of one of ``words``, else ``""``."""
    meant = closest(key, words)
    return f" (did you mean {meant!r}?)" if meant is not None else ""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation may hold directly (``Model | None``, ``dict[str, Model]``,
    ``list[Model]``, ``Annotated[...]``), outermost first."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def _step(annotation: Any, part: str | int) -> Any:
    """The annotation of what ``part`` (a field name, a key or an index) reads from a value of ``annotation``."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _step(typing.get_args(annotation)[0], part)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                found = _step(arg, part)
                if found is not None:
                    return found
        return None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if not isinstance(part, str):
            return None
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    args = typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset, Sequence) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def words_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The field names (and aliases) ``model`` accepts in the object at ``loc``, the location of an
    ``extra_forbidden`` error without its last part (the unknown key); ``[]`` when it cannot tell."""
    annotation: Any = model
    for part in loc:
        if isinstance(part, str) and not part.replace("_", "").replace("-", "").isalnum():
            continue  # a union member's tag in a pydantic location, not a key of the input
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    words: list[str] = []
    for found in _models_in(annotation):
        for name, info in found.model_fields.items():
            words.append(info.alias or name)
    return words
