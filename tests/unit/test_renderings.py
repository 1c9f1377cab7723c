"""Renderings as a whole: names from the vocabulary in the identifier's style, numbered
renderings that are distinct and repeatable, and that rename names and nothing else (renaming
back gives every file as written), over every code mission of the catalog."""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generation.offline import catalog, saboteur
from generation.offline.catalog import CatalogMission
from generation.renderings import (
    Renderer,
    RenderingFailed,
    Sources,
    javascript,
    python,
    rename_prose,
    sql,
)
from generation.renderings.naming import Plan, candidates
from tests.support.rendered_pool import DOMAINS

CODE_MISSIONS = [mission for mission in catalog.load() if mission.language != "none"]
LANGUAGES = {"python": python, "javascript": javascript, "sql": sql}
WORDS = {"price": ("cost", "rate"), "line": ("row",), "entry": ("item",)}


def sources(mission: CatalogMission) -> Sources:
    sabotage = saboteur.sabotage(mission, seed=1, try_number=1)
    return Sources(
        gold_files=mission.gold_files,
        test_files=mission.test_files,
        sabotaged_files=sabotage.sabotaged_files,
        hidden_test_files=mission.hidden_test_files,
    )


def renderer(mission: CatalogMission) -> Renderer:
    return Renderer(sources(mission), language=mission.language, domain=DOMAINS[mission.language])


@functools.cache
def renderers(slug: str) -> tuple[Renderer, Sources]:
    """A mission's renderer and what it renders, made once for all the examples of a test."""
    mission = next(mission for mission in CODE_MISSIONS if mission.slug == slug)
    return renderer(mission), sources(mission)


@pytest.mark.parametrize(
    ("identifier", "expected"),
    [
        ("unit_price", ["unit_cost", "unit_rate"]),
        ("UNIT_PRICE", ["UNIT_COST", "UNIT_RATE"]),
        ("unitPrice", ["unitCost", "unitRate"]),
        ("LinePrice", ["LineCost", "LineRate", "RowPrice", "RowCost", "RowRate"]),
        ("_lines", ["_rows"]),
        ("entries", ["items"]),
        ("HTTPLine", ["HTTPRow"]),
        ("total", []),
    ],
)
def test_candidates_replace_words_from_the_vocabulary_in_the_identifiers_style(
    identifier: str, expected: list[str]
) -> None:
    assert candidates(identifier, WORDS) == expected


def test_every_number_of_a_plan_is_a_different_consistent_renaming() -> None:
    plan = Plan(
        ["price", "line", "entry", "total"],
        taken=["price", "line", "entry", "total", "rate"],
        words=WORDS,
        allowed=lambda name: True,
    )
    # `rate` is taken; `total` has no alternative; the rest keep their name or take one.
    assert plan.options == {"entry": ["item"], "line": ["row"], "price": ["cost"]}
    assert plan.count == 2 * 2 * 2 - 1
    renderings = [plan.renames(number) for number in range(plan.count)]
    assert all(renderings)  # the mission as written is not among them
    assert len({tuple(sorted(renames.items())) for renames in renderings}) == plan.count
    assert renderings == [plan.renames(number) for number in range(plan.count)]
    with pytest.raises(ValueError, match="outside"):
        plan.renames(plan.count)


def test_a_name_two_identifiers_could_take_goes_to_one_of_them_only() -> None:
    plan = Plan(
        ["entry", "line"],
        taken=[],
        words={"entry": ("row", "item"), "line": ("row",)},
        allowed=lambda name: True,
    )
    assert plan.options == {"entry": ["row", "item"]}


@pytest.mark.parametrize("mission", CODE_MISSIONS, ids=lambda mission: mission.slug)
def test_each_mission_has_many_renderings_and_no_two_show_the_same_files(
    mission: CatalogMission,
) -> None:
    made = renderer(mission)
    assert made.count > 1000
    numbers = [*range(50), *range(made.count - 50, made.count)]
    shown = set()
    for number in numbers:
        rendering = made.render(number)
        assert rendering.renames
        assert set(rendering.renames.values()).isdisjoint(rendering.renames)
        shown.add(tuple(sorted({**rendering.sabotaged_files, **rendering.test_files}.items())))
    assert len(shown) == len(numbers)
    assert made.render(7) == renderer(mission).render(7)  # the same number, the same files


