from signup import (
    CONFIRM_MISMATCH,
    PASSWORD_LENGTH,
    PASSWORD_MIX,
    USERNAME_CHARACTERS,
    USERNAME_LENGTH,
    validate_signup,
)


def test_a_valid_form_at_the_limits() -> None:
    form = {"username": "  Abc  ", "password": "Passw0rd", "confirm": "Passw0rd"}
    assert validate_signup(form) == {}
    long_name = {"username": "a" * 20, "password": "Longer1Pass", "confirm": "Longer1Pass"}
    assert validate_signup(long_name) == {}


def test_every_field_wrong_at_once() -> None:
    assert validate_signup({"username": "ab", "password": "short", "confirm": ""}) == {
        "username": USERNAME_LENGTH,
        "password": PASSWORD_LENGTH,
        "confirm": CONFIRM_MISMATCH,
    }
    assert validate_signup(
        {"username": "bad name!", "password": "alllowercase1", "confirm": "alllowercase1"}
    ) == {"username": USERNAME_CHARACTERS, "password": PASSWORD_MIX}
