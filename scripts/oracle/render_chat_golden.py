#!/usr/bin/env python3
"""Golden renders of DFM-Mimir's chat template, made exactly the way training rendered it.

Training (HRM-Text scripts/tokenize_chat_template.py, see ../shared/docs/TOKENIZER.md §6) used a
plain jinja2.Environment() and template.render(messages=..., tools=<list or []>,
add_generation_prompt=..., enable_thinking=False, bos_token="<bos>", eos_token="<eos>").
This script does the same for a hand-written set of conversations that exercises every branch of
the template, plus every request of ../shared/data/prompts/*.jsonl and the 19 requests of
../shared/data/mimir/training-tokenizer-audit.json (whose recorded `rendered` strings must come
out identical, or the script fails). Conversations on which jinja2 itself raises are recorded
with "error" so that frigg is checked to refuse them too.

Output: golden/chat/conversations.jsonl. Line 1 is {"meta": {...}} (jinja2/Python versions,
template sha256); every other line is {"name", "messages", "tools", "add_generation_prompt",
"expected"} or {..., "error": "<jinja2's exception>"}; "normalize": true marks cases rendered after
the training script's message normalisation (frigg_chat_normalize_messages in C).

Usage (from the repository root): python3 scripts/oracle/render_chat_golden.py [../shared]
"""
import hashlib
import json
import platform
import sys
from pathlib import Path

import jinja2

SHARED = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared")
TEMPLATE_PATH = SHARED / "data/mimir/gemma4_native_chat.jinja"
AUDIT_PATH = SHARED / "data/mimir/training-tokenizer-audit.json"
OUT = Path("golden/chat/conversations.jsonl")

template_text = TEMPLATE_PATH.read_text(encoding="utf-8")
TEMPLATE = jinja2.Environment().from_string(template_text)


def render(messages, tools, agp):
    return TEMPLATE.render(messages=messages, tools=tools if tools is not None else [],
                           add_generation_prompt=agp, enable_thinking=False,
                           bos_token="<bos>", eos_token="<eos>")


def U(c):
    return {"role": "user", "content": c}


def A(c, **kw):
    return dict({"role": "assistant", "content": c}, **kw)


def S(c):
    return {"role": "system", "content": c}


def T(c, **kw):
    return dict({"role": "tool", "content": c}, **kw)


def call(name, args, id=None):
    d = {"type": "function", "function": {"name": name, "arguments": args}}
    if id is not None:
        d["id"] = id
    return d


def fn(name, desc=None, params=None, **extra):
    f = {"name": name}
    if desc is not None:
        f["description"] = desc
    if params is not None:
        f["parameters"] = params
    f.update(extra)
    return {"type": "function", "function": f}


WEATHER = fn("get_weather", "Get the weather", {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"], "description": "Unit"},
        "days": {"type": "integer"},
        "Tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}, "required": ["deep"]},
    },
    "required": ["city"],
})

NESTED = fn("book_trip", "Book a trip — med æøå", {
    "type": "object",
    "properties": {
        "travellers": {"type": "array", "description": "Who travels",
                       "items": {"type": "object",
                                 "properties": {"name": {"type": "string"}, "age": {"type": "integer", "nullable": True}},
                                 "required": ["name"]}},
        "class": {"type": "string", "enum": ["economy", "business", "first"], "nullable": True},
        "budget": {"type": "number", "description": "Max price in DKK"},
        "flexible": {"type": "boolean"},
        "_internal": {"type": "string"},
        "Zeta": {"type": "object", "description": "bare mapping (no properties key)",
                 "extra": {"type": "string", "description": "kept"}, "required": ["extra"]},
        "codes": {"type": "array", "items": {"type": ["string", "null"], "enum": ["A", "B"], "minItems": 1, "gone": None}},
        "matrix": {"type": "array", "items": {"type": "array"}},
        "emptyitems": {"type": "array", "items": {}},
        "anything": {},
        "Æble": {"type": "string"},
        "æble": {"type": "string", "description": "tie with Æble in lower case: insertion order"},
        "İd": {"type": "string"},
        "id": {"type": "string"},
    },
    "required": ["travellers", "budget"],
})