@pytest.mark.parametrize("mission", CODE_MISSIONS, ids=lambda mission: mission.slug)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_renaming_a_rendering_back_gives_every_file_as_written(
    mission: CatalogMission, data: st.DataObject
) -> None:
    """Renames are one to one, no new name meets a name the files already use, and the rewrite
    keeps every other character: cheap enough for many renderings of each mission, beside the
    few that tests/integration/proof/test_renderings_proof.py runs in a sandbox."""
    made, written = renderers(mission.slug)
    rendering = made.render(data.draw(st.integers(0, made.count - 1), label="rendering"))
    back = {new: old for old, new in rendering.renames.items()}
    assert len(back) == len(rendering.renames)
    language = LANGUAGES[mission.language]
    for part in ("gold_files", "test_files", "sabotaged_files", "hidden_test_files"):
        for path, text in getattr(rendering, part).items():
            undone = language.rewrite(path, text, back) if language.is_source(path) else text
            assert undone == getattr(written, part)[path], f"{part} {path}"


@pytest.mark.parametrize("mission", CODE_MISSIONS, ids=lambda mission: mission.slug)
def test_a_rendering_changes_identifiers_only(mission: CatalogMission) -> None:
    made = renderer(mission)
    rendering = made.render(made.count // 2)
    for path, text in mission.test_files.items():
        rendered = rendering.test_files[path]
        words = [text.split(), rendered.split()]
        assert len(words[0]) == len(words[1]), f"{path}: the layout changed"
        changed = {(a, b) for a, b in itertools.zip_longest(*words) if a != b}
        assert changed, f"{path}: nothing renamed"


def test_prose_renames_code_spans_only() -> None:
    text = "Fix `cart_total(lines)`: the cart total of the lines is wrong; `total` stays."
    renames = {"cart_total": "basket_sum", "lines": "rows"}
    assert rename_prose(text, renames, language="python") == (
        "Fix `basket_sum(rows)`: the cart total of the lines is wrong; `total` stays."
    )
    assert rename_prose("`Reorder_List`", {"reorder_list": "restock"}, language="sql") == (
        "`restock`"
    )


def test_hidden_tests_are_renamed_with_the_code_and_unseen_names_are_kept() -> None:
    gold = {
        "cart.py": (
            "def cart_total(lines):\n    subtotal = sum(lines)\n    return subtotal\n\n"
            "def unit_price(price):\n    return price\n"
        )
    }
    sources = Sources(
        gold_files=gold,
        test_files={
            "test_cart.py": "from cart import cart_total\n\n"
            "def test_total():\n    assert cart_total([1]) == 1\n"
        },
        # The bug drops the helper: a candidate never sees `unit_price` or `price`.
        sabotaged_files={
            "cart.py": "def cart_total(lines):\n    subtotal = 0\n    return subtotal\n"
        },
        hidden_test_files={
            "test_hidden.py": "from cart import cart_total, unit_price\n\n"
            "def test_hidden():\n    line = 2\n"
            "    assert cart_total([line]) == unit_price(line)\n"
        },
    )
    made = Renderer(sources, language="python", domain="python-backend")
    rendering = next(
        rendering
        for rendering in map(made.render, range(made.count))
        if "cart_total" in rendering.renames
    )
    assert {"price", "unit_price", "line"}.isdisjoint(rendering.renames)
    new_total = rendering.renames["cart_total"]
    assert (
        f"from cart import {new_total}, unit_price" in rendering.hidden_test_files["test_hidden.py"]
    )
    assert f"def {new_total}(" in rendering.gold_files["cart.py"]
    assert f"def {new_total}(" in rendering.sabotaged_files["cart.py"]
    assert "def unit_price(price):" in rendering.gold_files["cart.py"]


def test_a_mission_that_cannot_be_rendered_says_why() -> None:
    broken = Sources(gold_files={"a.py": "def (:\n"}, test_files={}, sabotaged_files={})
    with pytest.raises(RenderingFailed, match=r"a\.py does not parse"):
        Renderer(broken, language="python", domain="python-backend")
    with pytest.raises(ValueError, match="no code to render"):
        Renderer(broken, language="none", domain="marketing-copy")
