"""Golden bytes, round trips and robustness of the remoting layouts, codec, headers and bodies.

Golden values are the hex dumps and sample bodies of protocol.md A.10 and B.9.
"""

from __future__ import annotations

import random

import construct as cs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import remoting as rfmt
from rmqcli.remoting import codec
from rmqcli.remoting import headers as hd
from rmqcli.remoting import json_body as jb
from rmqcli.remoting.codec import FrameDecoder, ProtocolError, RemotingCommand, decode, encode
from rmqcli.remoting.codes import RequestCode, ResponseCode, code_name


def hexdump_bytes(dump: str) -> bytes:
    """The bytes of an ``hexdump -C`` listing."""
    out = bytearray()
    for line in dump.strip().splitlines():
        out += bytes.fromhex(line[10:58].replace(" ", ""))
    return bytes(out)


# protocol.md A.10: GET_ROUTEINFO_BY_TOPIC from a Java 4.9.7 client, JSON header.
ROUTE_JSON_DUMP = """
00000000  00 00 00 87 00 00 00 83 7b 22 63 6f 64 65 22 3a  |........{"code":|
00000010  31 30 35 2c 22 65 78 74 46 69 65 6c 64 73 22 3a  |105,"extFields":|
00000020  7b 22 74 6f 70 69 63 22 3a 22 54 6f 70 69 63 54  |{"topic":"TopicT|
00000030  65 73 74 22 7d 2c 22 66 6c 61 67 22 3a 30 2c 22  |est"},"flag":0,"|
00000040  6c 61 6e 67 75 61 67 65 22 3a 22 4a 41 56 41 22  |language":"JAVA"|
00000050  2c 22 6f 70 61 71 75 65 22 3a 30 2c 22 73 65 72  |,"opaque":0,"ser|
00000060  69 61 6c 69 7a 65 54 79 70 65 43 75 72 72 65 6e  |ializeTypeCurren|
00000070  74 52 50 43 22 3a 22 4a 53 4f 4e 22 2c 22 76 65  |tRPC":"JSON","ve|
00000080  72 73 69 6f 6e 22 3a 34 30 37 7d                 |rsion":407}|
"""
ROUTE_JSON_TEXT = (
    b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":0,'
    b'"serializeTypeCurrentRPC":"JSON","version":407}'
)
# Same request, ROCKETMQ binary header.
ROUTE_BINARY_DUMP = """
00000000  00 00 00 2d 01 00 00 29 00 69 00 01 97 00 00 00  |...-...).i......|
00000010  00 00 00 00 00 00 00 00 00 00 00 00 14 00 05 74  |...............t|
00000020  6f 70 69 63 00 00 00 09 54 6f 70 69 63 54 65 73  |opic....TopicTes|
00000030  74                                               |t|
"""
# QUERY_CONSUMER_OFFSET success response: header text, first line of its dump.
OFFSET_RESPONSE_TEXT = (
    b'{"code":0,"extFields":{"offset":"42"},"flag":1,"language":"JAVA","opaque":7,'
    b'"serializeTypeCurrentRPC":"JSON","version":407}'
)
OFFSET_RESPONSE_FIRST_LINE = '00000000  00 00 00 7f 00 00 00 7b 7b 22 63 6f 64 65 22 3a  |.......{{"code":|'


def route_request(serialize_type: int = 0) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
        hd.GetRouteInfoRequestHeader(topic="TopicTest"),
        serialize_type=rfmt.SerializeType(serialize_type),
    )


# --- golden frames (A.10) ----------------------------------------------------------------------
def test_golden_json_route_request():
    frame = hexdump_bytes(ROUTE_JSON_DUMP)
    assert frame[8:] == ROUTE_JSON_TEXT
    assert encode(route_request()) == frame
    cmd = decode(frame)
    assert cmd == route_request()
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark) == (
        105,
        0,
        407,
        0,
        0,
        None,
    )
    assert (
        cmd.language is rfmt.LanguageCode.JAVA
        and cmd.header(hd.GetRouteInfoRequestHeader).topic == "TopicTest"
    )


