"""Read TensorBoard event files as a reader would, checking what strata-train wrote.

Usage: tfevents_read.py DIR. Every file of DIR named *tfevents*: each TFRecord's framing
(u64 length, masked CRC-32C of the length, data, masked CRC-32C of the data) is checked and its
Event protocol buffer decoded (wall_time 1, step 2, file_version 3, summary 5 of values 1 with
tag 1 and simple_value 2). Prints "file_version V" for the first record and "TAG STEP VALUE"
for each scalar; exits 1 naming the first fault. Written for the test, from the format's
description: no TensorBoard or protobuf package is needed.
"""
import os
import struct
import sys


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def fields(buf):
    """(field, wire type, value) of a message: varints, 64/32-bit bytes, delimited bytes."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(buf, i)
        elif w == 1:
            v, i = buf[i:i + 8], i + 8
        elif w == 5:
            v, i = buf[i:i + 4], i + 4
        elif w == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % w)
        yield f, w, v


def fail(msg):
    print("fault: " + msg)
    sys.exit(1)


def read(path):
    data = open(path, "rb").read()
    i = first = 0
    while i < len(data):
        if len(data) - i < 12:
            fail("%s: a truncated record header at %d" % (path, i))
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hc != masked(head):
            fail("%s: the length's CRC at %d" % (path, i))
        if len(data) - i < 16 + n:
            fail("%s: a truncated record at %d" % (path, i))
        body = data[i + 12:i + 12 + n]
        (dc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if dc != masked(body):
            fail("%s: the data's CRC at %d" % (path, i))
        i += 16 + n
        step, wall = 0, None
        for f, w, v in fields(body):
            if f == 1 and w == 1:
                (wall,) = struct.unpack("<d", v)
            elif f == 2 and w == 0:
                step = v
            elif f == 3 and w == 2:
                if first:
                    fail("file_version after the first record")
                print("file_version " + v.decode())
            elif f == 5 and w == 2:
                for sf, sw, sv in fields(v):
                    tag, val = None, None
                    for vf, vw, vv in fields(sv):
                        if vf == 1 and vw == 2:
                            tag = vv.decode()
                        elif vf == 2 and vw == 5:
                            (val,) = struct.unpack("<f", vv)
                    print("%s %d %.9g" % (tag, step, val))
        if wall is None or wall < 1e9:
            fail("%s: an event without a wall time" % path)
        first += 1


if crc32c(b"123456789") != 0xE3069283:  # CRC-32C's check value
    fail("the reader's own CRC-32C")
for name in sorted(os.listdir(sys.argv[1])):
    if "tfevents" in name:
        read(os.path.join(sys.argv[1], name))