ODD_DECLS = [
    fn("no_params"),
    fn("empty_params", "p is {}", {}),
    fn("no_type", "parameters without a type leave parameters:{ unclosed",
       {"properties": {"q": {"type": "string"}}}),
    fn("only_type", None, {"type": "object"}),
    fn("with_response", "has a response", {"type": "object", "properties": {"x": {"type": "number"}}},
       response={"description": "The result", "type": "object"}),
    fn("null_response", "response null", None, response=None),
    fn("string_response_type", "response type string", None, response={"type": "string"}),
    fn("null_description", None, {"type": "object", "properties": {"n": {"type": "string", "description": None}}}),
]
ODD_DECLS[5]["function"]["description"] = None  # renders as "None"

FLOATS = {"a": 1e-05, "b": 1e+20, "c": 0.1, "d": 1.0, "e": -0.0, "f": 123456789.123, "g": 1e16,
          "h": 1e15, "i": 5e-324, "j": 1.7976931348623157e308, "k": 0.0001, "l": 2.5e-7,
          "m": 9007199254740993, "n": -42, "o": 0, "p": 3.14159, "q": 100.0, "r": 1.5e300}


def cases():
    yield "user_only_trim", [U("  Hej verden!  ")], None, True
    yield "user_only_no_agp", [U("Hej")], None, False
    yield "sys_user", [S("Du er en hjælpsom assistent."), U("Hvad er 2+2?")], None, True
    yield "developer_first", [{"role": "developer", "content": "  Dev says hi\n"}, U("x")], None, True
    yield "system_only_agp", [S("Kun system")], None, True
    yield "system_only_no_agp", [S("Kun system")], None, False
    yield "system_parts", [{"role": "system", "content": [{"type": "text", "text": " Del 1 "}, {"type": "text", "text": "Del 2\n"}, {"text": "ingen type"}]}, U("Hej")], None, True
    yield "system_mid_conversation", [U("a"), A("b"), S(" later system "), U("c")], None, True
    yield "multi_turn_thinking_stripped", [U("Hi"), A("Hello! <|channel>thought\nx<channel|>How can I help?"), U("Bye")], None, True
    yield "multi_turn_no_agp", [U("Hi"), A("Hello!"), U("Bye"), A("Farvel.")], None, False
    yield "thinking_edge_cases", [U("q"), A("<channel|>a<|channel>b<channel|>c<|channel>unclosed"), U("q2"), A("  x <|channel>y")], None, False
    yield "assistant_continuation", [U("q"), A("first"), A("second"), {"role": "model", "content": "raw model role"}], None, True
    yield "assistant_empty_and_null", [U("q"), A(""), U("r"), A(None)], None, True
    yield "user_parts_and_media", [{"role": "user", "content": [{"type": "text", "text": "  se her  "}, {"type": "image"}, {"type": "text", "text": "og\n"}, {"type": "audio"}, {"type": "video"}]}], None, True
    yield "assistant_parts", [U("q"), {"role": "assistant", "content": [{"type": "text", "text": " a <|channel>t<channel|>b "}, {"type": "text", "text": "c"}]}], None, True
    yield "user_null_content", [{"role": "user", "content": None}, {"role": "user"}], None, True
    yield "unicode_mix", [S("Svar på dansk 🇩🇰."), U("Forklar æ, ø og å. 😊 中文 日本語 한국어 مرحبا é naïve Straße 🧑🏽‍💻")], None, True
    yield "whitespace_python_strip", [U("\u00a0\u3000\u2028\x1c\t\r\n tekst \u200b\u00a0\u2003\x85\x0b\x0c"), A("\u200b kept zero-width \u200b"), U("\ufeffBOM is not whitespace\ufeff")], None, True
    yield "crlf_tabs", [U("a\tb\nc\r\nd"), A("line1\r\nline2\r\n")], None, True
    yield "tool_decl_doc", [S("Sys"), U("Weather in Aarhus?")], [WEATHER], True
    yield "tool_decl_no_system", [U("Weather?")], [WEATHER], True
    yield "tool_decl_nested", [U("Book")], [NESTED], True
    yield "tool_decl_odd", [S("odd")], ODD_DECLS, True
    yield "tool_decl_python_str_scalars", [U("s")], [fn("scalars", False, {"type": "object", "properties": {"t": {"type": "string", "description": True}, "i": {"type": "integer", "description": 5}, "f": {"type": "number", "description": 2.5e-07}, "n": {"type": "string", "description": None}, "e": {"type": "number", "enum": [1, 1.5, None, True]}, "s": {"type": "string", "enum": [1, 1.5, None, True, "x"]}, "r": {"type": "boolean"}}, "required": [1, "t", None]})], True
    yield "tool_decl_two_tools", [S(" s "), U("u")], [WEATHER, fn("lookup", "Slå op", {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})], False
    yield "call_args_doc", [U("Weather?"), A("", tool_calls=[call("get_weather", {"city": "Aarhus", "days": 3, "flag": True, "lst": [1, "a"], "nested": {"a": 2, "B": 1}, "ratio": 0.5, "x": None})])], [WEATHER], True
    yield "call_args_floats", [U("f"), A("", tool_calls=[call("nums", FLOATS)])], None, True
    yield "call_args_sorting", [U("s"), A("", tool_calls=[call("keys", {"b": 1, "B": 2, "a": 3, "A": 4, "_x": 5, "Z": 6, "æble": 7, "Æble": 8, "øl": 9, "İd": 10, "id": 11, "ID": 12, "a b": 13, "": 14})])], None, True
    yield "call_args_string_raw", [U("s"), A("", tool_calls=[call("raw", "city:<|\"|>Aarhus<|\"|>")])], None, True
    yield "call_args_json_string_raw", [U("s"), A("", tool_calls=[call("raw", "{\"city\": \"Aarhus\"}")])], None, True
    yield "call_args_missing_or_other", [U("s"), A("", tool_calls=[{"function": {"name": "noargs"}}, call("listargs", [1, 2]), call("nullargs", None), call("numargs", 5)])], None, True
    yield "call_args_unicode_nested", [U("u"), A("", tool_calls=[call("deep", {"tekst": "Hej 😊 \"citat\" <|\"|> inde", "liste": [{"K": [True, False, None]}, [], {}], "tom": "", "ny\nlinje": "a\nb"})])], None, True
    yield "round_trip_response", [U("Weather in Aarhus?"), A("", tool_calls=[call("get_weather", {"city": "Aarhus"}, id="call_0")]), T("12 C", tool_call_id="call_0")], [WEATHER], True
    yield "round_trip_final", [U("Weather in Aarhus?"), A("", tool_calls=[call("get_weather", {"city": "Aarhus"}, id="call_0")]), T("12 C", tool_call_id="call_0"), A("It is 12 C.")], [WEATHER], True
    yield "round_trip_final_no_agp", [U("Weather in Aarhus?"), A("", tool_calls=[call("get_weather", {"city": "Aarhus"}, id="call_0")]), T("12 C", tool_call_id="call_0"), A("It is 12 C.")], [WEATHER], False
    yield "pending_call_agp", [U("Weather?"), A("Let me check.", tool_calls=[call("get_weather", {"city": "Kbh"})])], [WEATHER], True
    yield "pending_call_no_agp", [U("Weather?"), A("", tool_calls=[call("get_weather", {"city": "Kbh"})])], [WEATHER], False
    yield "call_with_content_and_response", [U("q"), A("Tjekker nu", tool_calls=[call("f", {"a": 1}, id="x")]), T("svar", tool_call_id="x"), U("tak")], None, True
    yield "two_calls_out_of_order", [U("q"), A("", tool_calls=[call("f", {"a": 1}, id="c1"), call("g", {"b": 2}, id="c2")]), T("for g", tool_call_id="c2"), T("for f", tool_call_id="c1"), A("done")], None, True
    yield "tool_name_fallback", [U("q"), A("", tool_calls=[call("f", {}, id="c1")]), T("by name", tool_call_id="nomatch", name="named_tool")], None, True
    yield "tool_ids_both_missing", [U("q"), A("", tool_calls=[call("f", {"a": "x"})]), T("none==none")], None, True
    yield "tool_content_parts", [U("q"), A("", tool_calls=[call("f", {}, id="c")]), T([{"type": "text", "text": " part1 "}, {"type": "image"}, {"type": "text", "text": "part2"}], tool_call_id="c")], None, True
    yield "tool_content_scalars", [U("q"), A("", tool_calls=[call("f", {}, id="a"), call("g", {}, id="b"), call("h", {}, id="c"), call("i", {}, id="d")]), T(None, tool_call_id="a"), T(42, tool_call_id="b"), T(True, tool_call_id="c"), T(0.25, tool_call_id="d")], None, True
    yield "tool_content_missing", [U("q"), A("", tool_calls=[call("f", {}, id="a")]), {"role": "tool", "tool_call_id": "a"}], None, False
    yield "orphan_tool_message", [U("q"), T("orphan", name="x"), A("svar")], None, True
    yield "tool_then_user", [U("q"), A("", tool_calls=[call("f", {"a": 1}, id="c")]), T("r", tool_call_id="c"), U("next"), A("ok")], None, True
    yield "legacy_tool_responses", [U("q"), A("Resultat:", tool_calls=[call("f", {"a": 1})], tool_responses=[{"name": "f", "response": {"temp": 12.5, "Unit": "C", "list": [1, "x"]}}, {"response": "plain"}])], None, True
    yield "legacy_tool_responses_no_content", [U("q"), A("", tool_responses=[{"name": "f", "response": "r"}])], None, True
    yield "reasoning_with_call", [U("q"), A("", reasoning="I should call f", tool_calls=[call("f", {"a": 1})])], None, True
    yield "reasoning_content_with_call", [U("q"), A("", reasoning_content="tænker", tool_calls=[call("f", {})], id="ignored")], None, True
    yield "reasoning_without_call_dropped", [U("q"), A("svar", reasoning="dropped")], None, True
    yield "reasoning_before_last_user_dropped", [U("q"), A("", reasoning="old", tool_calls=[call("f", {}, id="c")]), T("r", tool_call_id="c"), U("q2")], None, True
    yield "call_with_image_content", [U("q"), A([{"type": "image"}], tool_calls=[call("f", {})])], None, True
    yield "long_multi_turn_tools", [S("System med værktøjer"), U("Vejret i Aarhus og Odense?"), A("", tool_calls=[call("get_weather", {"city": "Aarhus"}, id="c0"), call("get_weather", {"city": "Odense", "days": 2}, id="c1")]), T("12 C", tool_call_id="c0"), T([{"type": "text", "text": "10 C"}], tool_call_id="c1"), A("Aarhus: 12 C, Odense: 10 C."), U("Og i morgen?"), A("", tool_calls=[call("get_weather", {"city": "Aarhus", "days": 1}, id="c2")]), T("11 C", tool_call_id="c2")], [WEATHER], True
    # jinja2 itself fails on these: frigg must refuse them too.
    yield "err_empty_messages", [], None, True
    yield "err_tool_no_name", [U("q"), A("", tool_calls=[call("f", {}, id="x")]), T("r", tool_call_id="y")], None, True
    yield "err_tool_content_object", [U("q"), A("", tool_calls=[call("f", {}, id="x")]), T({"a": 1}, tool_call_id="x")], None, True
    yield "err_tool_part_text_missing", [U("q"), A("", tool_calls=[call("f", {}, id="x")]), T([{"type": "text"}], tool_call_id="x")], None, True
    yield "err_call_no_function", [U("q"), A("", tool_calls=[{"id": "x"}])], None, True
    yield "err_decl_no_function", [U("q")], [{"type": "function", "name": "f"}], True


