"""Child-process drivers of the C++ client (PyPI ``rocketmq`` 0.4.4) for the broker tests.

Each driver runs in its own Python process (``start``/``run``), so the native library can only fail
its process, never hang pytest. Drivers write what happened as JSON lines to an output file, one
line per event, flushed at once, so a test can read progress while the driver runs and after it
was killed. ``HOME`` points at a temporary directory: the client writes its logs under ~/logs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tests.support.components import missing

HAVE_CLIENT = missing("cpp") is None

DRIVER = textwrap.dedent(
    r"""
    import json, os, random, sys, time
    from rocketmq.client import Producer, PushConsumer, Message, RecvMessage
    from rocketmq.ffi import dll

    cmd = json.loads(sys.argv[1])
    out = open(cmd["out"], "a", buffering=1)
    stop = cmd.get("stop")

    def emit(**event):
        out.write(json.dumps(event) + "\n")

    def stopped():
        return stop is not None and os.path.exists(stop)

    def message(topic, key, body, tags="T"):
        m = Message(topic)
        m.set_keys(key)
        m.set_tags(tags)
        m.set_body(body)
        return m

    if cmd["op"] == "produce":  # sync sends of the given keys (user properties p00.. per key), round robin
        p = Producer(cmd.get("group", "PG_DRIVER"))
        p.set_namesrv_addr(cmd["namesrv"])
        p.start()
        previous = None
        for key in cmd["keys"]:
            if cmd.get("after") and previous is not None:  # one at a time: wait until it was consumed
                deadline = time.time() + 30
                while time.time() < deadline and f'"key": "{previous}"' not in open(cmd["after"]).read():
                    time.sleep(0.05)
            previous = key
            m = message(cmd["topic"], key, "body-" + key)
            for j in range(cmd.get("user_properties", {}).get(key, 0)):
                m.set_property("p%02d" % j, "v")
            if cmd.get("delay"):
                m.set_delay_time_level(cmd["delay"])
            for attempt in range(6):
                try:
                    r = p.send_sync(m)
                    break
                except Exception as exc:  # the route look-up timed out on a loaded machine: the
                    # client does not retry it itself; only before the first ack, a few times
                    if previous != cmd["keys"][0] or "No route info" not in str(exc) or attempt == 5:
                        raise
                    emit(retry=str(exc)[:200])
                    time.sleep(1)
            emit(key=key, status=int(r.status), id=r.msg_id)
        emit(closing=True)  # every send answered: what follows is the client's own shutdown
        p.shutdown()
        emit(done=True)

    elif cmd["op"] == "batch":  # one send_batch of the given keys, bodies of the given size
        p = Producer(cmd.get("group", "PG_BATCH"))
        p.set_namesrv_addr(cmd["namesrv"])
        p.start()
        r = p.send_batch([message(cmd["topic"], k, (k + ":").ljust(cmd["size"], "b")) for k in cmd["keys"]])
        emit(status=int(r.status), offset=r.offset)
        emit(closing=True)
        p.shutdown()
        emit(done=True)

    elif cmd["op"] == "load":  # sync sends until the stop file exists; every ack is one line
        p = Producer(cmd.get("group", "PG_LOAD"))
        p.set_namesrv_addr(cmd["namesrv"])
        p.set_timeout(cmd.get("timeout_ms", 3000))
        p.start()
        rnd = random.Random(cmd.get("seed", 1))
        seq = 0
        while not stopped():
            key = f"{cmd['prefix']}{seq}"
            seq += 1
            body = (key + ":").ljust(rnd.randrange(cmd.get("min", 100), cmd.get("max", 2000)), "x")
            sent_at = time.monotonic()
            try:
                if cmd.get("shards"):  # orderly: the sequence number picks the queue (hash of it)
                    r = p.send_orderly(message(cmd["topic"], key, body), seq % cmd["shards"])
                else:
                    r = p.send_sync(message(cmd["topic"], key, body))
            except Exception as exc:  # how long it took tells a timeout from a refusal
                took = round(time.monotonic() - sent_at, 3)
                emit(key=key, error=type(exc).__name__, took=took, text=str(exc)[:300])
                time.sleep(0.02)
                continue
            if int(r.status) == 0:
                emit(key=key, id=r.msg_id, offset=r.offset, t=time.time())
            else:
                emit(key=key, status=int(r.status))
        p.shutdown()
        emit(done=True)

    elif cmd["op"] == "consume":  # push consumer until the stop file exists
        fail = set(cmd.get("fail", []))
        c = PushConsumer(cmd["group"], orderly=cmd.get("orderly", False))
        c.set_namesrv_addr(cmd["namesrv"])
        if cmd.get("instance"):
            c.set_instance_name(cmd["instance"])
        c.set_thread_count(cmd.get("threads", 2))
        # one message per callback: a RECONSUME_LATER sends back the whole batch the C API was given
        c.set_message_batch_max_size(1)

        def on_message(consumer, handle):
            msg = RecvMessage(handle)
            key = msg.keys.decode()
            emit(key=key, topic=msg.topic, queue=msg.queue_id, offset=msg.queue_offset,
                 times=msg.reconsume_times, id=msg.id, len=len(msg.body),
                 born=msg.born_timestamp, stored=msg.store_timestamp)
            if key in fail and msg.reconsume_times < cmd.get("fail_times", 1):
                return 1  # RECONSUME_LATER
            return 0  # CONSUME_SUCCESS

        dll.Subscribe(c._handle, cmd["topic"].encode(), cmd.get("expression", "*").encode())
        c._register_callback(on_message)
        c.start()
        emit(started=True)
        while not stopped():
            time.sleep(0.05)
        time.sleep(cmd.get("linger", 0.5))
        c.shutdown()
        emit(done=True)
    """
)


class Driver:
    """One driver process; ``events()`` reads what it wrote so far."""

    def __init__(self, tmp: Path, name: str, cmd: dict):
        self.out = tmp / f"{name}.jsonl"
        self.stop_file = tmp / f"{name}.stop"
        self.home = tmp / "home"
        self.home.mkdir(exist_ok=True)
        script = tmp / "driver.py"
        if not script.exists():
            script.write_text(DRIVER)
        self.out.write_text("")
        full = {**cmd, "out": str(self.out), "stop": str(self.stop_file)}
        self.log = open(tmp / f"{name}.log", "w")  # noqa: SIM115 - kept open for the child
        self.proc = subprocess.Popen(
            [sys.executable, str(script), json.dumps(full)],
            cwd=tmp,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HOME": str(self.home)},
        )

    def events(self) -> list[dict]:
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip().endswith("}")]

    def wait_for(self, predicate, timeout: float, what: str) -> list[dict]:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            events = self.events()
            if predicate(events):
                return events
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{what}: not seen within {timeout:g} s; {self.tail()}")

    def first_ack_after(self, since: float, timeout: float, what: str) -> float:
        """Seconds from ``since`` (a ``time.time()``) to the first send this ``load`` driver saw
        acknowledged after it (its events' ``t``)."""
        events = self.wait_for(lambda ev: any(e.get("t", 0) > since for e in ev), timeout, what)
        return min(e["t"] for e in events if e.get("t", 0) > since) - since

    def stop(self, timeout: float = 30.0) -> list[dict]:
        self.stop_file.touch()
        return self.finish(timeout, "driver did not stop")

    def finish(self, timeout: float, failure: str) -> list[dict]:
        """Wait for the driver to end and return its events; killed and ``failure`` past ``timeout``."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{failure}: {self.tail()}") from None
        finally:
            self.log.close()
        return self.events()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def tail(self) -> str:
        """The end of the driver's output, its last events and the end of the C++ client's own log."""
        return (Path(self.log.name).read_text()[-1500:] if Path(self.log.name).exists() else "") + (
            f"{self.events()[-5:]}{self.client_log()}"
        )

    def client_log(self, lines: int = 8) -> str:
        """The last ``lines`` of the log the C++ client of this process writes under ``~/logs``."""
        path = self.home / "logs" / "rocketmq-cpp" / f"{self.proc.pid}_rocketmq-cpp.log.0"
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\nthe C++ client's log ends:\n" + "\n".join(text)


def start_consumer(tmp: Path, name: str, cmd: dict, timeout: float = 30.0, attempts: int = 2) -> Driver:
    """A ``consume`` driver whose consumer has started. The C++ client's ``start`` was seen to hang
    (once in many runs, nothing in its log past its first lines): such a driver is killed, its
    tail kept, and another one started; an AssertionError with every tail when none starts."""
    tails = []
    for attempt in range(attempts):
        driver = Driver(tmp, name if attempt == 0 else f"{name}-{attempt}", cmd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and driver.proc.poll() is None:
            if any(e.get("started") for e in driver.events()):
                return driver
            time.sleep(0.1)
        tails.append(driver.tail())
        driver.kill()
    raise AssertionError(f"no C++ consumer started within {timeout:g} s, {attempts} tries: {tails}")


def run_driver(tmp: Path, name: str, cmd: dict, timeout: float = 60.0) -> list[dict]:
    """Run a driver that ends by itself (``produce``) and return its events."""
    driver = Driver(tmp, name, cmd)
    events = driver.finish(timeout, f"driver {name} timed out")
    if events and events[-1].get("closing") and "boost::thread_interrupted" in driver.tail():
        # the C++ client (0.4.4's librocketmq) sometimes aborts in its own shutdown, a thread
        # interrupted while it stops: every send had been answered, which is what the tests use
        return events[:-1]
    if not events or not events[-1].get("done"):
        raise AssertionError(f"driver {name} failed: {driver.tail()}")
    return [e for e in events if not e.get("closing")]


def warmed_consumer(tmp: Path, namesrv: str, topic: str, group: str, **more: object) -> Driver:
    """A push consumer of ``group`` on ``topic`` that has received a first message, ``warm`` (sent
    before it starts, which creates the topic): the route is known and the rebalance done."""
    run_driver(tmp, "warm", {"op": "produce", "namesrv": namesrv, "topic": topic, "keys": ["warm"]})
    cmd = {"op": "consume", "namesrv": namesrv, "group": group, "topic": topic, **more}
    consumer = start_consumer(tmp, "consume", cmd)
    try:
        consumer.wait_for(lambda ev: any(e.get("key") == "warm" for e in ev), 60, "the first message")
    except BaseException:
        consumer.stop()
        raise
    return consumer
