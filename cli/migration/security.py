"""ACLs and SCRAM users.

ACLs: every binding DescribeAcls returns is created on the target (CreateAcls); a source
without an authorizer (SECURITY_DISABLED) has none to move.

SCRAM users: Kafka's protocol never reveals a credential (DescribeUserScramCredentials gives
mechanisms and iteration counts only), and AlterUserScramCredentials takes a salted password,
which a broker does not keep (only StoredKey and ServerKey, RFC 5802). So credentials cannot
be moved as stored; each user is listed to recreate, or recreated from `--user-passwords FILE`
(`name=password` lines) with the same mechanisms and iteration counts.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from cli.migration.report import CREATED
from cli.migration.report import SKIPPED
from cli.migration.report import TODO
from cli.migration.report import Report
from client.admin import Admin
from client.errors import KafkaError
from client.users import describe_users
from client.users import upsert_user


async def migrate_acls(src: Admin, dst: Admin | None, report: Report) -> None:
    try:
        bindings = await src.describe_acls()
    except KafkaError as e:
        if e.error_code == ErrorCode.security_disabled:
            report.add("acls", "-", SKIPPED, "the source has no authorizer")
            return
        if e.error_code == ErrorCode.cluster_authorization_failed:  # no DESCRIBE on its cluster
            report.add("acls", "-", SKIPPED, f"the source refused DescribeAcls: {e}")
            return
        raise
    if not bindings:
        report.add("acls", "-", SKIPPED, "the source has none")
        return
    if dst is None:
        report.add("acls", "-", "would create", f"{len(bindings)} bindings")
        return
    try:
        await dst.create_acls(bindings)
    except KafkaError as e:
        report.add("acls", "-", SKIPPED, f"the target refused them: {e}")
        return
    report.add("acls", "-", CREATED, f"{len(bindings)} bindings")


async def migrate_users(
    src: Admin, dst: Admin | None, passwords: dict[str, str], report: Report
) -> None:
    try:
        users = await describe_users(src.cluster)
    except KafkaError as e:
        report.add("user", "-", SKIPPED, f"the source lists no SCRAM users: {e}")
        return
    for name, mechanisms in sorted(users.items()):
        if isinstance(mechanisms, KafkaError):
            report.add("user", name, SKIPPED, str(mechanisms))
            continue
        described = ", ".join(f"{m} (iterations {i})" for m, i in sorted(mechanisms.items()))
        password = passwords.get(name)
        if password is None or dst is None:
            report.add("user", name, TODO, f"recreate on the target: {described}")
            continue
        try:
            for mechanism, iterations in mechanisms.items():
                await upsert_user(dst.cluster, name, mechanism, password, iterations)
        except KafkaError as e:
            report.add("user", name, SKIPPED, f"the target refused it: {e}")
            continue
        report.add("user", name, CREATED, described)
