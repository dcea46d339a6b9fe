"""No tenant's names are another's: an idempotency key is stored scoped by tenant and command, a document's stream by tenant."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemolog.eventstore.catalogue_graph import document_stream
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.schema import MAX_STREAM_ID

#: Names in which a separator or an escape could make two scopes meet.
names = st.text(alphabet="ab/%2F@", min_size=1, max_size=8)
commands = st.text(alphabet="ab%2F", min_size=1, max_size=3)  # as the commands' own names ("add", "link", ...), never a "/"


@settings(max_examples=400, deadline=None)
@given(names, commands, names, names, commands, names)
def test_two_requests_share_a_stored_key_only_when_tenant_command_and_key_are_the_same(tenant, command, key, other_tenant, other_command, other_key):
    mine = CommandContext(tenant=tenant, idempotency_key=key).scoped_key(command)
    theirs = CommandContext(tenant=other_tenant, idempotency_key=other_key).scoped_key(other_command)
    assert (mine == theirs) == ((tenant, command, key) == (other_tenant, other_command, other_key)), (mine, theirs)


@settings(max_examples=400, deadline=None)
@given(names, st.integers(0, 30), names, names, st.integers(0, 30), names)
def test_a_key_used_before_a_drop_is_never_the_same_key_after_it(tenant, epoch, key, other_tenant, other_epoch, other_key):
    """``epoch``: the tenant's last drop (0: none); the digits are drawn so that ``%@2`` meets tenants holding ``%2``."""
    mine = CommandContext(tenant=tenant, idempotency_key=key).scoped_key("add", epoch=epoch)
    theirs = CommandContext(tenant=other_tenant, idempotency_key=other_key).scoped_key("add", epoch=other_epoch)
    assert (mine == theirs) == ((tenant, epoch, key) == (other_tenant, other_epoch, other_key)), (mine, theirs)


def test_the_stored_form_of_a_plain_tenants_key_is_unchanged():
    """A retry across an upgrade still finds the first request's key."""
    assert CommandContext(tenant="default", idempotency_key="a/b%c").scoped_key("add") == "default/add/a/b%c"
    assert CommandContext(tenant="a/add", idempotency_key="k").scoped_key("add") == "a%2Fadd/add/k"
    assert CommandContext(tenant="100%", idempotency_key="k").scoped_key("add") == "100%25/add/k"
    assert CommandContext(tenant="acme", idempotency_key="k").scoped_key("add", epoch=12) == "acme%@12/add/k"


#: Document ids as the commands take them: parts of letters, digits or . _ -, separated by /.
doc_ids = st.lists(st.text(alphabet="ab.", min_size=1, max_size=3).map(lambda part: "a" + part), min_size=1, max_size=3).map("/".join)
#: Tenants up to the log's bound (255), some holding enough / that their encoded part would pass it.
long_tenants = st.builds(lambda head, n: head + "/" * n, names, st.integers(0, 247))


@settings(max_examples=400, deadline=None)
@given(st.one_of(names, long_tenants), doc_ids, st.one_of(names, long_tenants), doc_ids)
def test_two_documents_share_a_stream_only_when_tenant_and_document_are_the_same(tenant, doc_id, other_tenant, other_doc_id):
    mine, theirs = document_stream(tenant, doc_id), document_stream(other_tenant, other_doc_id)
    assert (mine == theirs) == ((tenant, doc_id) == (other_tenant, other_doc_id)), (mine, theirs)
    assert len(mine) <= MAX_STREAM_ID


def test_the_document_stream_of_a_plain_tenant_is_unchanged():
    """A tenant without / or % reads and writes the streams its documents always had."""
    assert document_stream("acme", "kb/x.md") == "document-acme/kb/x.md"
    assert document_stream("a/b", "c") == "document-a%2Fb/c" and document_stream("a", "b/c") == "document-a/b/c"
