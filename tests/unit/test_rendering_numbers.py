"""The numbers a rendering job draws: free, the same for the same job, and each as far as the
vocabulary allows from the mission's renderings so far, so a fragment names its rendering."""

from __future__ import annotations

from generation.rendering_jobs import distant_numbers
from generation.renderings import Renderer, Sources

# Two renamable names: `prices` (two alternatives) and `total` (one).
BASKET = Sources(
    gold_files={"basket.py": "def total(prices):\n    return sum(prices)\n"},
    test_files={
        "test_basket.py": (
            "from basket import total\n\ndef test_two():\n    assert total([2, 3]) == 5\n"
        )
    },
    sabotaged_files={"basket.py": "def total(prices):\n    return sum(prices) + 1\n"},
)


def renderer() -> Renderer:
    return Renderer(BASKET, language="python", domain="python-backend")


def differences(one: dict[str, str], other: dict[str, str]) -> int:
    return sum(one.get(name) != other.get(name) for name in one.keys() | other.keys())


def test_each_rendering_is_the_farthest_from_its_closest_one() -> None:
    basket = renderer()
    assert basket.count == 5
    first, second = distant_numbers(basket, frozenset(), 2, seed=7)
    # The first renames every name: two away from the identity.
    assert basket.renames(first) == {"prices": basket.renames(first)["prices"], "total": "overall"}
    made = [{}, basket.renames(first)]

    def closest(number: int) -> int:
        return min(differences(basket.renames(number), other) for other in made)

    others = set(range(basket.count)) - {first, second}
    assert closest(second) >= max(closest(number) for number in others) >= 1


def test_numbers_are_free_the_same_for_a_job_and_run_out() -> None:
    basket = renderer()
    taken = frozenset(distant_numbers(basket, frozenset(), 2, seed=7))
    again = distant_numbers(basket, taken, 2, seed=8)
    assert not taken & set(again)
    assert distant_numbers(basket, taken, 2, seed=8) == again, "the same job draws the same"
    assert sorted(distant_numbers(basket, taken | set(again), 5, seed=9)) == sorted(
        set(range(basket.count)) - taken - set(again)
    ), "only what is left"
