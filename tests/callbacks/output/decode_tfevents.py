#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, for callback2.tensorboard.*.

Standard library only, written apart from the C writer: its own CRC-32C (bit by bit, not
table driven), its own varint and protobuf parsing. Every record's two CRCs are checked;
the first record must be Event{file_version: "brain.Event:2"}; every other record must be
an Event with wall_time, step and a summary of simple_value scalars, or of one HParams
plugin value (tensorboard/plugins/hparams: plugin_data.proto and api.proto; the null
tensor, plugin name "hparams", version 0, the oneof member its tag names). Prints one
line per scalar, "<step> <tag> <value>" with the float32 value as %.9g (exact for a
float32), and for the HParams summaries
    <step> _hparams_/experiment hparam <name> <STRING|BOOL|FLOAT64>
    <step> _hparams_/experiment metric <tag>
    <step> _hparams_/session_start_info <name> = <number repr | "json string" | true|false>
    <step> _hparams_/session_end_info status <SUCCESS|FAILURE|...>
so a test compares them with what it fed. Exits 1 with a message naming the file, the
record and the byte offset on any error.

usage: decode_tfevents.py FILE [--self-test]
"""
import json
import struct
import sys


class DecodeError(Exception):
    pass


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than 10 bytes")


def fields(buf):
    """Yields (field, wire_type, value) of one message; value is int, bytes or raw bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise DecodeError("unsupported wire type %d for field %d" % (wire, field))
        if pos > len(buf):
            raise DecodeError("field %d runs past the end of its message" % field)
        yield field, wire, value


HPARAMS_TAGS = {"_hparams_/experiment": 2, "_hparams_/session_start_info": 3,
                "_hparams_/session_end_info": 4}
DATA_TYPES = {1: "STRING", 2: "BOOL", 3: "FLOAT64"}
STATUSES = {0: "UNKNOWN", 1: "SUCCESS", 2: "FAILURE", 3: "RUNNING"}


def only(buf, what, allowed):
    """The message's fields as {field: [values]}, refusing any (field, wire) not allowed."""
    out = {}
    for field, wire, value in fields(buf):
        if (field, wire) not in allowed:
            raise DecodeError("unexpected %s field %d (wire %d)" % (what, field, wire))
        out.setdefault(field, []).append(value)
    return out


def check_null_tensor(buf):
    """TensorProto{dtype: DT_FLOAT (1), tensor_shape: {dim: [{size: 0}]}}."""
    t = only(buf, "TensorProto", {(1, 0), (2, 2)})
    if t.get(1) != [1]:
        raise DecodeError("hparams tensor dtype %r, want DT_FLOAT" % t.get(1))
    dims = only(t.get(2, [b""])[0], "TensorShapeProto", {(2, 2)}).get(2, [])
    sizes = [only(d, "Dim", {(1, 0)}).get(1, [0])[0] for d in dims]
    if sizes != [0]:
        raise DecodeError("hparams tensor shape %r, want [0]" % sizes)


def double(raw):
    return struct.unpack("<d", raw)[0]


def proto_value(buf):
    v = only(buf, "google.protobuf.Value", {(2, 1), (3, 2), (4, 0)})
    if len(v) != 1 or len(list(v.values())[0]) != 1:
        raise DecodeError("google.protobuf.Value must hold exactly one kind")
    if 2 in v:
        return repr(double(v[2][0]))
    if 3 in v:
        return json.dumps(v[3][0].decode("utf-8"))
    if v[4][0] not in (0, 1):
        raise DecodeError("bool_value %d" % v[4][0])
    return "true" if v[4][0] else "false"


def hparams_lines(tag, content):
    data = only(content, "HParamsPluginData", {(1, 0), (2, 2), (3, 2), (4, 2)})
    if data.get(1, [0]) != [0]:
        raise DecodeError("HParamsPluginData version %r, want 0" % data[1])
    members = [f for f in (2, 3, 4) if f in data]
    if members != [HPARAMS_TAGS[tag]] or len(data[members[0]]) != 1:
        raise DecodeError("%s holds HParamsPluginData member(s) %r" % (tag, members))
    body, lines = data[members[0]][0], []
    if members[0] == 2:
        exp = only(body, "Experiment", {(3, 1), (4, 2), (5, 2)})
        if not 1e9 < double(exp[3][0]) < 1e10:
            raise DecodeError("implausible time_created_secs")
        for info in exp.get(4, []):
            h = only(info, "HParamInfo", {(1, 2), (4, 0)})
            lines.append("hparam %s %s" % (h[1][0].decode("utf-8"), DATA_TYPES[h[4][0]]))
        for info in exp.get(5, []):
            name = only(info, "MetricInfo", {(1, 2)})[1][0]
            lines.append("metric %s" % only(name, "MetricName", {(2, 2)})[2][0].decode("utf-8"))
    elif members[0] == 3:
        ssi = only(body, "SessionStartInfo", {(1, 2), (5, 1)})
        if not 1e9 < double(ssi[5][0]) < 1e10:
            raise DecodeError("implausible start_time_secs")
        for pair in ssi.get(1, []):
            kv = only(pair, "map entry", {(1, 2), (2, 2)})
            lines.append("%s = %s" % (kv[1][0].decode("utf-8"), proto_value(kv[2][0])))
    else:
        sei = only(body, "SessionEndInfo", {(1, 0), (2, 1)})
        if not 1e9 < double(sei[2][0]) < 1e10:
            raise DecodeError("implausible end_time_secs")
        lines.append("status %s" % STATUSES[sei.get(1, [0])[0]])
    return lines


