"""Working memory kept within its capacity when concurrent writers leave it over: a log follower.

An add evicts the oldest entries beyond the capacity from working memory as
its process last caught up with the log (see
:mod:`mnemolog.eventstore.commands.working`). Two processes adding to one
tenant at the same moment (a server's worker processes, servers sharing a
PostgreSQL log) each decide without the other's add: each may see room, or
both evict the same oldest entry, and working memory is left over its
capacity. Checking at the append would make adds retry under load; instead
this policy follows the log, as the organizer does, and puts it right.

After each catch-up of its process (:meth:`WorkingCapacity.follow`, which
the service calls once its projections are caught up outside a command), it
reads the events after the position it last looked at that other processes
appended (the positions between its own store's appends, see
``EventStore.appended_here``) and that put entries in (``MemoryAdded``,
``WorkingMemoryRestored``). For each tenant they touched whose working
memory holds more than the capacity, it issues ``evict_beyond_capacity``:
the oldest entries beyond the capacity, evicted as an add evicts (a ``WorkingMemory`` item archived, its mentions unlinked), in
a ``WorkingMemoryEvicted`` whose reason is :data:`OVER_CAPACITY`, written by
:data:`ACTOR` with the triggering event as its cause, in a correlation of its
own (``revert`` undoes it; a revert restores no more than the capacity holds).

Every process follows the log so, and two of them may notice the same
excess. The eviction is appended expecting the version of the tenant's
working stream read before the catch-up it was decided on: the second one
fails (``ConcurrencyError``) rather than evict as many again, and is tried
once more on the caught-up working memory, which is within its capacity by
then (nothing written). An add of this process's own is decided on a log
that holds everything before it unless another process wrote in between,
and then that other process's append is looked at: its own appends alone
never need a look (nor does a copy of a log it appends, whose evictions come
with it).

It looks only at events recorded while it follows the log (``recorded_at``,
stamped by the appending process, not before the policy began): adds racing
beside it are. An import brings events recorded elsewhere, before, and their
evictions with them; appended a group of events at a time, a copy may hold
an add whose eviction is still to come, and a write of the policy's on its
working stream would both evict twice and make the rest of the import fail
its expected versions.

A process starts looking at the position its projections held when it
opened; the processes running when an append is made look at it. A tenant
left over its capacity by processes that all stopped before their next
catch-up stays so until its next add, which evicts down to the capacity.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.errors import ConcurrencyError, log_failure
from mnemolog.eventstore.recorder import utc_stamp

from ..graph.reads import working_memory

if TYPE_CHECKING:
    from ..service import MemoryService

log = logging.getLogger("mnemolog.working")

ACTOR = "working-memory"
OVER_CAPACITY = "over capacity after concurrent adds"  # the reason the policy's evictions record
ENTERING = ("MemoryAdded", "WorkingMemoryRestored")  # the events that put entries in working memory
ATTEMPTS = 3  # evictions tried per look at a tenant: another writer's change of its working memory in between fails one


class WorkingCapacity:
    """The policy; see the module docstring. ``after``: the position from which it follows the log."""

    def __init__(self, service: MemoryService, after: int):
        self.service = service
        self.capacity = service.working_capacity
        self.position = after  # the log up to here has been looked at
        self.since = utc_stamp()  # events recorded before this moment are no concurrent adds of processes beside it
        self.pending: dict[str, str] = {}  # tenant -> the event that put it over: an eviction that failed, tried again
        self._looking = threading.local()

    def follow(self) -> list[str]:
        """Evict, in every tenant that another process's appends since the last look put entries in, what its
        working memory holds beyond its capacity; the tenants evicted in. Called once the projections are caught
        up; a call made while this thread is already looking (the eviction's own command catches up) returns at
        once. A failure is logged, never raised (the caller's catch-up went well): the next look tries again."""
        if getattr(self._looking, "now", False):
            return []
        service = self.service
        with service.writer.lock:  # one look at a time in this process, and its evictions as the writer
            self._looking.now = True
            try:
                reached = service.runner.position(service.read_conn())  # every projection has applied the log up to here
                if reached > self.position:
                    for first, last in service.store.appended_here.others(self.position, reached):
                        self.pending.update(self._entered(first - 1, last))
                    self.position = reached
                return [tenant for tenant, cause in list(self.pending.items()) if self._keep(tenant, cause)]
            except Exception:
                log_failure(log, "looking for working memory over its capacity failed; the next catch-up looks again")
                return []
            finally:
                self._looking.now = False

    def _entered(self, after: int, until: int) -> dict[str, str]:
        """The tenants that events after ``after`` up to ``until``, recorded while this policy follows the log, put
        working-memory entries in, each with the last such event's id."""
        found: dict[str, str] = {}
        for rows in self.service.store.iter_rows(after, until=until, types=ENTERING):
            found.update((row.tenant, row.event_id) for row in rows if row.recorded_at >= self.since)
        return found

    def _keep(self, tenant: str, cause: str) -> bool:
        """Evict what the tenant's working memory holds beyond its capacity, if anything; whether it did. The tenant
        stays pending while the eviction fails, or another writer changed its working memory at every attempt."""
        evicted = None
        for _ in range(ATTEMPTS):
            if len(working_memory(self.service.read_conn(), tenant)) <= self.capacity:
                evicted = 0
                break
            evicted = self._evict(tenant, cause)
            if evicted is not None:
                break
        if evicted is not None:
            del self.pending[tenant]
        return bool(evicted)

    def _evict(self, tenant: str, cause: str) -> int | None:
        """One eviction of the oldest entries beyond the capacity: how many it evicted (0: none was beyond it on the
        caught-up working memory), or None when another writer changed the tenant's working memory after its version
        was read (that change may be the same eviction: the caller looks again)."""
        service = self.service
        version = service.store.stream_version(c.working_stream(tenant))  # before the catch-up the command runs on
        ctx = CommandContext(tenant=tenant, actor=ACTOR, causation_id=cause)
        try:
            result = service.run(service.memories.evict_beyond_capacity, ctx, reason=OVER_CAPACITY, expected_version=version)
        except ConcurrencyError:
            return None
        return int(result.data.get("evicted", 0))