def normalize(messages):
    """The training script's normalize_message, as far as it changes a rendering (see chat.h):
    environment -> tool, null content -> "", default tool name/tool_call_id, JSON-string arguments
    holding an object -> that object. Written from its description, for the "normalize" cases."""
    out = []
    for m in messages:
        m = dict(m)
        if m.get("role") == "environment":
            m["role"] = "tool"
        if m.get("content") is None:
            m["content"] = ""
        if m.get("role") == "tool":
            if not m.get("name"):
                m["name"] = "tool"
            if not m.get("tool_call_id"):
                m["tool_call_id"] = "call_0"
        if isinstance(m.get("tool_calls"), list):
            calls = []
            for c in m["tool_calls"]:
                c = dict(c)
                f = c.get("function")
                if isinstance(f, dict) and isinstance(f.get("arguments"), str):
                    f = dict(f)
                    try:
                        parsed = json.loads(f["arguments"])
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict):
                        f["arguments"] = parsed
                    c["function"] = f
                calls.append(c)
            m["tool_calls"] = calls
        out.append(m)
    return out


def normalize_cases():
    yield "normalize/openai_json_arguments", [U("Vejret?"), A(None, tool_calls=[call("get_weather", "{\"city\": \"Aarhus\", \"days\": 2}", id="call_abc")]), T("12 C", tool_call_id="call_abc")], [WEATHER], True
    yield "normalize/environment_and_defaults", [U("q"), A("", tool_calls=[call("f", "{}", id="call_0")]), {"role": "environment", "content": None}], None, True
    yield "normalize/unparsable_arguments_stay_raw", [U("q"), A("", tool_calls=[call("f", "not json", id="x"), call("g", "[1, 2]", id="y")])], None, False