def test_golden_binary_route_request():
    frame = hexdump_bytes(ROUTE_BINARY_DUMP)
    assert len(frame) == 0x31
    assert encode(route_request(1)) == frame
    assert decode(frame) == route_request(1)
    # the Construct declarations read the same bytes
    parsed = rfmt.Frame.parse(frame)
    assert (parsed.length, parsed.serialize_type, parsed.header_length, parsed.body) == (45, 1, 41, b"")
    header = rfmt.BinaryHeader.parse(parsed.header)
    assert (header.code, header.language, header.version, header.opaque, header.flag) == (105, 0, 407, 0, 0)
    assert header.remark == "" and [(e.key, e.value) for e in header.ext_fields] == [("topic", "TopicTest")]
    assert rfmt.Frame.build(dict(serialize_type=1, header=parsed.header, body=b"")) == frame


def test_golden_offset_response():
    request = RemotingCommand.request(
        RequestCode.QUERY_CONSUMER_OFFSET,
        hd.QueryConsumerOffsetRequestHeader(consumer_group="g", topic="t", queue_id=0),
        opaque=7,
    )
    response = request.response(header=hd.QueryConsumerOffsetResponseHeader(offset=42))
    frame = encode(response)
    assert frame[8:] == OFFSET_RESPONSE_TEXT
    assert frame[:16] == hexdump_bytes(OFFSET_RESPONSE_FIRST_LINE)
    back = decode(frame)
    assert back.is_response and not back.is_oneway and back.opaque == 7
    assert back.header(hd.QueryConsumerOffsetResponseHeader).offset == 42


def test_frame_prefix_helpers():
    assert rfmt.header_length_and_type(1, 41) == 0x01000029
    assert (rfmt.serialize_type_of(0x01000029), rfmt.header_length_of(0x01000029)) == (1, 41)
    assert rfmt.MAX_FRAME_LENGTH == 16777216
    assert (rfmt.FLAG_RESPONSE, rfmt.FLAG_ONEWAY) == (1, 2)
    assert rfmt.LanguageCode.RUST == 12 and rfmt.LanguageCode["CPP"] == 1


# --- JSON headers from other clients (A.3) -----------------------------------------------------
def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return rfmt.FRAME_PREFIX_STRUCT.pack(4 + len(header) + len(body), len(header)) + header + body


def test_cpp_style_json_header():
    header = (
        b'{"code":10,"extFields":{"AccessKey":"","batch":"0","defaultTopicQueueNums":4,"queueId":1,'
        b'"sysFlag":0,"flag":0,"producerGroup":"P","topic":"T","defaultTopic":"TBW102",'
        b'"bornTimestamp":"1700000000000","unitMode":"0"},"flag":0,"language":"CPP","opaque":5,'
        b'"remark":"","version":63}\n'
    )
    cmd = decode(json_frame(header, b"hello"))
    assert cmd.language == rfmt.LanguageCode.CPP and cmd.remark == "" and cmd.body == b"hello"
    assert cmd.ext_fields["defaultTopicQueueNums"] == "4" and cmd.ext_fields["AccessKey"] == ""
    send = hd.parse_send_header(cmd.code, cmd.ext_fields)
    assert (send.queue_id, send.born_timestamp, send.batch, send.unit_mode) == (
        1,
        1700000000000,
        False,
        False,
    )


def test_ali_ons_style_json_header():
    header = (
        b'{"code":310,"language":"JAVA","opaque":3,"flag":0,"version":121,"extFields":'
        b'{"a":"P","b":"T","c":"TBW102","d":4,"e":0,"f":0,"g":1700000000000,"h":0,"i":"TAGS\\u0001a",'
        b'"j":0,"k":false,"l":16}}'
    )
    cmd = decode(json_frame(header))
    assert cmd.ext_fields["k"] == "false" and cmd.ext_fields["g"] == "1700000000000"
    send = hd.parse_send_header(cmd.code, cmd.ext_fields)
    assert (send.topic, send.properties, send.max_reconsume_times) == ("T", "TAGS\x01a", 16)


