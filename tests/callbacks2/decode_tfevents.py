#!/usr/bin/env python3
"""Independent reader of TensorBoard event files, for callback2.tensorboard.*.

Standard library only, written apart from the C writer: its own CRC-32C (bit by bit, not
table driven), its own varint and protobuf parsing. Every record's two CRCs are checked;
the first record must be Event{file_version: "brain.Event:2"}; every other record must be
an Event with wall_time, step and a summary of simple_value scalars. Prints one line per
scalar, "<step> <tag> <value>" with the float32 value as %.9g (exact for a float32), so a
test compares it with what it fed. Exits 1 with a message naming the file, the record and
the byte offset on any error.

usage: decode_tfevents.py FILE [--self-test]
"""
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


def parse_value(buf):
    tag, simple = None, None
    for field, wire, value in fields(buf):
        if field == 1 and wire == 2:
            tag = value.decode("utf-8")
        elif field == 2 and wire == 5:
            simple = struct.unpack("<f", value)[0]
        else:
            raise DecodeError("unexpected Summary.Value field %d (wire %d)" % (field, wire))
    if tag is None or simple is None:
        raise DecodeError("Summary.Value without tag or simple_value")
    return tag, simple


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
        for tag, value in event["values"]:
            lines.append("%d %s %.9g" % (event["step"], tag, value))
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
    except (DecodeError, UnicodeDecodeError, struct.error) as e:
        sys.stderr.write("%s: %s\n" % (argv[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
