"""The date groups of the chat list: "Today", "Yesterday", "Previous 7 days",
"Previous 30 days", then one group per month ("October 2026"), in local time."""

from __future__ import annotations

from datetime import date, datetime

TODAY = "Today"
YESTERDAY = "Yesterday"
WEEK = "Previous 7 days"
MONTH = "Previous 30 days"


def date_group(when: datetime, now: datetime) -> str:
    """The group of a chat last active at ``when``, seen at ``now`` (both local times).
    Calendar days count, not hours: 23:59 yesterday is "Yesterday" at 00:01 today."""
    days = (now.date() - when.date()).days
    if days <= 0:  # today, or a clock that was ahead when the chat was saved
        return TODAY
    if days == 1:
        return YESTERDAY
    if days <= 7:
        return WEEK
    if days <= 30:
        return MONTH
    return month_name(when.date())


def month_name(day: date) -> str:
    """ "October 2026" in English whatever the locale, like the other group names."""
    months = (
        "January February March April May June July August September October November December"
    ).split()
    return f"{months[day.month - 1]} {day.year}"


def group_of_timestamp(timestamp: float, now: datetime | None = None) -> str:
    """``date_group`` for a Unix time, read as local time."""
    return date_group(datetime.fromtimestamp(timestamp), now or datetime.now())


def headers(timestamps: list[float], now: datetime | None = None) -> list[str | None]:
    """For chats listed newest first: the group header to show above each one (None where
    the chat belongs to the same group as the one above it)."""
    now = now or datetime.now()
    shown: list[str | None] = []
    previous = None
    for timestamp in timestamps:
        group = group_of_timestamp(timestamp, now)
        shown.append(group if group != previous else None)
        previous = group
    return shown
