"""The tools: everything that serves the person at the keyboard, not the services.

The `ksched` CLI (cli/), the benchmarks and their reference results (bench/),
the local stack of servers and services (devstack), the publishing client, the
outside views of a running stack (observe, invariants), conformance replay, the
chaos and burst drills, and the synthetic and realistic objects they publish.

Import contract (tests/unit/test_import_contract.py): tools may import the
library (the rest of `shared`) and the services; no service and no library
module imports `shared.tools`.
"""
