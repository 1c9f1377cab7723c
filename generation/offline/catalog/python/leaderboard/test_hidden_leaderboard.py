from leaderboard import podium, standings


def test_a_three_way_tie_below_the_winner() -> None:
    scores = {"Owls": 31, "Bees": 27, "Ants": 27, "Cats": 27, "Dodos": 12}
    assert standings(scores) == [
        (1, "Owls", 31),
        (2, "Ants", 27),
        (2, "Bees", 27),
        (2, "Cats", 27),
        (5, "Dodos", 12),
    ]
    assert podium(scores) == ["Owls", "Ants", "Bees", "Cats"]


def test_everyone_level() -> None:
    assert standings({"Zebras": 5, "Yaks": 5}) == [(1, "Yaks", 5), (1, "Zebras", 5)]
