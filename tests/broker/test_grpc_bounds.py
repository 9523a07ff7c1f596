"""Bounded memory and log per gRPC client (issue 41), over a real socket with grpcio: Telemetry
commands of 8 MiB from 40 clients at once, four rounds, are refused before they are parsed; the
server's RSS (read from /proc) stays within one round's commands in flight (40 x 8 MiB) of where
it was and stops growing after the first rounds (stored, each round's settings would take 320 MiB
more); settings naming too many topics are refused; requests that do not decode are answered
BAD_REQUEST and logged once per client address and kind, without a traceback."""

from __future__ import annotations

import threading
import time

import grpc

from rmqcli.broker.grpc.settings import MAX_TOPICS
from rmqcli.broker.grpc.stubs import load
from tests.support.grpcserve import server_fixture, stub_fixture
from tests.support.rss import rss_mib
from tests.support.serve import wait_until

S = load()
D, SV = S.definition, S.service
TOPIC = "TopicBounds"
METHOD = "/apache.rocketmq.v2.MessagingService/"

server = server_fixture(TOPIC)
stub = stub_fixture()


def meta(client: str) -> list[tuple[str, str]]:
    return [("x-mq-client-id", client), ("x-mq-language", "PYTHON"), ("x-mq-client-version", "5.1.2")]


def settings_command(topics: list[str]) -> object:
    settings = D.Settings(client_type=D.PRODUCER)
    for name in topics:
        settings.publishing.topics.add(name=name)
    return SV.TelemetryCommand(settings=settings)


def telemetry(stub, client: str, command: object) -> tuple[object, list]:  # type: ignore[no-untyped-def]
    """The stream's final status and its answers to one command."""
    call = stub.Telemetry(iter([command]), metadata=meta(client), timeout=30)
    answers = []
    try:
        answers = list(call)
    except grpc.RpcError as exc:
        return exc.code(), answers
    return grpc.StatusCode.OK, answers


TELEMETRY_LINES_SINCE: list[float] = []  # when the first test began sending Telemetry commands


def test_large_telemetry_settings_are_refused_and_memory_stays_bounded(server, stub) -> None:  # type: ignore[no-untyped-def]
    before = rss_mib(server)
    huge = settings_command([f"T{i:07d}" + "x" * 100 for i in range(8 * 1024 * 1024 // 110)])
    assert huge.ByteSize() > 8 * 1024 * 1024
    codes: list = []
    peak = [before]
    TELEMETRY_LINES_SINCE.append(time.monotonic())  # its first line (the window's start) comes after

    def client(i: int) -> None:
        codes.append(telemetry(stub, f"big@{i}", huge)[0])
        peak[0] = max(peak[0], rss_mib(server))

    afters = []
    for round_ in range(4):  # later rounds take no more than the first ones
        threads = [threading.Thread(target=client, args=(round_ * 40 + i,)) for i in range(40)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        afters.append(rss_mib(server))
    assert codes == [grpc.StatusCode.INVALID_ARGUMENT] * 160
    # what stays is the allocators' (grpc holds up to 40 commands of 8 MiB at once; glibc keeps
    # freed arenas), not the settings (each round would add 320 MiB more): bounded by one round in
    # flight, and no growth after the first rounds
    assert max(afters) - before < 40 * 8, (before, peak[0], afters)
    assert afters[3] - afters[1] < 128, (before, peak[0], afters)
    # settings over the topic count are refused; at the bound they are kept
    assert telemetry(stub, "many@1", settings_command([f"T{i}" for i in range(MAX_TOPICS + 1)]))[0] == (
        grpc.StatusCode.INVALID_ARGUMENT
    )
    code, answers = telemetry(stub, "fits@1", settings_command([TOPIC] * MAX_TOPICS))
    assert code == grpc.StatusCode.OK and answers[0].status.code == D.OK
    print(f"RSS before {before:.0f} MiB, peak {peak[0]:.0f} MiB, after rounds {afters}")


def test_undecodable_requests_are_answered_and_logged_once_per_client_and_kind(server) -> None:  # type: ignore[no-untyped-def]
    size = len(server.output())
    with grpc.insecure_channel(server.grpc) as channel:
        calls = {
            name: channel.unary_unary(METHOD + name, request_serializer=None, response_deserializer=None)
            for name in ("SendMessage", "AckMessage", "QueryRoute")
        }
        for _ in range(300):
            for name, call in calls.items():
                raw = call(b"\xff\xff\xff\xff", metadata=meta("garbage@1"), timeout=5)
                answer = getattr(SV, name + "Response").FromString(raw)
                assert answer.status.code == D.BAD_REQUEST
                assert answer.status.message.startswith("the request does not decode")
        receive = channel.unary_stream(
            METHOD + "ReceiveMessage", request_serializer=None, response_deserializer=None
        )
        [raw] = list(receive(b"\xff\xff", metadata=meta("garbage@1"), timeout=5))
        assert SV.ReceiveMessageResponse.FromString(raw).status.code == D.BAD_REQUEST
        stream = channel.stream_stream(
            METHOD + "Telemetry", request_serializer=None, response_deserializer=None
        )
        try:
            list(stream(iter([b"\xff\xff"]), metadata=meta("garbage@1"), timeout=5))
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT
        else:
            raise AssertionError("the Telemetry stream was not ended")
    wait_until(lambda: "undecodable Telemetry" in server.output(), 5, "the Telemetry line")
    log = server.output()[size:]
    assert "Traceback" not in log and "DecodeError]" not in log
    lines = [line for line in log.splitlines() if "undecodable" in line and "Telemetry" not in line]
    assert len(lines) == 4, lines  # one per kind: three unary methods and ReceiveMessage
    assert all("127.0.0.1" in line for line in lines)
    # the Telemetry commands of both tests from this address: one line, unless the two came more
    # than the 60 s window apart (a very loaded machine), then one per window
    count = len([line for line in server.output().splitlines() if "undecodable Telemetry" in line])
    apart = bool(TELEMETRY_LINES_SINCE) and time.monotonic() - TELEMETRY_LINES_SINCE[0] >= 60
    assert count == 1 or (apart and count == 2), count
