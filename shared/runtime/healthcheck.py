"""`python -m shared.runtime.healthcheck SERVICE`: exit 0 when the service's /readyz is 200.

Used by compose healthchecks, so that the image needs no curl or wget.
"""

from __future__ import annotations

import os
import sys
import urllib.request

from shared.runtime.settings import DEFAULT_HTTP_PORTS


def main() -> int:
    service = sys.argv[1] if len(sys.argv) > 1 else ""
    port = os.environ.get("KSCHED_HTTP_PORT") or str(DEFAULT_HTTP_PORTS.get(service, 0))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return 0 if resp.status == 200 else 1
    except Exception as err:
        print(f"{service} not ready: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