def test_json_header_leniency_and_errors():
    cmd = decode(json_frame(b'{"code":34,"language":0,"opaque":"9","flag":0}'))
    assert (cmd.code, cmd.language, cmd.opaque, cmd.version, cmd.ext_fields) == (34, 0, 9, 0, {})
    assert decode(json_frame(b'{"code":1,"language":"SMALLTALK"}')).language == rfmt.LanguageCode.OTHER
    for bad in (b"[1]", b"{", b'{"code":"x"}', b'{"code":1,"extFields":3}', b"\xff\xfe"):
        with pytest.raises(ProtocolError):
            decode(json_frame(bad))


def test_json_headers_orjson_would_read_otherwise_decode_as_json_reads_them():
    """Headers are read by orjson first; where it refuses or rounds, json's reading stands."""
    big = 123456789012345678901234567890
    cases = {
        b'{"code":10,"opaque":%d,"extFields":{"a":%d}}' % (big, big): (big, {"a": str(big)}),
        b'{"code":10,"opaque":%d}' % big: (big, {}),
        b'{"code":10,"opaque":1,"extFields":{"a":NaN,"b":"x"}}': (1, {"a": "nan", "b": "x"}),
        b'{"code":10,"opaque":2,"extFields":{"a":"\\ud800"}}': (2, {"a": "\ud800"}),
        b'\xef\xbb\xbf{"code":10,"opaque":3}': (3, {}),
        b'{"code":10,"opaque":4,"extFields":{"a":1.5,"b":true,"c":null,"d":7}}': (
            4,
            {"a": "1.5", "b": "true", "d": "7"},
        ),
        # past int()'s digit limit: the digits, as a String field gets a BigInteger (json, then fastjson)
        b'{"code":10,"opaque":5,"extFields":{"a":-%s}}' % (b"1" * 5000): (5, {"a": "-" + "1" * 5000}),
        b"{code:10,opaque:6,extFields:{a:%s}}" % (b"2" * 5000): (6, {"a": "2" * 5000}),
    }
    for header, (opaque, ext) in cases.items():
        cmd = decode(json_frame(header))
        assert (cmd.code, cmd.opaque, cmd.ext_fields) == (10, opaque, ext), header


def test_response_flags_and_names():
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, oneway=True)
    assert request.is_oneway and not request.is_response
    response = route_request(1).response(ResponseCode.TOPIC_NOT_EXIST, "No topic route info")
    assert (
        response.flag == 1 and response.serialize_type == 1 and response.describe() == "TOPIC_NOT_EXIST(17)"
    )
    assert (
        code_name(310, response=False) == "SEND_MESSAGE_V2"
        and code_name(77777, response=True) == "CODE_77777"
    )
    assert ResponseCode(209).name == "UPDATE_AND_CREATE_ACL_CONFIG_FAILED"


def test_binary_header_null_strings_and_limits():
    cmd = RemotingCommand(code=1, remark="", ext_fields={"k": ""}, serialize_type=rfmt.SerializeType.ROCKETMQ)
    back = decode(encode(cmd))
    assert back.remark is None and back.ext_fields == {}
    with pytest.raises(ProtocolError, match="int16"):
        encode(RemotingCommand(code=200050, serialize_type=rfmt.SerializeType.ROCKETMQ))
    assert decode(encode(RemotingCommand(code=200050))).code == 200050  # JSON can carry 5.x POP codes
    with pytest.raises(ProtocolError, match="exceeds"):
        encode(RemotingCommand(code=1, body=b"\0" * rfmt.MAX_FRAME_LENGTH))


# --- hypothesis: commands and frames -----------------------------------------------------------
INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
TEXT = st.text(max_size=12)
NONEMPTY = st.text(min_size=1, max_size=12)


