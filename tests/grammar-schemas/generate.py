#!/usr/bin/env python3
"""generate.py — the generated part of frigg's structured-output test schemas (tests/grammar-schemas/gen-NNN.json).

Deterministic (random.Random(SEED), no other input): rerunning it rewrites the same files byte for byte, so the
committed files are its output and a diff shows any change. Each schema is small and built from the shapes real
applications send: nested objects with required and optional members, arrays of objects, enums and const,
recursion through $defs/$ref with a base case, type unions and nullable members written as type lists, string
patterns and formats (date, date-time, email, uuid, time, ipv4), minItems/maxItems, minLength/maxLength, integer
minimum/maximum, anyOf and oneOf (oneOf's branches kept disjoint by a const tag or by type, since frigg does not
check "exactly one"), additionalProperties true/false/a schema, prefixItems.

Only the keywords common/grammar/gram_schema.c implements, in combinations it accepts (no pattern beside a length,
no numeric bounds on "number", no "nullable", whose null jsonschema would not accept), and only what the Python
jsonschema package checks the same way as JSON Schema says (patterns without \\s \\S \\W \\D, whose Python meaning
differs from ECMA-262's).

    python3 tests/grammar-schemas/generate.py [--check]   write the files (--check: exit 1 if any would change)
"""
import json
import os
import random
import sys

SEED = 45
COUNT = 200
HERE = os.path.dirname(os.path.abspath(__file__))

NAMES = ["id", "name", "title", "navn", "by", "email", "age", "alder", "tags", "items", "price", "pris", "count",
         "status", "created", "updated", "owner", "url", "note", "kind", "value", "unit", "lat", "lon", "city",
         "country", "zip", "phone", "color", "size", "score", "rank", "level", "active", "enabled", "parent",
         "children", "labels", "author", "body", "summary", "quantity", "currency", "amount", "due", "start",
         "end", "location", "description", "version", "sku", "weight", "height", "width", "language", "ord",
         "beløb", "størrelse", "kategori", "mærke"]
WORDS = ["red", "green", "blue", "open", "closed", "pending", "draft", "done", "low", "medium", "high", "urgent",
         "DKK", "EUR", "USD", "kg", "g", "m", "cm", "ja", "nej", "måske", "Århus", "København", "Odense", "æble",
         "new", "in_progress", "archived", "x", "A-1", "über", "日本", ""]
PATTERNS = ["^[A-Z]{3}$", "^[0-9]{4}$", "^[a-z][a-z0-9_]{0,15}$", "^#[0-9a-fA-F]{6}$", "^[A-Z]{2}-[0-9]{3,5}$",
            "^\\+?[0-9]{8,12}$", "^v[0-9]+\\.[0-9]+\\.[0-9]+$", "^(yes|no|maybe)$", "^[a-zA-Z ]+$", "^DK[0-9]{8}$",
            "[0-9]", "^https?://[a-z0-9.-]+(/[a-z0-9_-]*)*$", "^[0-9]{3}-[0-9]{2}-[0-9]{4}$", "^(?:[01][0-9]|2[0-3]):[0-5][0-9]$",
            "^[\\w.-]+$", "^[^@]+@[^@]+$", "^[A-Z][a-z]*( [A-Z][a-z]*)*$", "^\\d{1,3}(,\\d{3})*$"]
FORMATS = ["date", "date-time", "email", "uuid", "time", "ipv4"]


