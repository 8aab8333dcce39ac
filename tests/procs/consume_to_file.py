"""A consumer process for crash tests: appends each consumed body to a file, one per line.

Usage: python -m tests.procs.consume_to_file BOOTSTRAP GROUP TOPIC OUTFILE [DELAY_S]
Each line is flushed before the callback returns, so a line on disk means "consumed".
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from adapter.client import ConsumeStatus, PushConsumer


def main() -> None:
    bootstrap, group, topic, outfile = sys.argv[1:5]
    delay = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    out = open(outfile, "a", buffering=1)  # noqa: SIM115 - closed at exit
    lock = threading.Lock()

    def record(message) -> ConsumeStatus:
        if delay:
            time.sleep(delay)
        with lock:
            out.write(message.body.decode() + "\n")
            out.flush()
            os.fsync(out.fileno())
        return ConsumeStatus.CONSUME_SUCCESS

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    consumer = PushConsumer(group)
    consumer.set_name_server_address(bootstrap)
    consumer.set_thread_count(4)
    consumer.subscribe(topic, record)
    consumer.start()
    print("started", flush=True)
    stop.wait()
    consumer.shutdown()
    out.close()


if __name__ == "__main__":
    main()