@st.composite
def commands(draw, serialize_type=None):
    kind = draw(st.sampled_from([0, 1])) if serialize_type is None else serialize_type
    binary = kind == 1
    return RemotingCommand(
        code=draw(INT16 if binary else INT32),
        language=draw(st.sampled_from(list(rfmt.LanguageCode))),
        version=draw(INT16 if binary else INT32),
        opaque=draw(INT32),
        flag=draw(INT32),
        remark=draw(st.none() | (NONEMPTY if binary else TEXT)),
        ext_fields=draw(
            st.dictionaries(NONEMPTY if binary else TEXT, NONEMPTY if binary else TEXT, max_size=6)
        ),
        body=draw(st.binary(max_size=64)),
        serialize_type=rfmt.SerializeType(kind),
    )


@settings(max_examples=300, deadline=None)
@given(commands())
def test_command_round_trip(cmd):
    frame = encode(cmd)
    assert decode(frame) == cmd
    assert FrameDecoder().feed_commands(frame) == [cmd]


@settings(max_examples=150, deadline=None)
@given(commands(serialize_type=1))
def test_binary_header_matches_construct_declaration(cmd):
    header = codec.encode_binary_header(cmd)
    declared = rfmt.BinaryHeader.build(
        dict(
            code=cmd.code,
            language=int(cmd.language),
            version=cmd.version,
            opaque=cmd.opaque,
            flag=cmd.flag,
            remark=cmd.remark or "",
            ext_fields=[dict(key=k, value=v) for k, v in cmd.ext_fields.items()],
        )
    )
    assert header == declared
    parsed = rfmt.BinaryHeader.parse(header)
    assert {e.key: e.value for e in parsed.ext_fields} == cmd.ext_fields
    frame = encode(cmd)
    assert rfmt.Frame.parse(frame).header == header


@settings(max_examples=100, deadline=None)
@given(st.lists(commands(), min_size=1, max_size=6), st.randoms(use_true_random=False))
def test_frame_decoder_any_chunking(cmds, rnd):
    stream = b"".join(encode(c) for c in cmds)
    decoder = FrameDecoder()
    got = []
    pos = 0
    while pos < len(stream):
        step = rnd.randint(1, 40)
        got += decoder.feed_commands(stream[pos : pos + step])
        pos += step
    assert got == cmds and decoder.pending == 0


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_raise_only_protocol_error(data):
    decoder = FrameDecoder(max_frame_length=1 << 20)
    try:
        for frame in decoder.feed(data):
            decode(frame)
    except ProtocolError:
        pass
    for serialize_type in (0, 1):  # a valid prefix around random header bytes
        frame = rfmt.FRAME_PREFIX_STRUCT.pack(
            4 + len(data), rfmt.header_length_and_type(serialize_type, len(data))
        )
        try:
            decode(frame + data)
        except ProtocolError:
            pass


def test_random_binary_headers_raise_only_protocol_error():
    rnd = random.Random(7)
    good = codec.encode_binary_header(
        RemotingCommand(code=11, remark="r", ext_fields={"topic": "t", "queueId": "3"}, serialize_type=1)
    )
    for _ in range(3000):
        data = bytearray(good)
        for _ in range(rnd.randint(1, 4)):
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        data = data[: rnd.randint(0, len(data))] if rnd.random() < 0.3 else data
        try:
            codec.decode_binary_header(bytes(data))
        except ProtocolError:
            pass


