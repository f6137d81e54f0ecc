"""A helper entry whose module starts a thread at import: a zygote must refuse it (a
fork copies only the calling thread), and the pool spawns its helpers instead."""

from __future__ import annotations

import threading
import time

from actors.helper import serve_calls

threading.Thread(target=time.sleep, args=(300,), daemon=True).start()


def main() -> None:
    serve_calls()
