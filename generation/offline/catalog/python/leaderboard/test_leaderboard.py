from leaderboard import podium, standings


def test_a_tie_for_second_place() -> None:
    scores = {"Quizzly Bears": 38, "The Know-Alls": 45, "Les Quizerables": 38, "Trivia Newton": 30}
    assert standings(scores) == [
        (1, "The Know-Alls", 45),
        (2, "Les Quizerables", 38),
        (2, "Quizzly Bears", 38),
        (4, "Trivia Newton", 30),
    ]


def test_a_three_way_tie_at_the_top() -> None:
    scores = {"Team C": 50, "Team A": 50, "Team D": 41, "Team B": 50, "Team E": 12}
    assert standings(scores) == [
        (1, "Team A", 50),
        (1, "Team B", 50),
        (1, "Team C", 50),
        (4, "Team D", 41),
        (5, "Team E", 12),
    ]
    assert podium(scores) == ["Team A", "Team B", "Team C"]


def test_the_podium_grows_with_ties_for_third() -> None:
    scores = {"Owls": 22, "Foxes": 30, "Badgers": 22, "Hares": 25, "Stoats": 9}
    assert podium(scores) == ["Foxes", "Hares", "Badgers", "Owls"]
    assert [rank for rank, _, _ in standings(scores)] == [1, 2, 3, 3, 5]
