"""A 5.x SimpleConsumer process for crash tests: receives one message, prints its id and
attempt, and holds it without acking until it is killed.

Usage: python -m tests.procs.simple_receive_and_hold BOOTSTRAP GROUP TOPIC INVISIBLE_S
"""

from __future__ import annotations

import sys
import threading

from adapter.v5 import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer


def main() -> None:
    bootstrap, group, topic, invisible = sys.argv[1:5]
    config = ClientConfiguration(bootstrap, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, 2, lock_duration=15)
    consumer.startup()
    print("started", flush=True)
    while True:
        received = consumer.receive(1, float(invisible))
        if received:
            message = received[0]
            print(f"holding {message.message_id} {message.delivery_attempt}", flush=True)
            threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main()
