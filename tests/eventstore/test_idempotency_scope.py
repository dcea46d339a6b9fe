"""An idempotency key is stored scoped by tenant and command: two requests share a stored key only when all three are the same."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemolog.eventstore.commands import CommandContext

#: Names in which a separator or an escape could make two scopes meet.
names = st.text(alphabet="ab/%2F", min_size=1, max_size=8)
commands = st.text(alphabet="ab%2F", min_size=1, max_size=3)  # as the commands' own names ("add", "link", ...), never a "/"


@settings(max_examples=400, deadline=None)
@given(names, commands, names, names, commands, names)
def test_two_requests_share_a_stored_key_only_when_tenant_command_and_key_are_the_same(tenant, command, key, other_tenant, other_command, other_key):
    mine = CommandContext(tenant=tenant, idempotency_key=key).scoped_key(command)
    theirs = CommandContext(tenant=other_tenant, idempotency_key=other_key).scoped_key(other_command)
    assert (mine == theirs) == ((tenant, command, key) == (other_tenant, other_command, other_key)), (mine, theirs)


def test_the_stored_form_of_a_plain_tenants_key_is_unchanged():
    """A retry across an upgrade still finds the first request's key."""
    assert CommandContext(tenant="default", idempotency_key="a/b%c").scoped_key("add") == "default/add/a/b%c"
    assert CommandContext(tenant="a/add", idempotency_key="k").scoped_key("add") == "a%2Fadd/add/k"
    assert CommandContext(tenant="100%", idempotency_key="k").scoped_key("add") == "100%25/add/k"
