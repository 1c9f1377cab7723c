"""Ranking quiz teams: standard competition ranking (1, 2, 2, 4), ties in name order."""

Row = tuple[int, str, int]  # rank, team, score


def standings(scores: dict[str, int]) -> list[Row]:
    ordered = sorted(scores.items(), key=lambda entry: (-entry[1], entry[0]))
    rows: list[Row] = []
    for position, (team, score) in enumerate(ordered, start=1):
        if rows and score == rows[-1][2]:
            rank = rows[-1][0]  # a tie shares the rank of the team above
        else:
            rank = position
        rows.append((rank, team, score))
    return rows


def podium(scores: dict[str, int]) -> list[str]:
    return [team for rank, team, _ in standings(scores) if rank <= 3]