class Gen:
    def __init__(self, rng):
        self.r = rng
        self.defs = {}

    def chance(self, p):
        return self.r.random() < p

    def names(self, n):
        return self.r.sample(NAMES, n)

    def string(self):
        k = self.r.randrange(7)
        s = {"type": "string"}
        if k == 0:
            pass
        elif k == 1:
            lo = self.r.randrange(0, 4)
            s["minLength"] = lo
            if self.chance(0.7):
                s["maxLength"] = lo + self.r.randrange(0, 12)
        elif k == 2:
            s["maxLength"] = self.r.randrange(1, 20)
        elif k == 3:
            s["pattern"] = self.r.choice(PATTERNS)
        elif k == 4:
            s["format"] = self.r.choice(FORMATS)
        elif k == 5:
            s["enum"] = self.r.sample(WORDS, self.r.randrange(1, 5))
        else:
            s = {"const": self.r.choice(WORDS)}
        if self.chance(0.15):
            s["description"] = "a " + self.r.choice(["label", "code", "free text", "tekst"])
        return s

    def integer(self):
        s = {"type": "integer"}
        k = self.r.randrange(6)
        if k == 1:
            s["minimum"] = self.r.choice([0, 1, -10, 100])
        elif k == 2:
            s["maximum"] = self.r.choice([0, 9, 99, 1000, -1])
        elif k == 3:
            lo = self.r.randrange(-50, 50)
            s["minimum"], s["maximum"] = lo, lo + self.r.choice([0, 1, 9, 10, 99, 1234])
        elif k == 4:
            s["exclusiveMinimum"] = self.r.randrange(-5, 5)
            s["exclusiveMaximum"] = s["exclusiveMinimum"] + self.r.randrange(2, 300)
        elif k == 5:
            s = {"enum": self.r.sample([0, 1, 2, 3, 5, 8, 13, -1, 100], self.r.randrange(1, 4))}
        return s

    def leaf(self):
        k = self.r.randrange(10)
        if k < 4:
            return self.string()
        if k < 6:
            return self.integer()
        if k == 6:
            return {"type": "number"}
        if k == 7:
            return {"type": "boolean"}
        if k == 8:  # nullable through a type list, or a union of scalars
            t = self.r.choice([["string", "null"], ["integer", "null"], ["boolean", "null"], ["string", "integer"],
                               ["number", "string", "null"]])
            s = {"type": t}
            if t == ["string", "null"] and self.chance(0.5):
                s["maxLength"] = self.r.randrange(1, 10)
            if t == ["integer", "null"] and self.chance(0.5):
                s["minimum"] = 0
            return s
        return {"enum": self.r.sample(["a", 1, 2.5, True, None, "ø", -7, "done"], self.r.randrange(1, 5))}

    def value(self, depth):
        if depth <= 0:
            return self.leaf()
        k = self.r.randrange(12)
        if k < 5:
            return self.leaf()
        if k < 8:
            return self.obj(depth - 1)
        if k < 10:
            return self.array(depth - 1)
        if k == 10:
            return self.any_of(depth - 1)
        return self.ref_to(self.obj(depth - 1))

    def obj(self, depth, n=None):
        n = n if n is not None else self.r.randrange(1, 5)
        keys = self.names(n)
        s = {"type": "object", "properties": {k: self.value(depth) for k in keys}}
        req = [k for k in keys if self.chance(0.6)]
        if req:
            s["required"] = req
        k = self.r.randrange(8)
        if k == 0:
            s["additionalProperties"] = False
        elif k == 1:
            s["additionalProperties"] = True
        elif k == 2:
            s["additionalProperties"] = self.r.choice([{"type": "string", "maxLength": 8}, {"type": "integer"},
                                                       {"type": "boolean"}])
        if self.chance(0.1):
            s["title"] = "T" + str(self.r.randrange(1000))
        return s

    def array(self, depth):
        k = self.r.randrange(5)
        if k == 0:  # a tuple
            s = {"type": "array", "prefixItems": [self.leaf() for _ in range(self.r.randrange(1, 4))]}
            s["items"] = False if self.chance(0.5) else self.leaf()
            if s["items"] is not False and self.chance(0.5):
                s["maxItems"] = len(s["prefixItems"]) + self.r.randrange(0, 3)
            return s
        s = {"type": "array", "items": self.obj(depth) if k < 3 else self.leaf()}
        if self.chance(0.5):
            s["minItems"] = self.r.randrange(0, 3)
        # a bound is rarer on arrays of objects: the compiler writes the item out once per position, and bounds
        # nested in bounds multiply (a few such schemas stay, as the compile-time cases)
        if self.chance(0.5 if k >= 3 else 0.2):
            s["maxItems"] = s.get("minItems", 0) + self.r.randrange(0, 5)
        return s

    def any_of(self, depth):
        if self.chance(0.5):
            return {"anyOf": [self.value(depth) for _ in range(self.r.randrange(2, 4))]}
        # oneOf, disjoint: objects told apart by a required const tag, or values of different types
        if self.chance(0.6):
            tags = self.r.sample(["circle", "square", "text", "image", "user", "bot", "a", "b"], self.r.randrange(2, 4))
            branches = []
            for t in tags:
                o = self.obj(max(depth - 1, 0), self.r.randrange(0, 3))
                o["properties"] = {"kind": {"const": t}, **o["properties"]}
                o["required"] = ["kind"] + [k for k in o.get("required", []) if k != "kind"]
                o.pop("additionalProperties", None)
                branches.append(o)
            return {"oneOf": branches}
        return {"oneOf": [{"type": "string", "maxLength": 12}, {"type": "integer"}, {"type": "boolean"},
                          {"type": "null"}][: self.r.randrange(2, 5)]}

    def ref_to(self, schema):
        name = "d%d" % len(self.defs)
        self.defs[name] = schema
        return {"$ref": "#/$defs/" + name}

    def recursive(self):
        """A self-referencing shape whose base case is reachable (optional or possibly empty children)."""
        k = self.r.randrange(4)
        label = {"type": "string", "maxLength": 10}
        if k == 0:  # a tree
            self.defs["node"] = {"type": "object", "properties": {"label": label, "children": {
                "type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}}, "required": ["label"]}
        elif k == 1:  # a linked list, ending in null
            self.defs["node"] = {"type": "object", "properties": {"value": {"type": "integer"}, "next": {
                "anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["value", "next"]}
        elif k == 2:  # an expression
            self.defs["node"] = {"oneOf": [
                {"type": "integer", "minimum": 0, "maximum": 99},
                {"type": "object", "properties": {"op": {"enum": ["+", "-", "*"]}, "args": {
                    "type": "array", "items": {"$ref": "#/$defs/node"}, "minItems": 2, "maxItems": 2}},
                 "required": ["op", "args"]}]}
        else:  # a menu: nested through an optional member
            self.defs["node"] = {"type": "object", "properties": {"title": label, "sub": {"$ref": "#/$defs/node"}},
                                 "required": ["title"]}
        return {"$ref": "#/$defs/node"}

    def schema(self, i):
        self.defs = {}
        k = i % 10
        if k in (0, 1, 2, 3):
            s = self.obj(self.r.randrange(1, 4), self.r.randrange(1, 6))
        elif k == 4:
            s = {"type": "array", "items": self.obj(self.r.randrange(0, 3)), "maxItems": self.r.randrange(1, 6)}
        elif k == 5:
            s = self.any_of(self.r.randrange(1, 3))
        elif k == 6:
            s = {"type": "object", "properties": {"root": self.recursive(), "meta": self.value(1)},
                 "required": ["root"]}
        elif k == 7:
            s = self.array(self.r.randrange(0, 3))
        elif k == 8:
            s = self.leaf() if self.chance(0.5) else self.obj(1)
        else:
            inner = self.obj(self.r.randrange(0, 3))
            s = {"type": "object", "properties": {"data": self.ref_to(inner), "errors": {
                "type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 2}}, "required": ["data"]}
        out = {"$schema": "https://json-schema.org/draft/2020-12/schema"} if self.chance(0.2) else {}
        out.update(s)
        if self.defs:
            out["$defs"] = self.defs
        return out


def main():
    check = "--check" in sys.argv[1:]
    g = Gen(random.Random(SEED))
    changed = 0
    for i in range(COUNT):
        text = json.dumps(g.schema(i), ensure_ascii=False, separators=(",", ":")) + "\n"
        path = os.path.join(HERE, "gen-%03d.json" % i)
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            changed += 1
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if check and changed:
        print("generate.py: %d of %d files differ from the generator's output" % (changed, COUNT))
        return 1
    print("generate.py: %d files, %d %s" % (COUNT, changed, "differ" if check else "written"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
