"""mjfast.names: the one wording of "no such name" and "unknown key" (STYLE.md, "One of each")."""

from __future__ import annotations

import pytest

from mjfast.names import (
    close_matches,
    listing,
    no_such_name,
    plural,
    suggestion,
    unknown,
    unknown_name,
)

JOINTS = ["hinge", "slide", "ball", "free"]


def test_a_name_message_says_what_was_asked_its_close_matches_and_what_exists() -> None:
    assert no_such_name("joint", "hing", JOINTS) == (
        "no joint named 'hing' (did you mean 'hinge'?); the model's joints: hinge, slide, ball, "
        "free")


def test_a_key_message_has_the_same_three_parts() -> None:
    assert unknown("unknown configuration key", "Kp", ["kd", "kp"], n=1,
                   exists="its keys are") == (
        "unknown configuration key 'Kp' (did you mean 'kp'?); its keys are: kd, kp")


def test_nothing_close_gives_no_hint_but_still_lists_what_exists() -> None:
    assert no_such_name("joint", "elbow", JOINTS) == (
        "no joint named 'elbow'; the model's joints: hinge, slide, ball, free")
    assert no_such_name("joint", "elbow", []) == "no joint named 'elbow'; the model's joints: none"


def test_text_after_the_name_comes_before_the_hint() -> None:
    assert unknown("no plugin type", "pkg/Clss", ["pkg/Class"], after=" is registered",
                   exists="available") == (
        "no plugin type 'pkg/Clss' is registered (did you mean 'pkg/Class'?); available: "
        "pkg/Class")


def test_unknown_name_is_a_key_error_with_that_message() -> None:
    error = unknown_name("body", "bal", ["ball", "box"], whose="the scene's")
    assert isinstance(error, KeyError)
    assert error.args == ("no body named 'bal' (did you mean 'ball'?); the scene's bodies: ball, "
                          "box",)


def test_a_case_only_difference_is_the_first_match_then_difflibs() -> None:
    assert close_matches("KP", ["kd", "kp"]) == ["kp"]  # difflib alone finds nothing
    assert close_matches("Hinge", ["Hing", "hinge"]) == ["hinge", "Hing"]
    assert close_matches("Kp", ["kd", "kp"], n=1) == ["kp"]
    assert close_matches("hing", JOINTS) == ["hinge"]
    assert close_matches("zzz", JOINTS) == []
    assert close_matches(3, ["3", "4"]) == ["3"]  # a non-str asked for is compared as its str


def test_the_cutoff_and_the_count_are_the_callers() -> None:
    assert close_matches("contrl_callback", ["control_callback"], cutoff=0.85) == [
        "control_callback"]
    assert close_matches("ctrl", ["control_callback"], cutoff=0.85) == []
    assert len(close_matches("ab", ["abc", "abd", "abe", "abf"], n=2)) == 2


@pytest.mark.parametrize(("matches", "text"), [
    ([], ""),
    (["a"], " (did you mean 'a'?)"),
    (["a", "b"], " (did you mean 'a' or 'b'?)"),
    (["a", "b", "c"], " (did you mean 'a', 'b' or 'c'?)"),
])
def test_suggestion_quotes_and_joins_the_matches(matches: list[str], text: str) -> None:
    assert suggestion(matches) == text


def test_a_long_listing_is_cut_with_the_count_left_out() -> None:
    names = [f"j{i:02d}" for i in range(25)]
    assert listing(names) == ", ".join(names[:20]) + " and 5 more"
    assert listing(names, limit=3) == "j00, j01, j02 and 22 more"
    assert listing(names[:3], limit=3) == "j00, j01, j02"
    assert listing([]) == "none"


@pytest.mark.parametrize(("noun", "nouns"), [
    ("joint", "joints"), ("body", "bodies"), ("equality", "equalities"), ("key", "keys"),
    ("plugin type", "plugin types"), ("keyframe", "keyframes"), ("class", "classes"),
])
def test_plural(noun: str, nouns: str) -> None:
    assert plural(noun) == nouns