def prompt_cases():
    for lang in ("da", "en"):
        path = SHARED / f"data/prompts/{lang}_prompts.jsonl"
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                r = json.loads(line)
                yield "prompts/" + r["name"], r["messages"], r.get("tools"), True


def main():
    audit = json.loads(AUDIT_PATH.read_text(encoding="utf-8"))
    meta = {"jinja2": jinja2.__version__, "python": platform.python_version(),
            "template": str(TEMPLATE_PATH.name),
            "template_sha256": hashlib.sha256(template_text.encode("utf-8")).hexdigest(),
            "render": "jinja2.Environment().from_string(t).render(messages, tools or [], add_generation_prompt, enable_thinking=False, bos_token='<bos>', eos_token='<eos>')"}
    lines = [json.dumps({"meta": meta}, ensure_ascii=False)]
    n_ok = n_err = 0
    names = set()

    def add(name, messages, tools, agp, must_equal=None, normalized=False):
        nonlocal n_ok, n_err
        assert name not in names, name
        names.add(name)
        rec = {"name": name, "messages": messages, "tools": tools, "add_generation_prompt": agp}
        if normalized:
            rec["normalize"] = True
        try:
            rec["expected"] = render(normalize(messages) if normalized else messages, tools, agp)
            n_ok += 1
        except Exception as e:  # jinja2's own failure is part of the golden
            assert name.startswith("err_"), (name, e)
            rec["error"] = f"{type(e).__name__}: {e}"
            n_err += 1
        if must_equal is not None and rec.get("expected") != must_equal:
            sys.exit(f"{name}: jinja2 render differs from the audit file's `rendered` string")
        lines.append(json.dumps(rec, ensure_ascii=False))

    for name, m, t, agp in cases():
        add(name, m, t, agp)
    for name, m, t, agp in normalize_cases():
        add(name, m, t, agp, normalized=True)
    for name, m, t, agp in prompt_cases():
        add(name, m, t, agp)
    for i, r in enumerate(audit["models"]["noctrex"]["results"]):
        add(f"audit/{i:02d}", r["request"]["messages"], None, True, must_equal=r["rendered"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{OUT}: {n_ok} renders, {n_err} jinja2 errors, jinja2 {jinja2.__version__}")


if __name__ == "__main__":
    main()
