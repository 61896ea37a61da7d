"""One module per listener; :mod:`gateway.registry` discovers them.

Each public module here (a name not starting with ``_``) must define::

    LISTENER = ListenerSpec(name="nats", default_port=4222, transport="tcp", serve=serve_nats)

where ``serve(broker, cfg, conn_nursery, *, task_status)`` binds its socket(s),
calls ``task_status.started(bound_port)`` and then accepts until cancelled,
starting one task per connection in ``conn_nursery`` (STYLE.md section 3).
Helpers shared by several listeners go in ``_``-prefixed modules, which the
registry skips. Adding a listener never touches another listener or the
gateway's own modules: the port table, the config section
``[listeners.<name>]``, the ``--<name>-port`` flag and the ``FERRY_<NAME>_*``
variables all follow from the spec.
"""
