"""The one way mjfast says "no such name" and "unknown key" (STYLE.md, "One of each").

Owns the close-match search and the wording of every such refusal: what was asked for, its close
matches, then what exists, as in `no joint named 'hing' (did you mean 'hinge'?); the model's
joints: hinge, slide`. Callers own the lookup itself and the exception their contract raises.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

__all__ = [
    "close_matches",
    "listing",
    "no_such_name",
    "plural",
    "suggestion",
    "unknown",
    "unknown_name",
]

# How many known names a message lists before "and N more".
LISTED = 20


def close_matches(asked: object, known: Iterable[str], *, n: int = 3,
                  cutoff: float = 0.6) -> list[str]:
    """The names of `known` closest to `asked`, best first, at most `n`: one that differs only in
    case first (`Kp` for `kp`), then difflib's matches scoring at least `cutoff`."""
    text = str(asked)
    names = list(dict.fromkeys(str(name) for name in known))
    same = [name for name in names if name != text and name.lower() == text.lower()]
    close = difflib.get_close_matches(text, names, n=n, cutoff=cutoff)
    return list(dict.fromkeys(same + close))[:n]


def quoted(names: Sequence[str]) -> str:
    """`'a'`, `'a' or 'b'`, `'a', 'b' or 'c'`."""
    shown = [repr(str(name)) for name in names]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def suggestion(matches: Sequence[str]) -> str:
    """` (did you mean 'a' or 'b'?)` for matches already found, or nothing."""
    return f" (did you mean {quoted(matches)}?)" if matches else ""


def listing(names: Sequence[str], *, limit: int = LISTED) -> str:
    """`a, b, c`, the first `limit` of `names` and `and N more`, or `none`."""
    shown = ", ".join(str(name) for name in names[:limit]) or "none"
    more = len(names) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def plural(noun: str) -> str:
    """`joints`, `bodies`, `equalities`: the plural of a one-word English noun."""
    if noun.endswith("y") and noun[-2:-1] not in ("a", "e", "o", "u"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "x", "sh", "ch")) else "s")


def unknown(what: str, asked: object, known: Sequence[str], *, exists: str, after: str = "",
            section: str = "", n: int = 3, cutoff: float = 0.6, limit: int = LISTED) -> str:
    """`<what> <asked!r><after> (did you mean <close matches>?); <exists>: <known>`, e.g.
    `unknown configuration key 'Kp' (did you mean 'kp'?); its keys are: kd, kp`. `section`, the
    dotted path of the nested mapping whose keys `asked` and `known` are (`range.`), is shown
    before each of them but not compared."""
    matches = close_matches(asked, known, n=n, cutoff=cutoff)
    hint = suggestion([section + match for match in matches])
    return (f"{what} {section + str(asked)!r}{after}{hint}; {exists}: "
            f"{listing([section + str(name) for name in known], limit=limit)}")


def no_such_name(noun: str, asked: object, known: Sequence[str], *,
                 whose: str = "the model's", limit: int = LISTED) -> str:
    """`no joint named 'hing' (did you mean 'hinge'?); the model's joints: hinge, slide`."""
    return unknown(f"no {noun} named", asked, known, exists=f"{whose} {plural(noun)}",
                   limit=limit)


def unknown_name(noun: str, asked: object, known: Sequence[str], *,
                 whose: str = "the model's") -> KeyError:
    """The KeyError of a lookup by name that found nothing (`no_such_name`'s message)."""
    return KeyError(no_such_name(noun, asked, known, whose=whose))
