import fnmatch

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.catalog.policy import Rules, skeleton

names = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
simple = st.text(alphabet="abcdefgh_-*?", min_size=1, max_size=10)

SECRET = Rules(allow=("*",), deny=("docs__secret_*",), separator="__")


@pytest.mark.parametrize(
    "spelling",
    [
        "docs__secret_plan",
        "docs__SECRET_plan",  # case
        "Docs__Secret_Plan",
        " docs__secret_plan",  # whitespace
        "docs__secret_plan ",
        "docs__ secret_plan",
        "docs__secret\u200b_plan",  # zero-width space
        "docs__secret\u00a0_plan",  # no-break space
        "docs__\u0455ecret_plan",  # Cyrillic dze looks like s
        "docs__s\u0435cret_plan",  # Cyrillic ie looks like e
        "d\u03bfcs__secret_plan",  # Greek omicron looks like o
        "docs__\uff53ecret_plan",  # fullwidth s
        "docs__se\u0301cret_plan",  # combining accent
        "docs__se\u03f2ret_plan",  # Greek lunate sigma looks like c (NFKC would make it a final sigma)
        "docs__\ua731ecret_plan",  # Latin small capital s
        "docs__secre\u0442_plan",  # Cyrillic te: the data maps it to a small capital T, not to t
        "docs__secre\u1d1b_plan",  # that small capital T
        "docs__\u0282ecret_plan",  # s with hook
        "docs__sec\u0433et_plan",  # Cyrillic ghe looks like r
        "docs__secret\u3164_plan",  # Hangul filler (default-ignorable)
        "docs__secret_\u115fplan",  # Hangul choseong filler
        "docs__secret\u2800_plan",  # braille blank
        "docs__secret\u180e_plan",  # Mongolian vowel separator (default-ignorable, format)
        "docs__secret_p\u04cfan",  # Cyrillic palochka looks like l
        "docs____secret_plan",  # a second separator
        "docs______secret_plan",
    ],
)
def test_deny_cannot_be_bypassed_by_spelling(spelling: str) -> None:
    assert not SECRET.allows(spelling)


@pytest.mark.parametrize("spelling", ["docs__\ua730inance", "docs__fi\u0274ance", "docs__\u1da0inance"])
def test_small_capitals_outside_the_confusables_data_fold_to_their_letter(spelling: str) -> None:
    """ꜰ and ɴ are in no confusables entry: found by their Unicode names (and ᶠ, a modifier f, by NFKC)."""
    assert not Rules(deny=("docs__finance",), separator="__").allows(spelling)


def test_unrelated_names_stay_visible() -> None:
    assert SECRET.allows("docs__public")
    assert SECRET.allows("docs__secretary")  # the glob needs "secret_"


def test_allow_is_exact_and_deny_wins() -> None:
    rules = Rules(allow=("docs__*",), deny=("docs__draft_*",), separator="__")
    assert rules.allows("docs__guide")
    assert not rules.allows("DOCS__guide")  # allow does not fold case: nothing is shown by accident
    assert not rules.allows("other__guide")
    assert not rules.allows("docs__draft_1")
    assert not Rules(allow=()).allows("anything")


@given(names, st.lists(simple, max_size=4), st.lists(simple, max_size=4))
def test_deny_wins_over_any_allow(name: str, allow: list[str], deny: list[str]) -> None:
    rules = Rules(allow=tuple(allow), deny=tuple(deny))
    if any(fnmatch.fnmatchcase(name, p) for p in deny):
        assert not rules.allows(name)
    if rules.allows(name):
        assert any(fnmatch.fnmatchcase(name, p) for p in allow)


@given(names)
def test_exact_deny_of_a_name_hides_every_variant_with_the_same_skeleton(name: str) -> None:
    rules = Rules(deny=(name.replace("[", "[[]").replace("*", "[*]").replace("?", "[?]"),))
    assert not rules.allows(name)
    assert not rules.allows(name.upper())
    assert not rules.allows(f" {name}\u200b")


@given(names)
def test_skeleton_is_idempotent(name: str) -> None:
    assert skeleton(skeleton(name, "__"), "__") == skeleton(name, "__")
