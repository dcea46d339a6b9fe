"""The log's guards: the triggers (and on PostgreSQL, the revoked privileges)
that keep its tables append-only.

Anyone holding the database file can drop or rewrite a trigger, and alembic
would not notice: the schema revision stays the same. :func:`check_guards`
compares what the database holds with the DDL of :mod:`.dialects` (``verify``
reports the difference), and :func:`restore_guards` puts back what is missing
or altered (``mnemolog migrate`` does, and says what it restored).
"""

from __future__ import annotations

from typing import Literal

import msgspec
from sqlalchemy import Connection, Engine, text

from . import dialects
from .schema import APPEND_ONLY_TABLES


class GuardProblem(msgspec.Struct, frozen=True, omit_defaults=True):
    """An append-only trigger that is not as the schema defines it, or (PostgreSQL)
    a privilege to rewrite a log table that the serving role holds."""

    table: str
    trigger: str
    problem: Literal["missing", "altered", "granted"]
    privilege: str = ""
    role: str = ""  # the role that holds ``privilege`` (PUBLIC: every role)

    def __str__(self) -> str:
        if self.problem == "granted":
            return f"role {self.role} holds {self.privilege} on {self.table}"
        return f"trigger {self.trigger} on {self.table} is {self.problem}"


def _normalised(sql: str) -> str:
    return " ".join(sql.split()).rstrip(";").strip()


def check_guards(conn: Connection) -> list[GuardProblem]:
    """Every append-only trigger that is missing, or whose definition differs from the DDL."""
    installed = dialects.installed_triggers(conn)
    problems: list[GuardProblem] = []
    for trigger in dialects.append_only_triggers(conn.dialect.name, APPEND_ONLY_TABLES):
        found = installed.get(trigger.name)
        if found is None:
            problems.append(GuardProblem(trigger.table, trigger.name, "missing"))
        elif found.table != trigger.table or (found.sql is not None and _normalised(found.sql) != _normalised(trigger.create)):
            problems.append(GuardProblem(trigger.table, trigger.name, "altered"))
    for table, privilege, role in dialects.held_privileges(conn, APPEND_ONLY_TABLES):
        problems.append(GuardProblem(table, "", "granted", privilege, role))
    return problems


def restore_guards(engine: Engine) -> list[GuardProblem]:
    """Recreate every missing or altered append-only trigger, in one transaction; what was restored."""
    with engine.connect() as conn:
        with conn.begin():
            problems = check_guards(conn)
            if not problems:
                return []
            wanted = {p.trigger for p in problems if p.problem != "granted"}
            if granted := {p.role for p in problems if p.problem == "granted"}:
                me = conn.execute(text("SELECT current_user")).scalar()
                roles = [conn.dialect.identifier_preparer.quote(role) for role in sorted(granted - {"PUBLIC", me})]
                for statement in dialects.revoke_ddl(conn.dialect.name, roles=roles):
                    conn.execute(text(statement))
            for statement in dialects.guard_setup_ddl(conn.dialect.name):
                conn.execute(text(statement))
            for trigger in dialects.append_only_triggers(conn.dialect.name, APPEND_ONLY_TABLES):
                if trigger.name in wanted:
                    conn.execute(text(trigger.drop))
                    conn.execute(text(trigger.create))
    return problems