def test_frame_decoder_rejects_bad_lengths_early():
    with pytest.raises(ProtocolError, match="exceeds"):
        FrameDecoder().feed((rfmt.MAX_FRAME_LENGTH - 3).to_bytes(4, "big"))
    assert (
        FrameDecoder().feed((rfmt.MAX_FRAME_LENGTH - 4).to_bytes(4, "big")) == []
    )  # exactly 16 MiB is allowed
    for length in (-1, 0, 3):
        with pytest.raises(ProtocolError, match="bad frame length"):
            FrameDecoder().feed(length.to_bytes(4, "big", signed=True))
    with pytest.raises(ProtocolError, match="header length"):
        decode(rfmt.FRAME_PREFIX_STRUCT.pack(4, 5))
    with pytest.raises(ProtocolError, match="serialize type"):
        decode(rfmt.FRAME_PREFIX_STRUCT.pack(4, 0x02000000))


# --- custom headers (A.5, B.6) -----------------------------------------------------------------
def test_headers_to_ext_fields_like_java():
    header = hd.SendMessageRequestHeader(
        producer_group="P",
        topic="T",
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=2,
        sys_flag=0,
        born_timestamp=1700000000000,
        flag=0,
        properties="TAGS\x01a",
        reconsume_times=0,
        max_reconsume_times=16,
    )
    assert header.to_ext_fields() == {
        "producerGroup": "P",
        "topic": "T",
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "2",
        "sysFlag": "0",
        "bornTimestamp": "1700000000000",
        "flag": "0",
        "properties": "TAGS\x01a",
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "false",
        "maxReconsumeTimes": "16",
    }
    v2 = hd.SendMessageRequestHeaderV2.from_v1(header)
    assert list(v2.to_ext_fields()) == list("abcdefghijkl") + ["m"]
    assert v2.to_ext_fields()["l"] == "16" and v2.to_ext_fields()["m"] == "false"
    assert hd.parse_send_header(310, v2.to_ext_fields()) == header
    assert hd.parse_send_header(10, header.to_ext_fields()) == header
    reset = hd.ResetOffsetRequestHeader(topic="t", group="g", timestamp=-1, is_force=True)
    assert reset.to_ext_fields() == {"topic": "t", "group": "g", "timestamp": "-1", "isForce": "true"}
    assert hd.UnregisterClientRequestHeader(client_id="c").to_ext_fields() == {"clientID": "c"}
    route = hd.GetRouteInfoRequestHeader(topic="t", accept_standard_json_only=True)
    assert route.to_ext_fields() == {"topic": "t", "acceptStandardJsonOnly": "true"}
    register = hd.RegisterBrokerRequestHeader(
        broker_name="b",
        broker_addr="1.2.3.4:10911",
        cluster_name="c",
        ha_server_addr="1.2.3.4:10912",
        broker_id=0,
    )
    assert register.to_ext_fields()["compressed"] == "false" and register.to_ext_fields()["bodyCrc32"] == "0"


def test_headers_from_ext_fields_like_java():
    pull = hd.PullMessageRequestHeader.from_ext_fields(
        {
            "consumerGroup": "g",
            "topic": "t",
            "queueId": "1",
            "queueOffset": "5",
            "maxMsgNums": "32",
            "sysFlag": "6",
            "commitOffset": "0",
            "suspendTimeoutMillis": "15000",
            "subVersion": "0",
            "subscription": "*",
            "AccessKey": "",
        }
    )
    assert (pull.queue_offset, pull.subscription, pull.expression_type) == (5, "*", None)
    assert hd.PullMessageRequestHeader.from_ext_fields(pull.to_ext_fields()) == pull
    with pytest.raises(hd.HeaderError, match="the custom field <offset> is null"):
        hd.GetMaxOffsetResponseHeader.from_ext_fields({})
    with pytest.raises(hd.HeaderError, match="queueId"):
        hd.GetMinOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": "x1"})
    # Boolean.parseBoolean: only "true" (any case) is true; C++ sends "1"
    assert hd.GetConsumeStatsInBrokerHeader.from_ext_fields({"isOrder": "TRUE"}).is_order is True
    assert hd.GetConsumeStatsInBrokerHeader.from_ext_fields({"isOrder": "1"}).is_order is False
    # an unparsable optional value is dropped, as Java only logs it
    create = {"topic": "t", "defaultTopic": "d", "readQueueNums": "8", "writeQueueNums": "8", "perm": "6"}
    create.update(topicFilterType="SINGLE_TAG", order="false", topicSysFlag="?")
    assert hd.CreateTopicRequestHeader.from_ext_fields(create).topic_sys_flag is None
    with pytest.raises(hd.HeaderError):
        hd.GetMaxOffsetRequestHeader.from_ext_fields({"topic": "t", "queueId": str(2**31)})


