"""The asyncio remoting client over real loopback sockets, against a small asyncio test server.

The server (below) speaks the protocol with the same codec, frames by hand where it must misbehave,
and answers by request code: echo, delayed answers, a server-to-client request, abrupt close, an
oversized frame (protocol.md A.1, A.6, B.5).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time

import pytest

from rmqcli.errors import BrokerError, NetworkError, UsageError
from rmqcli.remoting import headers as hd
from rmqcli.remoting.client import RemotingClient, SyncClient, expect, parse_address
from rmqcli.remoting.codec import FrameDecoder, ProtocolError, RemotingCommand, decode, encode
from rmqcli.remoting.codes import RequestCode, ResponseCode

DELAYED = RequestCode.GET_BROKER_CONFIG  # answers after ext "delayMs"
CLOSE = RequestCode.UNREGISTER_CLIENT  # the server drops the connection
OVERSIZE = RequestCode.GET_BROKER_RUNTIME_INFO  # the server announces a 32 MiB frame
CALLBACK = RequestCode.HEART_BEAT  # the server asks the client something first


class LoopbackServer:
    """A remoting peer on loopback, in its own thread and event loop."""

    def __init__(self, host: str = "127.0.0.1"):
        self.host = host
        self.oneways: list[RemotingCommand] = []
        self.connections = 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, self.host, 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    @property
    def addr(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def stop(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        decoder = FrameDecoder()
        waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        opaque = iter(range(1000, 1 << 30))
        tasks = set()
        try:
            while data := await reader.read(4096):
                for frame in decoder.feed(data):
                    cmd = decode(frame)
                    if cmd.is_response:
                        waiting.pop(cmd.opaque).set_result(cmd)
                        continue
                    task = asyncio.create_task(self._answer(cmd, writer, waiting, opaque))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _ask(self, writer, waiting, opaque, cmd: RemotingCommand) -> RemotingCommand:
        cmd.opaque = next(opaque)
        future = asyncio.get_running_loop().create_future()
        waiting[cmd.opaque] = future
        writer.write(encode(cmd))
        return await asyncio.wait_for(future, 5)

    async def _answer(self, cmd: RemotingCommand, writer, waiting, opaque) -> None:
        if cmd.is_oneway:
            self.oneways.append(cmd)
            return
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            topic = cmd.header(hd.GetRouteInfoRequestHeader).topic
            reply = cmd.response(body=topic.encode())
        elif cmd.code == RequestCode.GET_MAX_OFFSET:
            reply = cmd.response(header=hd.GetMaxOffsetResponseHeader(offset=42))
        elif cmd.code == DELAYED:
            await asyncio.sleep(int(cmd.ext_fields["delayMs"]) / 1000)
            reply = cmd.response(body=cmd.ext_fields["delayMs"].encode())
        elif cmd.code == CLOSE:
            writer.transport.abort()
            return
        elif cmd.code == OVERSIZE:
            writer.write(struct.pack(">ii", 32 * 1024 * 1024, 0) + b"x" * 100)
            return
        elif cmd.code == CALLBACK:
            # A oneway notification, a request the client has no handler for, then one it answers.
            notify = RemotingCommand.request(
                RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                hd.NotifyConsumerIdsChangedRequestHeader(consumer_group="g"),
                oneway=True,
            )
            writer.write(encode(notify))
            unknown = await self._ask(writer, waiting, opaque, RemotingCommand.request(221, {"topic": "t"}))
            running = await self._ask(
                writer,
                waiting,
                opaque,
                RemotingCommand.request(
                    RequestCode.GET_CONSUMER_RUNNING_INFO,
                    hd.GetConsumerRunningInfoRequestHeader(consumer_group="g", client_id="c1"),
                ),
            )
            reply = cmd.response(
                body=running.body,
                header={"unknownCode": unknown.code, "unknownRemark": unknown.remark, "flag": running.flag},
            )
        else:
            reply = cmd.response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        writer.write(encode(reply))


@pytest.fixture(scope="module")
def server():
    srv = LoopbackServer()
    yield srv
    srv.stop()


def _ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def route(topic: str) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, hd.GetRouteInfoRequestHeader(topic=topic)
    )


def delayed(ms: int) -> RemotingCommand:
    return RemotingCommand.request(DELAYED, {"delayMs": ms})


def test_parse_address():
    assert parse_address("127.0.0.1:9876") == ("127.0.0.1", 9876)
    assert parse_address("[::1]:10911") == ("::1", 10911)
    assert parse_address("::1:10911") == ("::1", 10911)
    assert parse_address("broker-a.example:10909") == ("broker-a.example", 10909)
    for bad in ("nohost", ":9876", "h:", "h:0", "h:70000", "h:x"):
        with pytest.raises(UsageError):
            parse_address(bad)


def test_request_response_and_typed_header(server):
    async def main():
        async with RemotingClient() as client:
            resp = await client.invoke(server.addr, route("TopicTest"), 2)
            assert resp.is_response and resp.code == ResponseCode.SUCCESS and resp.body == b"TopicTest"
            resp = await client.invoke(
                server.addr,
                RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, hd.GetMaxOffsetRequestHeader(topic="t", queue_id=0)
                ),
                2,
            )
            assert resp.header(hd.GetMaxOffsetResponseHeader).offset == 42
            resp = await client.invoke(server.addr, RemotingCommand.request(999), 2)
            with pytest.raises(BrokerError, match=r"REQUEST_CODE_NOT_SUPPORTED\(3\): request type 999"):
                expect(resp, server.addr)
            assert client.addresses == [server.addr]

    before = server.connections
    asyncio.run(main())
    assert server.connections == before + 1  # one connection for all three requests


def test_binary_header_requests(server):
    async def main():
        async with RemotingClient() as client:
            cmd = route("bin")
            cmd.serialize_type = 1
            resp = await client.invoke(server.addr, cmd, 2)
            assert resp.serialize_type == 1 and resp.body == b"bin"

    asyncio.run(main())


def test_concurrent_requests_matched_by_opaque(server):
    async def main():
        async with RemotingClient() as client:
            delays = [(i * 37) % 200 for i in range(40)]
            results = await asyncio.gather(*(client.invoke(server.addr, delayed(ms), 5) for ms in delays))
            assert [int(r.body) for r in results] == delays

    asyncio.run(main())


def test_timeout_names_host_and_timeout_then_connection_still_usable(server):
    async def main():
        async with RemotingClient() as client:
            start = time.monotonic()
            with pytest.raises(NetworkError) as info:
                await client.invoke(server.addr, delayed(1500), 0.2)
            assert time.monotonic() - start < 1.0
            assert server.addr in str(info.value) and "0.2 s" in str(info.value)
            assert "GET_BROKER_CONFIG(26)" in str(info.value)
            assert info.value.exit_code == 5
            # the late answer is dropped; the connection keeps working
            assert (await client.invoke(server.addr, route("after"), 2)).body == b"after"

    asyncio.run(main())


def test_oneway(server):
    async def main():
        async with RemotingClient() as client:
            cmd = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                hd.UpdateConsumerOffsetRequestHeader(
                    consumer_group="g", topic="t", queue_id=1, commit_offset=9
                ),
            )
            await client.invoke_oneway(server.addr, cmd, 2)
            await client.invoke(server.addr, route("sync"), 2)  # ordered after the oneway on the socket

    asyncio.run(main())
    last = server.oneways[-1]
    assert last.is_oneway and last.ext_fields["commitOffset"] == "9"


def test_server_to_client_requests(server):
    seen: list[RemotingCommand] = []

    async def running_info(request: RemotingCommand, addr: str) -> RemotingCommand:
        header = request.header(hd.GetConsumerRunningInfoRequestHeader)
        assert addr == server.addr
        return request.response(body=f"running:{header.client_id}".encode())

    def notify(request: RemotingCommand, addr: str) -> None:
        seen.append(request)

    async def main():
        client = RemotingClient({RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: notify})
        client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
        async with client:
            resp = await client.invoke(server.addr, RemotingCommand.request(CALLBACK), 3)
        return resp

    resp = asyncio.run(main())
    assert resp.body == b"running:c1"
    assert resp.ext_fields["flag"] == "1"  # the client's answer had the response bit
    assert resp.ext_fields["unknownCode"] == str(int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED))
    assert resp.ext_fields["unknownRemark"] == " request type 221 not supported"
    assert [c.code for c in seen] == [RequestCode.NOTIFY_CONSUMER_IDS_CHANGED]
    assert seen[0].header(hd.NotifyConsumerIdsChangedRequestHeader).consumer_group == "g"


def test_abrupt_close_fails_pending_and_reconnects(server):
    async def main():
        async with RemotingClient() as client:
            slow = asyncio.create_task(client.invoke(server.addr, delayed(2000), 5))
            await asyncio.sleep(0.05)
            with pytest.raises(NetworkError, match="connection"):
                await client.invoke(server.addr, RemotingCommand.request(CLOSE), 2)
            with pytest.raises(NetworkError, match=server.addr):
                await slow
            assert (await client.invoke(server.addr, route("again"), 2)).body == b"again"

    asyncio.run(main())


def test_oversized_frame_is_rejected(server):
    async def main():
        async with RemotingClient() as client:
            with pytest.raises(ProtocolError, match="exceeds") as info:
                await client.invoke(server.addr, RemotingCommand.request(OVERSIZE), 2)
            assert server.addr in str(info.value) and isinstance(info.value, NetworkError)

    asyncio.run(main())


def test_connection_refused_and_connect_errors():
    port = _free_port()

    async def main():
        async with RemotingClient() as client:
            with pytest.raises(NetworkError) as info:
                await client.invoke(f"127.0.0.1:{port}", route("x"), 2)
            assert str(info.value) == f"127.0.0.1:{port}: connection refused"
            with pytest.raises(NetworkError, match="unknown host"):
                await client.invoke("no-such-host.invalid:9876", route("x"), 2)

    asyncio.run(main())


def test_silent_peer_times_out():
    """A listener that never answers (like a namesrv 4.9.7 for an unknown code)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    addr = f"127.0.0.1:{listener.getsockname()[1]}"
    try:
        with (
            SyncClient() as client,
            pytest.raises(NetworkError, match=rf"{addr}: no response .* within 0.15 s"),
        ):
            client.invoke(addr, route("x"), 0.15)
    finally:
        listener.close()


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback")
def test_ipv6():
    srv = LoopbackServer("::1")
    try:
        with SyncClient() as client:
            assert client.invoke(srv.addr, route("v6"), 2).body == b"v6"
    finally:
        srv.stop()


def test_sync_client_reuses_connection(server):
    before = server.connections
    with SyncClient() as client:
        for topic in ("a", "b", "c"):
            assert client.invoke(server.addr, route(topic), 2).body == topic.encode()
        results = client.invoke_all([(server.addr, route("p")), (server.addr, delayed(10))], 2)
        assert [r.body for r in results] == [b"p", b"10"]
        with pytest.raises(NetworkError):
            client.invoke(server.addr, delayed(800), 0.1)
    assert server.connections == before + 1


def test_client_module_import_is_light():
    import subprocess
    import sys

    code = (
        "import sys, rmqcli.remoting.client, rmqcli.remoting.codes, rmqcli.remoting.headers; "
        "print('asyncio' in sys.modules, 'construct' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
