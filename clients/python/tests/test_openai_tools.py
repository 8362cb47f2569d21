"""Tool calling on /v1/chat/completions, driven by the official `openai` package and by
`instructor` (its TOOLS and JSON_SCHEMA modes, through its own code paths), against the real
`conveyor serve` with SmolLM2: with its own template (no tools: conveyor's generic JSON format),
and with the Qwen2.5, Llama 3.1 and Mistral Nemo templates (--chat-template: each family's own
tool format, rendered and parsed by llama.cpp's chat layer, `required` enforced by its grammar).
Rendering and parsing per family are also tested in tests/unit/model/tool_chat_test.cpp."""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")

from test_openai_http import HttpServer  # noqa: E402  (skips the module when CONVEYOR_BIN is not set)
from test_openai_http import http_server as server  # noqa: E402,F401  (the module's server: SmolLM2, its own template)

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40}},
                   "required": ["city"]}}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]

# Five different functions (strings and numbers bounded, as a real tool's usually are).
SCHEMAS = {
    "get_weather": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 40},
                                                     "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city", "unit"]},
    "add": {"type": "object", "properties": {"a": {"type": "integer", "minimum": -1000, "maximum": 1000},
                                             "b": {"type": "integer", "minimum": -1000, "maximum": 1000}},
            "required": ["a", "b"]},
    "set_alarm": {"type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
                                                   "minute": {"type": "integer", "minimum": 0, "maximum": 59},
                                                   "label": {"type": "string", "maxLength": 30}},
                  "required": ["hour", "minute"]},
    "search": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 60},
                                                "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
               "required": ["query"]},
    "send_email": {"type": "object", "properties": {"to": {"type": "string", "maxLength": 40},
                                                    "urgent": {"type": "boolean"},
                                                    "tags": {"type": "array", "maxItems": 3,
                                                             "items": {"enum": ["work", "home", "later"]}}},
                   "required": ["to", "urgent"]},
}
TASKS = {
    "get_weather": "What is the weather in Oslo, in celsius?",
    "add": "What is 17 plus 25?",
    "set_alarm": "Wake me up at 7:30.",
    "search": "Find recipes for lentil soup.",
    "send_email": "Email bob@example.com that the build is green.",
}


def tool(name):
    return {"type": "function", "function": {"name": name, "parameters": SCHEMAS[name]}}


def required_call(client, model, i, max_tokens):
    """Request i of a run: the task of one of the five functions, all five offered, one call
    required at temperature 1; the call must parse and validate against its function's schema."""
    name = list(SCHEMAS)[i % len(SCHEMAS)]
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": TASKS[name]}],
                                       tools=[tool(n) for n in SCHEMAS], tool_choice="required",
                                       parallel_tool_calls=False, temperature=1.0, seed=i, max_tokens=max_tokens)
    calls = r.choices[0].message.tool_calls or []
    assert r.choices[0].finish_reason == "tool_calls" and len(calls) == 1, r.model_dump_json()
    jsonschema.validate(json.loads(calls[0].function.arguments), SCHEMAS[calls[0].function.name])
    return calls[0].function.name


def test_required_call_comes_back_as_tool_calls(server):
    r = server.openai().chat.completions.create(model=server.model, messages=ASK, tools=[WEATHER],
                                                tool_choice="required", temperature=0, max_tokens=64)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])


def test_a_named_function_is_the_one_called(server):
    tools = [tool("add"), tool("search"), WEATHER]
    r = server.openai().chat.completions.create(model=server.model, messages=ASK, tools=tools, temperature=0,
                                                tool_choice={"type": "function", "function": {"name": "search"}},
                                                max_tokens=96)
    (call,) = r.choices[0].message.tool_calls
    assert call.function.name == "search"
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS["search"])


