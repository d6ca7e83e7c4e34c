"""The PyPI client `durable-streams` against a Durable Streams server.

Usage: python check.py BASE_URL   (BASE_URL on loopback, e.g. http://127.0.0.1:4437)

Creates a stream, appends, reads it back (catch-up), tails it with long-poll
and receives an append made after the tail had caught up, then tails it with
SSE, receives an append, and checks that the SSE tail ends when the stream is
closed. Exits 0 when every step passes, 1 with a message otherwise. Every wait
is bounded by one overall deadline; nothing sleeps to synchronise.

Client 0.1.0 has no call that closes a stream, so the close is a plain POST
with `Stream-Closed: true` through httpx (the client's own HTTP library).
"""

from __future__ import annotations

import ipaddress
import queue
import sys
import threading
import time
import urllib.parse
import uuid

import httpx
from durable_streams import DurableStream, stream

OVERALL_TIMEOUT_S = 30.0


class CheckFailed(Exception):
    pass


def loopback_base(url: str) -> str:
    parsed = urllib.parse.urlsplit(url)
    host = parsed.hostname or ""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if parsed.scheme != "http" or not loopback:
        raise CheckFailed(f"{url} is not an http:// URL on loopback")
    return url.rstrip("/")


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self.end - time.monotonic())


def expect(what: str, got: object, want: object) -> None:
    if got != want:
        raise CheckFailed(f"{what}: got {got!r}, expected {want!r}")


def next_item(q: queue.Queue, deadline: Deadline, waiting_for: str):
    """The next item a tail thread put on `q`; an exception it put is raised."""
    try:
        item = q.get(timeout=deadline.left())
    except queue.Empty:
        raise CheckFailed(f"timed out waiting for {waiting_for}") from None
    if isinstance(item, BaseException):
        raise CheckFailed(f"{waiting_for}: the tail failed: {item!r}") from item
    return item


def start_tail(target) -> tuple[threading.Thread, queue.Queue]:
    """Runs `target(q)` in a daemon thread; whatever it raises goes on `q`."""
    q: queue.Queue = queue.Queue()

    def run() -> None:
        try:
            target(q)
        except BaseException as e:  # reported to the main thread
            q.put(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, q


def check(base: str) -> None:
    deadline = Deadline(OVERALL_TIMEOUT_S)
    url = f"{base}/v1/stream/apps-python-{uuid.uuid4().hex}"
    timeout = httpx.Timeout(10.0, read=OVERALL_TIMEOUT_S)

    # Create and append.
    handle = DurableStream.create(url, content_type="text/plain", timeout=timeout)
    first = handle.append("alpha;")
    second = handle.append("beta;")
    if not first.next_offset or not second.next_offset:
        raise CheckFailed(f"an append returned no offset: {first!r}, {second!r}")
    if not second.next_offset > first.next_offset:
        raise CheckFailed(
            f"offsets do not grow: {first.next_offset!r} then {second.next_offset!r}"
        )

    # Catch-up read: everything so far, then stop at the tail.
    with stream(url, offset="-1", live=False, timeout=timeout) as res:
        expect("catch-up read", res.read_text(), "alpha;beta;")
        expect("catch-up read's offset", res.offset, second.next_offset)
        expect("catch-up read is up to date", res.up_to_date, True)

    # Long-poll tail from the start: once it has caught up, an append made
    # after that must reach it through a waiting long-poll.
    stop_long_poll = threading.Event()

    def long_poll_tail(q: queue.Queue) -> None:
        with stream(url, offset="-1", live="long-poll", timeout=timeout) as res:
            text = ""
            for chunk in res.iter_text():
                text += chunk
                q.put(text)
                if stop_long_poll.is_set():
                    break

    _, lp = start_tail(long_poll_tail)
    seen = ""
    while seen != "alpha;beta;":
        seen = next_item(lp, deadline, "the long-poll tail's catch-up")
        if not "alpha;beta;".startswith(seen):
            raise CheckFailed(f"long-poll tail caught up with {seen!r}")
    stop_long_poll.set()
    third = handle.append("gamma;")
    while seen != "alpha;beta;gamma;":
        seen = next_item(lp, deadline, "the append through the long-poll tail")
        if not "alpha;beta;gamma;".startswith(seen):
            raise CheckFailed(f"long-poll tail read {seen!r}")

    # SSE tail from the start: catches up, receives an append, and ends when
    # the stream is closed.
    ended = object()

    def sse_tail(q: queue.Queue) -> None:
        with stream(url, offset="-1", live="sse", timeout=timeout) as res:
            for text in res.iter_text():
                q.put(text)
        q.put(ended)

    sse_thread, sse = start_tail(sse_tail)
    seen = ""
    while seen != "alpha;beta;gamma;":
        item = next_item(sse, deadline, "the SSE tail's catch-up")
        if item is ended:
            raise CheckFailed(f"the SSE tail ended after {seen!r}, before the close")
        seen += item
    handle.append("delta;")
    while seen != "alpha;beta;gamma;delta;":
        item = next_item(sse, deadline, "the append through the SSE tail")
        if item is ended:
            raise CheckFailed(f"the SSE tail ended after {seen!r}, before the close")
        seen += item
    with httpx.Client(timeout=timeout) as client:
        closed = client.post(
            url, headers={"Stream-Closed": "true", "Content-Type": "text/plain"}
        )
        if closed.status_code not in (200, 204):
            raise CheckFailed(
                f"closing the stream answered {closed.status_code}: {closed.text}"
            )
        item = next_item(sse, deadline, "the SSE tail to end after the close")
        if item is not ended:
            raise CheckFailed(f"the SSE tail read {item!r} after the close")
        sse_thread.join(deadline.left())
        head = client.head(url)
        expect("HEAD after the close: Stream-Closed", head.headers.get("stream-closed"), "true")
    expect("the tail offset after the close", head.headers.get("stream-next-offset") > third.next_offset, True)
    handle.close()


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: python check.py BASE_URL", file=sys.stderr)
        return 2
    try:
        check(loopback_base(sys.argv[1]))
    except CheckFailed as e:
        print(f"python: {e}", file=sys.stderr)
        return 1
    except Exception as e:  # a client error: say which and where
        print(f"python: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