def parse_value(buf):
    """(tag, [text, ...]): one %.9g scalar, or the lines of an HParams summary."""
    v = only(buf, "Summary.Value", {(1, 2), (2, 5), (8, 2), (9, 2)})
    if 1 not in v:
        raise DecodeError("Summary.Value without tag")
    tag = v[1][0].decode("utf-8")
    if 2 in v:
        if 8 in v or 9 in v:
            raise DecodeError("%s: simple_value with a tensor or metadata" % tag)
        return tag, ["%.9g" % struct.unpack("<f", v[2][0])[0]]
    if tag not in HPARAMS_TAGS or 8 not in v or 9 not in v:
        raise DecodeError("Summary.Value %s without simple_value is not an HParams one" % tag)
    check_null_tensor(v[8][0])
    plugin = only(only(v[9][0], "SummaryMetadata", {(1, 2)})[1][0], "PluginData",
                  {(1, 2), (2, 2)})
    if plugin[1][0] != b"hparams":
        raise DecodeError("%s: plugin_name %r" % (tag, plugin[1][0]))
    return tag, hparams_lines(tag, plugin.get(2, [b""])[0])


def parse_event(buf):
    event = {"values": [], "step": 0}  # proto3: a field left out has its default
    for field, wire, value in fields(buf):
        if field == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif field == 2 and wire == 0:
            step = value - (1 << 64) if value >= 1 << 63 else value
            event["step"] = step
        elif field == 3 and wire == 2:
            event["file_version"] = value.decode("utf-8")
        elif field == 5 and wire == 2:
            for sfield, swire, svalue in fields(value):
                if sfield != 1 or swire != 2:
                    raise DecodeError("unexpected Summary field %d" % sfield)
                event["values"].append(parse_value(svalue))
        else:
            raise DecodeError("unexpected Event field %d (wire %d)" % (field, wire))
    if "wall_time" not in event:
        raise DecodeError("Event without wall_time")
    if not 1e9 < event["wall_time"] < 1e10:
        raise DecodeError("implausible wall_time %r" % event["wall_time"])
    return event


def records(data):
    pos, index = 0, 0
    while pos < len(data):
        if len(data) - pos < 12:
            raise DecodeError("record %d at byte %d: truncated header" % (index, pos))
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if masked(crc32c(header)) != length_crc:
            raise DecodeError("record %d at byte %d: length crc mismatch" % (index, pos))
        start, end = pos + 12, pos + 12 + length
        if end + 4 > len(data):
            raise DecodeError("record %d at byte %d: truncated data" % (index, pos))
        payload = data[start:end]
        (data_crc,) = struct.unpack("<I", data[end:end + 4])
        if masked(crc32c(payload)) != data_crc:
            raise DecodeError("record %d at byte %d: data crc mismatch" % (index, pos))
        yield index, pos, payload
        pos, index = end + 4, index + 1


def decode(path):
    with open(path, "rb") as f:
        data = f.read()
    lines = []
    count = 0
    for index, pos, payload in records(data):
        try:
            event = parse_event(payload)
        except DecodeError as e:
            raise DecodeError("record %d at byte %d: %s" % (index, pos, e))
        if index == 0:
            if event.get("file_version") != "brain.Event:2" or event["values"]:
                raise DecodeError("record 0 is not Event{file_version: brain.Event:2}")
        elif "file_version" in event or not event["values"]:
            raise DecodeError("record %d at byte %d: not a summary event" % (index, pos))
        for tag, texts in event["values"]:
            lines.extend("%d %s %s" % (event["step"], tag, text) for text in texts)
        count += 1
    if count == 0:
        raise DecodeError("no records")
    return lines


def self_test():
    """Anchors the reader to published values, not to the writer under test."""
    checks = [
        # CRC-32C check value, and the 32-zero-bytes vector of RFC 3720 (iSCSI).
        (crc32c(b"123456789"), 0xE3069283),
        (crc32c(bytes(32)), 0x8A9136AA),
        # Every TensorFlow event file starts with 18 00 00 00 00 00 00 00 a3 7f 4b 22: the
        # length (24) of its file_version record and that length's masked CRC.
        (masked(crc32c(bytes.fromhex("1800000000000000"))), 0x224B7FA3),
        (read_varint(b"\xac\x02", 0), (300, 2)),
    ]
    for i, (got, want) in enumerate(checks):
        if got != want:
            raise SystemExit("decode_tfevents.py self-test %d failed: %r != %r" % (i, got, want))


def main(argv):
    self_test()
    if len(argv) != 2:
        sys.stderr.write("usage: decode_tfevents.py FILE\n")
        return 2
    try:
        for line in decode(argv[1]):
            print(line)
    except (DecodeError, UnicodeDecodeError, struct.error, KeyError, IndexError) as e:
        sys.stderr.write("%s: %s\n" % (argv[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
