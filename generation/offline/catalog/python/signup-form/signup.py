"""Validating the forum's sign-up form."""

USERNAME_LENGTH = "must be 3 to 20 characters"
USERNAME_CHARACTERS = "may contain only letters and digits"
PASSWORD_LENGTH = "must be at least 8 characters"
PASSWORD_MIX = "needs an upper-case letter and a digit"
CONFIRM_MISMATCH = "does not match the password"


def validate_signup(form: dict[str, str]) -> dict[str, str]:
    errors = {}
    username = form.get("username", "").strip()
    if not 3 <= len(username) <= 20:
        errors["username"] = USERNAME_LENGTH
    elif not username.isalnum():
        errors["username"] = USERNAME_CHARACTERS
    password = form.get("password", "")
    if len(password) < 8:
        errors["password"] = PASSWORD_LENGTH
    elif password.lower() == password or not any(c.isdigit() for c in password):
        errors["password"] = PASSWORD_MIX
    if form.get("confirm") != password:
        errors["confirm"] = CONFIRM_MISMATCH
    return errors
