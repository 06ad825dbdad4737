"""The dataclasses against docs/openapi.json (no daemon needed): each has
exactly its schema's fields, and every example the document gives parses.
pool/api's Go test holds the same document to the server."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, Iterator, Tuple

import pytest

from kernpool_client import (APIError, AsyncClient, Client, Display, Health, Isolation, KernelInfo, KernelResult,
                             Result, ToolCall, Variable, Variables)
from kernpool_client import _wire

DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs", "openapi.json")

CLASSES = {"Result": Result, "KernelResult": KernelResult, "Isolation": Isolation, "Display": Display,
           "ToolCall": ToolCall, "KernelInfo": KernelInfo, "Variable": Variable, "Variables": Variables,
           "Health": Health}


@pytest.fixture(scope="module")
def doc() -> Dict[str, Any]:
    with open(DOC) as f:
        return json.load(f)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_dataclass_has_the_schema_fields(doc: Dict[str, Any], name: str) -> None:
    props = set(doc["components"]["schemas"][name]["properties"])
    mine = {f.name for f in dataclasses.fields(CLASSES[name])} - {"raw"}
    assert mine == props, "%s: missing %s, extra %s" % (name, sorted(props - mine), sorted(mine - props))


def examples(doc: Dict[str, Any]) -> Iterator[Tuple[str, str, str, Any]]:
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            for status, resp in op["responses"].items():
                for mt, media in resp.get("content", {}).items():
                    ref = media["schema"].get("$ref", "")
                    for name, ex in media.get("examples", {}).items():
                        yield "%s %s %s %s" % (method, path, status, name), mt, ref.rsplit("/", 1)[-1], ex["value"]


def test_every_response_example_parses(doc: Dict[str, Any]) -> None:
    n = 0
    for where, mt, schema, value in examples(doc):
        if mt == "application/x-ndjson" and schema == "DrainStatus":
            # POST /v1/drain?wait=true: one progress object per line.
            assert all(json.loads(line)["state"] for line in value.splitlines()), where
            n += 1
        elif mt == "application/x-ndjson":
            st = _wire.StreamState(None, None, lambda d: None)
            for line in value.splitlines():
                ev = st.parse(line.encode())
                st.output_callback(ev)
                _wire.tool_call_of(ev)
                try:
                    _wire.final_of(ev)
                except APIError as e:
                    assert e.code in doc["components"]["schemas"]["ErrorCode"]["enum"]
                n += 1
        elif schema in CLASSES:
            obj = CLASSES[schema].from_json(value)
            assert dataclasses.is_dataclass(obj), where
            n += 1
        elif schema == "KernelList":
            assert all(KernelInfo.from_json(k).id for k in value["kernels"]), where
            n += 1
    assert n >= 12


def test_every_error_example_is_an_api_error(doc: Dict[str, Any]) -> None:
    codes = set(doc["components"]["schemas"]["ErrorCode"]["enum"])
    seen = set()
    for name, resp in doc["components"]["responses"].items():
        for ex in resp["content"]["application/json"]["examples"].values():
            e = _wire.api_error(400, json.dumps(ex["value"]).encode(), "3")
            assert e.code in codes and e.message == ex["value"]["error"] and e.retry_after == 3
            seen.add(e.code)
    assert seen == codes


def test_examples_match_their_schemas(doc: Dict[str, Any]) -> None:
    """Every example (request, response, each NDJSON line, each error)
    validates against its schema (JSON Schema 2020-12, as OpenAPI 3.1 says)."""
    jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema is not installed (.ci/run installs it)")
    for name, schema in doc["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)
    resolver = jsonschema.RefResolver.from_schema(doc)
    n = 0

    def check(schema: Dict[str, Any], value: Any, where: str) -> None:
        nonlocal n
        errors = list(jsonschema.Draft202012Validator(schema, resolver=resolver).iter_errors(value))
        assert not errors, "%s: %s" % (where, [e.message for e in errors[:3]])
        n += 1

    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            contents = [("request", op.get("requestBody", {}).get("content", {}))]
            contents += [(status, r.get("content", {})) for status, r in op["responses"].items()]
            for status, content in contents:
                for mt, media in content.items():
                    for name, ex in media.get("examples", {}).items():
                        where = "%s %s %s %s %s" % (method, path, status, mt, name)
                        if mt == "application/x-ndjson":
                            for i, line in enumerate(ex["value"].splitlines()):
                                check(media["schema"], json.loads(line), "%s line %d" % (where, i + 1))
                        else:
                            check(media["schema"], ex["value"], where)
    for name, resp in doc["components"]["responses"].items():
        for mt, media in resp["content"].items():
            for ename, ex in media["examples"].items():
                check(media["schema"], ex["value"], "response %s %s" % (name, ename))
    assert n >= 50


# The method(s) of Client and AsyncClient for each operation of
# docs/openapi.json (as pool/api's TestGoClientCoversEveryOperation for the
# Go client): an endpoint added without a method fails here.
METHODS = {
    "execute": ["execute"], "answerToolCall": ["answer_tool_call"], "listKernels": ["ps"], "killKernel": ["kill"],
    "interruptKernel": ["interrupt"], "kernelVariables": ["variables"], "kernelSpill": ["spill"],
    "interruptOwner": ["interrupt"], "shutdownOwner": ["shutdown"], "health": ["health"], "settings": ["settings"],
    "metrics": ["metrics"], "ready": ["ready"], "drain": ["drain"], "drainStatus": ["drain_status"],
    "createSession": ["create_session"], "listSessions": ["sessions"], "getSession": ["session"],
    "deleteSession": ["delete_session"], "restartSession": ["restart_session"], "interruptSession": ["interrupt"],
    "sessionVariables": ["variables"],
    "fileList": ["list_files"], "fileListOwner": ["list_files"], "fileListSession": ["list_files"],
    "fileDownload": ["download"], "fileDownloadOwner": ["download"], "fileDownloadSession": ["download"],
    "fileUpload": ["upload"], "fileUploadOwner": ["upload"], "fileUploadSession": ["upload"],
    "fileDelete": ["delete_file"], "fileDeleteOwner": ["delete_file"], "fileDeleteSession": ["delete_file"],
}


@pytest.mark.parametrize("cls", [Client, AsyncClient], ids=["Client", "AsyncClient"])
def test_every_operation_has_a_method(doc: Dict[str, Any], cls: Any) -> None:
    ids = []
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            ids.append(op["operationId"])
            assert op["operationId"] in METHODS, "%s %s: no client method is listed for it" % (method, path)
            for name in METHODS[op["operationId"]]:
                assert callable(getattr(cls, name, None)), "%s %s: %s has no method %s" % (
                    method, path, cls.__name__, name)
    assert sorted(ids) == sorted(METHODS)
