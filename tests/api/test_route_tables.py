"""The route registry: each route module declares a table, and ``create_app`` adds the listed tables, nothing else."""

from __future__ import annotations

import importlib
import pkgutil

import mnemolog.api
from mnemolog.api import app as app_module
from mnemolog.api.routing import RouteTable


def test_a_table_records_its_routes_in_order_with_their_metadata():
    routes = RouteTable()

    @routes.get("/a", scope="read", summary="a", query=(("x", "an x"),))
    async def a(request): ...

    @routes.patch("/b/{id}", scope="write", summary="b", request=dict)
    async def b(request): ...

    assert [(r.method, r.path, r.handler, r.scope, r.request, r.query) for r in routes] == [
        ("GET", "/a", a, "read", None, (("x", "an x"),)),
        ("PATCH", "/b/{id}", b, "write", dict, ()),
    ]


def test_every_route_module_is_listed():
    modules = [m.name for m in pkgutil.iter_modules(mnemolog.api.__path__) if m.name.startswith("routes_")]
    tables = [importlib.import_module(f"mnemolog.api.{name}").routes for name in modules]
    assert len(modules) >= 7
    assert {id(t) for t in tables} == {id(t) for t in app_module.ROUTE_TABLES}
    assert all(len(t) > 0 for t in tables)


def test_the_app_serves_exactly_the_listed_routes():
    app = app_module.create_app()
    served = {(r.method, r.resource.canonical) for r in app.router.routes() if r.method != "HEAD"}
    assert served == {(r.method, r.path) for r in app_module.ROUTES}
    assert len(app_module.ROUTES) == len(served)  # no route declared twice
    assert app[app_module.keys.routes_key] == app_module.ROUTES
