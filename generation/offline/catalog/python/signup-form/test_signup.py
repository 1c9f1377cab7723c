from signup import (
    CONFIRM_MISMATCH,
    PASSWORD_LENGTH,
    PASSWORD_MIX,
    USERNAME_CHARACTERS,
    USERNAME_LENGTH,
    validate_signup,
)


def form(username: str, password: str, confirm: str | None = None) -> dict[str, str]:
    return {"username": username, "password": password, "confirm": confirm or password}


def test_a_batch_of_new_members() -> None:
    forms = [
        form("ada", "Engine1843"),  # the shortest allowed name
        form("x" * 20, "Passw0rd"),  # the longest name and the shortest password
        form("al", "Turing1"),
        form("grace", "Cobol195", confirm="cobol195"),
        form("linus", "kernel1991"),
        form("margaret h", "Apollo11"),
    ]
    assert [validate_signup(f) for f in forms] == [
        {},
        {},
        {"username": USERNAME_LENGTH, "password": PASSWORD_LENGTH},
        {"confirm": CONFIRM_MISMATCH},
        {"password": PASSWORD_MIX},
        {"username": USERNAME_CHARACTERS},
    ]


def test_passwords_at_the_limits() -> None:
    forms = [
        form("  bob  ", "Abcdefg1"),  # 8 characters; spaces around the name do not count
        form("carol", "Abcdef1"),  # 7 characters
        form("dave", "ABCDEFGH"),  # no digit
        form("erin", "abcdefg1"),  # no upper-case letter
        form("frankfrankfrankfrank", "Abcdefg1", confirm="Abcdefg2"),  # 20 characters
        form("yo", "Zz9zzzzz"),
    ]
    assert [validate_signup(f) for f in forms] == [
        {},
        {"password": PASSWORD_LENGTH},
        {"password": PASSWORD_MIX},
        {"password": PASSWORD_MIX},
        {"confirm": CONFIRM_MISMATCH},
        {"username": USERNAME_LENGTH},
    ]


def test_everything_wrong_then_everything_right() -> None:
    assert validate_signup(form("a!", "Short12", confirm="Short123")) == {
        "username": USERNAME_LENGTH,
        "password": PASSWORD_LENGTH,
        "confirm": CONFIRM_MISMATCH,
    }
    assert validate_signup(form("not ok!", "nodigitsHere")) == {
        "username": USERNAME_CHARACTERS,
        "password": PASSWORD_MIX,
    }
    assert validate_signup(form("abc", "1a2b3c4D")) == {}
    assert validate_signup(form("z" * 20, "12345678Q")) == {}
    assert validate_signup(form("eve", "x1y2z3w4")) == {"password": PASSWORD_MIX}