# --- JSON bodies (A.9, B.9) --------------------------------------------------------------------
ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"b","cluster":"c"}],'
    b'"filterServerTable":{},"orderTopicConf":"b:4","queueDatas":[{"brokerName":"b","perm":6,'
    b'"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
SAMPLES = [
    (jb.TopicRouteData, ROUTE),
    (
        jb.ClusterInfo,
        b'{"brokerAddrTable":{"b":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"b","cluster":'
        b'"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["b"]}}',
    ),
    (jb.TopicList, b'{"brokerAddr":"10.0.0.1:10911","topicList":["TopicTest","TBW102"]}'),
    (jb.TopicList, b'{"topicList":["TopicTest"]}'),
    (jb.GroupList, b'{"groupList":["g1","g2"]}'),
    (jb.KVTable, b'{"table":{"putTps":"0.0 0.0 0.0","brokerVersionDesc":"V4_9_7"}}'),
    (
        jb.RegisterBrokerBody,
        b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":'
        b'1700000000000},"topicConfigTable":{"T":{"order":false,"perm":6,"readQueueNums":8,"topicFilterType":'
        b'"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":8}}}}',
    ),
    (
        jb.HeartbeatData,
        b'{"clientID":"10.0.0.5@12345","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
        b'"consumeType":"CONSUME_PASSIVELY","groupName":"g","messageModel":"CLUSTERING","subscriptionDataSet":'
        b'[{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":'
        b'"TagA || TagB","subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"T"}],'
        b'"unitMode":false}],'
        b'"producerDataSet":[{"groupName":"P"},{"groupName":"CLIENT_INNER_PRODUCER"}]}',
    ),
    (
        jb.SubscriptionGroupConfig,
        b'{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,'
        b'"groupName":"g","notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,'
        b'"whichBrokerWhenConsumeSlowly":1}',
    ),
    (
        jb.ConsumeStats,
        b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":3,'
        b'"consumerOffset":3,"lastTimestamp":1700000000000}}}',
    ),
    (
        jb.TopicStatsTable,
        b'{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"t"}:{"lastUpdateTimestamp":1700000000000,'
        b'"maxOffset":10,"minOffset":0}}}',
    ),
    (jb.ResetOffsetBody, b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5}}'),
    (jb.ConsumerOffsetSerializeWrapper, b'{"offsetTable":{"TopicTest@g1":{0:12,1:9}}}'),
    (jb.GetConsumerListByGroupResponseBody, b'{"consumerIdList":["10.0.0.5@1","10.0.0.6@1"]}'),
    (
        jb.BrokerStatsData,
        b'{"statsDay":{"avgpt":0.5,"sum":10,"tps":1.25},"statsHour":{"avgpt":0.0,"sum":0,'
        b'"tps":0.0},"statsMinute":{"avgpt":0.0,"sum":0,"tps":0.0}}',
    ),
    (jb.LockBatchResponseBody, b'{"lockOKMQSet":[{"brokerName":"b","queueId":0,"topic":"t"}]}'),
]


@pytest.mark.parametrize(("cls", "data"), SAMPLES, ids=lambda v: getattr(v, "__name__", ""))
def test_body_samples_round_trip_byte_exact(cls, data):
    value = jb.decode(cls, data)
    assert isinstance(value, cls)
    assert jb.encode(value) == data
    assert jb.decode(cls, jb.encode(value, pretty=True)) == value


