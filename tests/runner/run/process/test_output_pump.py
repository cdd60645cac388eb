"""The child's output (issue 23, item 8): read in blocks off the child's path, and a log that
keeps the head and the tail with a count of what was dropped."""

import io
import os
import threading

from runner.run.process.supervision import OutputPump


def pump_of(data: bytes, head: int, tail: int, chunk: int = 65536) -> tuple[OutputPump, bytes]:
    read_end, write_end = os.pipe()

    def write() -> None:
        with os.fdopen(write_end, "wb", buffering=0) as out:
            for start in range(0, len(data), chunk):
                out.write(data[start:start + chunk])

    writer = threading.Thread(target=write)
    writer.start()
    log = io.BytesIO()
    # Unbuffered, as a forked child's output reaches the runner: read a byte at a time, a
    # child writing 100 MB took 74 s an iteration instead of 0.6 s.
    with os.fdopen(read_end, "rb", buffering=0) as stream:
        pump = OutputPump(stream, log, echo=False, head_bytes=head, tail_bytes=tail)
        pump.run()
    writer.join()
    return pump, log.getvalue()


def test_a_short_output_is_kept_whole():
    data = b"".join(b"line %d\n" % n for n in range(1000))
    pump, log = pump_of(data, head=1 << 20, tail=1 << 20)
    assert log == data and pump.dropped == 0 and pump.total == len(data)
    # All of it went to the head; the last line is still known (it read as "", and a
    # child that could not write its result gave no reason: issue 54).
    assert pump.last_line() == "line 999"


def test_a_long_output_keeps_its_head_and_tail_and_says_how_much_was_dropped():
    data = os.urandom(8 * 2**20).hex().encode()[:12 * 2**20] + b"\nthe last line\n"
    pump, log = pump_of(data, head=2**20, tail=2**20)
    dropped = len(data) - 2 * 2**20
    assert pump.total == len(data) and pump.dropped == dropped
    assert log.startswith(data[:2**20]) and log.endswith(data[-2**20:])
    marker = (f"\n[experiment-runner: {dropped} bytes of the child's output dropped here; the "
              f"log keeps the first {2**20} and the last {2**20} bytes of {len(data)}]\n").encode()
    assert log == data[:2**20] + marker + data[-2**20:]
    assert pump.last_line() == "the last line"


def test_100_mb_of_output_reach_a_bounded_log_in_blocks():
    data = (b"x" * 99 + b"\n") * (2**20)  # 100 MiB in lines of 100 bytes
    pump, log = pump_of(data, head=4 * 2**20, tail=4 * 2**20, chunk=4096)
    assert pump.total == len(data) and len(log) < 8 * 2**20 + 200
