"""Host code a test's allowlist grants: functions of "the user's own" that raise (issue 31 item 4)."""


def deep(n: int) -> int:
    """Call itself ``n`` times, then divide by zero."""
    if n == 0:
        return 1 // n
    return deep(n - 1)

