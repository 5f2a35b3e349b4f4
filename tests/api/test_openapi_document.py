"""``memstack openapi``: the document, its security schemes, the copy the TypeScript client is made from."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memstack import __version__

from tests.api.conftest import Api, rest_event

ROOT = Path(__file__).resolve().parents[2]


def cli_document() -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "memstack", "openapi"], capture_output=True, text=True, check=True, timeout=120
    )
    return json.loads(out.stdout)


def test_the_cli_prints_what_the_server_serves(api: Api) -> None:
    status, served = api("GET", "/openapi.json", key=None)
    assert status == 200
    document = cli_document()
    assert document == served
    assert document["info"]["version"] == __version__
    # The TypeScript client is generated from the committed copy: it must be today's document.
    committed = json.loads((ROOT / "clients" / "typescript" / "openapi.json").read_text())
    assert committed == document, (
        "run: memstack openapi > clients/typescript/openapi.json && npm run generate"
    )


def test_security_schemes_make_swagger_authorize_work(api: Api) -> None:
    _, doc = api("GET", "/openapi.json", key=None)
    schemes = doc["components"]["securitySchemes"]
    assert schemes["ApiKey"] == {**schemes["ApiKey"], "type": "apiKey", "in": "header", "name": "X-Api-Key"}
    assert schemes["Bearer"]["type"] == "http" and schemes["Bearer"]["scheme"] == "bearer"
    assert schemes["SigV4"]["x-amazon-apigateway-authtype"] == "awsSigv4"
    assert doc["security"] == [{"ApiKey": []}, {"Bearer": []}, {"SigV4": []}]
    assert doc["paths"]["/v1/health"]["get"]["security"] == [], "health needs no credential"
    # Swagger UI embeds the same document, schemes included.
    page = api.app.resolve(rest_event("GET", "/docs", key=None), None)
    assert page["statusCode"] == 200 and "awsSigv4" in page["body"]


def test_consolidation_has_its_own_tag(api: Api) -> None:
    _, doc = api("GET", "/openapi.json", key=None)
    assert doc["paths"]["/v1/consolidations"]["post"]["tags"] == ["consolidation"]
    assert doc["paths"]["/v1/users/{user_id}"]["delete"]["tags"] == ["users"]
