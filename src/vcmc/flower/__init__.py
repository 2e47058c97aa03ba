"""Flower adapters: silos as Flower SuperNodes (flwr 1.42 Message API, ``query`` messages).

The Flower app in ``flower_app/`` is a thin shim over this module, so that the code each silo runs is the
installed, versioned vcmc library its operator reviewed (docs/design.md §12.4).

Server side
    ``server_main(grid, context)`` (the ServerApp's ``@app.main()``): reads the run config (the same
    ``config_from_mapping`` as the CLI), waits for ``min-nodes`` SuperNodes, asks each for its name
    (``HelloRequest``), and calls ``vcmc.pipeline.run_vcmc`` with a ``FlowerTransport``: the algorithm is
    the one that runs in-process, so the same seed gives the same result. Its progress and warnings go to
    ``flwr log`` and ``out-dir/server.log`` (``vcmc.flower.oplog``); the run config's ``schema-path``
    names the results and writes ``schema.json``.

Client side
    ``client_handle(message, context)`` (every ClientApp query handler): loads the silo's data from its
    node config (``data-path``, optional ``schema-path``, ``silo-name``, disclosure limits) once per run,
    keeping them in ``context.state`` for the later messages (``vcmc.flower.node_data``), restores the
    run's state from ``context.state``, answers the request with ``LocalSilo.handle`` and stores the
    state back. Any exception becomes a Flower ``Error`` whose text is sanitised (no data values).

Why ``context.state`` for the silo's state: in deployment a fresh ClientApp process handles every
message, so the local partition and membership probabilities of the summarize round must be stored
somewhere for the later rounds (divergence, counts, assign). ``context.state`` is kept by the SuperNode,
on the silo's own host, persists across the messages of one run and is discarded with the run; the
alternative, files under a silo-owned directory, would outlive the run and need cleaning up. The state is
row-level (n_rows x local clusters) and never leaves the SuperNode.
"""
