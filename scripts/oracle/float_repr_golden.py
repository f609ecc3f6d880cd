#!/usr/bin/env python3
"""golden/chat/float_repr.txt: '<IEEE-754 bits in hex> <Python repr>' per line, for frigg's
Python-float formatter (the chat template prints tool-call numbers with Python's str()).
Random bit patterns (every exponent), every power of two, and short decimals; seeded, so the file
is reproducible. Usage (repository root): python3 scripts/oracle/float_repr_golden.py"""
import platform
import random
import struct

random.seed(20261129)
vals = []
while len(vals) < 1500:
    v = struct.unpack("<d", struct.pack("<Q", random.getrandbits(64)))[0]
    if v == v and abs(v) != float("inf"):
        vals.append(v)
vals += [2.0 ** e for e in range(-1074, 1024, 7)]
vals += [round(random.uniform(-1e4, 1e4), random.randint(0, 6)) for _ in range(600)]
vals += [random.random() * 10 ** random.randint(-25, 25) for _ in range(600)]
with open("golden/chat/float_repr.txt", "w") as f:
    f.write("# Python %s repr(float); bits repr\n" % platform.python_version())
    for v in vals:
        f.write("%016x %r\n" % (struct.unpack("<Q", struct.pack("<d", v))[0], v))