def test_route_body_fields_and_standard_form():
    route = jb.decode(jb.TopicRouteData, ROUTE)
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.queue_datas[0].write_queue_nums == 4 and route.order_topic_conf == "b:4"
    standard = jb.encode_standard(route)
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in standard
    assert jb.decode(jb.TopicRouteData, standard) == route
    escaped = jb.encode_standard(jb.TopicList(topic_list=["a/b", "é\n"]))
    assert escaped == b'{"topicList":["a\\/b","\\u00E9\\u000A"]}'
    built = jb.TopicRouteData(
        broker_datas=[jb.BrokerData(broker_addrs={1: "s:1", 0: "m:1"}, broker_name="b", cluster="c")],
        queue_datas=[jb.QueueData(broker_name="b", perm=6, read_queue_nums=4, write_queue_nums=4)],
        order_topic_conf="b:4",
    )
    assert jb.encode(built) == ROUTE.replace(b"10.0.0.1:10911", b"m:1").replace(b"10.0.0.2:10911", b"s:1")


def test_body_variants_from_other_peers():
    # C++ heartbeat: enum ordinals, subVersion as string, no expressionType, producerDataSet absent
    cpp = (
        b'{"clientID":"123-10.0.0.5@DEFAULT","consumerDataSet":[{"consumeFromWhere":4,"consumeType":1,'
        b'"groupName":"g","messageModel":0,"subscriptionDataSet":[{"codeSet":[0],"subString":"*",'
        b'"subVersion":"1700000000000","tagsSet":[],"topic":"T"}]}]}\n'
    )
    heartbeat = jb.decode(jb.HeartbeatData, cpp)
    consumer = heartbeat.consumer_data_set[0]
    assert (consumer.consume_from_where, consumer.consume_type, consumer.message_model) == (
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_PASSIVELY",
        "BROADCASTING",
    )
    assert (
        consumer.subscription_data_set[0].sub_version == 1700000000000 and heartbeat.producer_data_set == []
    )
    # object keys as JSON text (fastjson >= 1.2.66, rocketmq-rust)
    text_keyed = b'{"offsetTable":{"{\\"brokerName\\":\\"b\\",\\"queueId\\":0,\\"topic\\":\\"t\\"}":5}}'
    assert jb.decode(jb.ResetOffsetBody, text_keyed) == jb.decode(jb.ResetOffsetBody, SAMPLES[11][1])
    # R5 BrokerData properties are read and written back in order
    r5 = b'{"brokerAddrs":{0:"a:1"},"brokerName":"b","cluster":"c","enableActingMaster":false}'
    assert jb.encode(jb.decode(jb.BrokerData, r5)) == r5
    # quoted numeric keys (standard JSON) decode to ints
    assert jb.decode(jb.ConsumerOffsetSerializeWrapper, b'{"offsetTable":{"t@g":{"0":1}}}').offset_table == {
        "t@g": {0: 1}
    }


@pytest.mark.parametrize(
    "data", [b"", b"[", b"[1]", b'{"brokerDatas":5}', b'{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}', b"\xff"]
)
def test_bad_bodies_raise_body_error(data):
    with pytest.raises(jb.BodyError):
        jb.decode(jb.TopicRouteData, data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80))
def test_random_bodies_raise_only_body_error(data):
    for cls in (jb.TopicRouteData, jb.ConsumeStats, jb.HeartbeatData):
        try:
            jb.decode(cls, data)
        except jb.BodyError:
            pass


def test_construct_frame_declaration_round_trip():
    frame = rfmt.Frame.build(dict(serialize_type=0, header=b"{}", body=b"xyz"))
    assert frame == bytes.fromhex("00000009 00000002") + b"{}xyz"
    parsed = rfmt.Frame.parse(frame)
    assert (parsed.serialize_type, parsed.header, parsed.body) == (0, b"{}", b"xyz")
    with pytest.raises(cs.ConstructError):
        rfmt.Frame.parse(bytes.fromhex("00000009 00000020") + b"{}xyz")
