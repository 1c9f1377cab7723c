import pytest

from server.settings import Settings, SettingsError, from_environment


def test_defaults_work_on_one_machine() -> None:
    settings = from_environment({})
    assert settings.database_url is None
    assert (settings.global_cap, settings.max_pending, settings.user_cap) == (40, 200, 3)
    assert settings.tick_seconds == 10
    assert settings.worker_name


def test_values_are_read_and_converted() -> None:
    settings = from_environment(
        {
            "WARMPOOL_GLOBAL_CAP": "5",
            "WARMPOOL_TICK_SECONDS": "0.5",
            "WARMPOOL_DOMAIN_MAP": "maps/x.yaml",
        }
    )
    assert (settings.global_cap, settings.tick_seconds, str(settings.domain_map)) == (
        5,
        0.5,
        "maps/x.yaml",
    )


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        (
            {"WARMPOOL_GLOBAL_CAP": "lots"},
            "WARMPOOL_GLOBAL_CAP='lots' is not valid: expected a whole number",
        ),
        (
            {"WARMPOOL_USER_CAP": "0"},
            "WARMPOOL_USER_CAP='0' is not valid: expected a whole number of at least 1",
        ),
        (
            {"WARMPOOL_TICK_SECONDS": "-1"},
            "WARMPOOL_TICK_SECONDS='-1' is not valid: expected a number of seconds",
        ),
        ({"WARMPOOL_DATABASE_URL": "mysql://x"}, "expected a postgresql:// URL"),
        (
            {"WARMPOOL_BATCH": "all"},
            "WARMPOOL_BATCH='all' is not valid: expected off, or replenish (the replenish lane's",
        ),
        (
            {"WARMPOOL_BATCH_SIZE": "50001"},
            "WARMPOOL_BATCH_SIZE='50001' is not valid: expected a whole number from 1 to 50000",
        ),
        ({"OPENAI_BASE_URL": "localhost:8080"}, "OPENAI_BASE_URL='localhost:8080' is not valid"),
        (
            {"WARMPOOL_REPLENISH_SHARE": "1"},
            "WARMPOOL_REPLENISH_SHARE='1' is not valid: expected a fraction strictly between 0 and 1",
        ),
        (
            {"WARMPOOL_REPLENISH_MAX_PER_PASS": "0"},
            "WARMPOOL_REPLENISH_MAX_PER_PASS='0' is not valid: expected a whole number of at least 1",
        ),
        (
            {"WARMPOOL_SECURE_COOKIES": "maybe"},
            "WARMPOOL_SECURE_COOKIES='maybe' is not valid: expected true (the session cookie goes "
            "over https only) or false (plain http too)",
        ),
        (
            {"WARMPOOL_SESSION_LIFETIME_SECONDS": "0"},
            "WARMPOOL_SESSION_LIFETIME_SECONDS='0' is not valid: expected a number of seconds",
        ),
        (
            {"WARMPOOL_METRICS_REFRESH_SECONDS": "-1"},
            "WARMPOOL_METRICS_REFRESH_SECONDS='-1' is not valid: expected a number of seconds, "
            "0 or more",
        ),
        (
            # A token's value is never shown, not even a bad one.
            {"WARMPOOL_METRICS_TOKEN": "short secret"},
            "WARMPOOL_METRICS_TOKEN=<hidden, 12 characters> is not valid: expected at least 16 "
            "printable ASCII characters without spaces",
        ),
        (
            {"WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS": "900"},
            "WARMPOOL_HEARTBEAT_TIMEOUT_SECONDS (900) must be below WARMPOOL_STUCK_AFTER_SECONDS (600)",
        ),
    ],
)
def test_a_bad_value_names_the_variable_and_what_is_wrong(
    environment: dict[str, str], message: str
) -> None:
    with pytest.raises(SettingsError) as raised:
        from_environment(environment)
    assert message in str(raised.value)


def test_reviewer_sessions_are_secure_and_last_twelve_hours_unless_told_otherwise() -> None:
    default = from_environment({})
    assert (default.secure_cookies, default.session_lifetime_seconds) == (True, 12 * 3600)
    told = from_environment(
        {"WARMPOOL_SECURE_COOKIES": "false", "WARMPOOL_SESSION_LIFETIME_SECONDS": "3600"}
    )
    assert (told.secure_cookies, told.session_lifetime_seconds) == (False, 3600)


def test_the_metrics_are_open_and_read_every_few_seconds_unless_set() -> None:
    default = from_environment({})
    assert (default.metrics_token, default.metrics_refresh_seconds) == (None, 5.0)
    token = "t0ken-of-32-characters-0123456789"
    chosen = from_environment(
        {"WARMPOOL_METRICS_TOKEN": token, "WARMPOOL_METRICS_REFRESH_SECONDS": "0"}
    )
    assert (chosen.metrics_token, chosen.metrics_refresh_seconds) == (token, 0)


def test_blank_means_default() -> None:
    assert from_environment({"WARMPOOL_GLOBAL_CAP": "  "}).global_cap == Settings().global_cap


def test_the_replenish_share_sizes_the_lane_in_the_cap_and_the_pending_limit() -> None:
    default = from_environment({})
    assert (default.replenish_cap, default.replenish_max_pending) == (20, 100)
    small = from_environment(
        {
            "WARMPOOL_REPLENISH_SHARE": "0.25",
            "WARMPOOL_GLOBAL_CAP": "2",
            "WARMPOOL_MAX_PENDING": "10",
        }
    )
    assert (small.replenish_cap, small.replenish_max_pending) == (1, 2), "at least one"