def test_streamed_tool_call_deltas_add_up_to_the_whole_answer(server):
    client = server.openai()
    kw = dict(model=server.model, messages=ASK, tools=[WEATHER, tool("add")], tool_choice="required",
              temperature=0, max_tokens=64)
    whole = client.chat.completions.create(**kw).choices[0]
    calls, finish = {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        for c in chunk.choices:
            finish = c.finish_reason or finish
            for d in c.delta.tool_calls or []:
                call = calls.setdefault(d.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = d.id or call["id"]
                call["name"] += d.function.name or ""
                call["arguments"] += d.function.arguments or ""
    assert finish == "tool_calls"
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == \
        [(t.function.name, json.loads(t.function.arguments)) for t in whole.message.tool_calls]
    assert all(c["id"].startswith("call_") for c in calls.values())


def test_auto_may_answer_without_a_tool_and_streams_that_answer(server):
    client = server.openai()
    kw = dict(model=server.model, messages=[{"role": "user", "content": "Say hello."}], tools=[WEATHER],
              tool_choice="auto", temperature=0, max_tokens=24)
    whole = client.chat.completions.create(**kw).choices[0]
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(stream=True, **kw)
                       if c.choices)
    if whole.message.tool_calls:  # the model chose a call: still a valid one
        jsonschema.validate(json.loads(whole.message.tool_calls[0].function.arguments), WEATHER["function"]["parameters"])
    else:
        assert whole.message.content and not whole.message.content.startswith("{")  # the text, not its JSON
        assert streamed == whole.message.content


def test_tool_results_in_the_history_are_answered(server):
    client = server.openai()
    first = client.chat.completions.create(model=server.model, messages=ASK, tools=[WEATHER], tool_choice="required",
                                           temperature=0, max_tokens=64).choices[0].message
    history = ASK + [first.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "18 C and sunny"}]
    r = client.chat.completions.create(model=server.model, messages=history, tools=[WEATHER], temperature=0,
                                       max_tokens=32)
    assert r.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert r.usage.prompt_tokens > 100  # the tools, the call and its result are all in the prompt


def test_tool_choice_required_200_of_200_calls_validate_at_temperature_1(server):
    client = server.openai()
    with ThreadPoolExecutor(16) as pool:
        called = list(pool.map(lambda i: required_call(client, server.model, i, 160), range(200)))
    assert len(called) == 200  # each one parsed and validated (required_call)


def test_instructor_tools_and_json_schema_modes(server):
    instructor = pytest.importorskip("instructor")
    pydantic = pytest.importorskip("pydantic")

    class Weather(pydantic.BaseModel):
        city: str = pydantic.Field(max_length=40)
        celsius: int = pydantic.Field(ge=-60, le=60)

    for mode in (instructor.Mode.TOOLS, instructor.Mode.JSON_SCHEMA):
        client = instructor.from_openai(server.openai(), mode=mode)
        w = client.chat.completions.create(model=server.model, response_model=Weather, max_retries=0,
                                           messages=[{"role": "user", "content": "It is 21 degrees in Paris."}],
                                           temperature=0, max_tokens=64)
        assert isinstance(w, Weather) and -60 <= w.celsius <= 60


TEMPLATES = os.environ.get("CONVEYOR_JINJA_TEMPLATES", "/usr/local/llama-jinja/share/llama-jinja/templates")


@pytest.mark.parametrize("template", ["Qwen-Qwen2.5-7B-Instruct.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                                      "mistralai-Mistral-Nemo-Instruct-2407.jinja"])
def test_native_family_formats_enforce_required_calls(template):
    path = os.path.join(TEMPLATES, template)
    assert os.path.exists(path), path + " missing. HINT: run scripts/build_jinja.sh (setup.sh does)"
    s = HttpServer("--no-journal", "--chat-template", path)
    try:
        client = s.openai()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: required_call(client, s.model, i, 300), range(20)))
        assert s.stop(timeout=30) == 0, s.logs()
    finally:
        s.kill()


@pytest.mark.parametrize("body,param", [
    ({"tools": {"type": "function"}}, "tools"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
    ({"tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": [WEATHER], "parallel_tool_calls": "yes"}, "parallel_tool_calls"),
    ({"functions": [WEATHER["function"]]}, "functions"),
    ({"tools": [WEATHER], "response_format": {"type": "json_object"}}, "response_format"),
    ({"messages": ASK + [{"role": "tool", "content": "18 C"}]}, "messages[1].tool_call_id"),
    ({"messages": ASK + [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "f", "arguments": "{oops"}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
])
def test_bad_tool_fields_are_400_naming_the_field(server, body, param):
    status, err = server.post("/v1/chat/completions", {"messages": ASK, **body})
    assert status == 400, err
    assert err["error"]["param"] == param, err
