"""The memory browser's Cognito sign-in, against moto's user pool standing in for Cognito.

The page asks the pool's endpoint for an ID token (InitiateAuth, USER_PASSWORD_AUTH)
and sends it as ``Authorization`` on every API call. Here the browser's request to
``https://cognito-idp.us-east-1.amazonaws.com/`` is answered by moto's cognito-idp
(a real pool, app client and user, real JWTs), and API Gateway's Cognito authorizer is
stood in for by a route that checks each call carries that token for that app client,
then hands it to ``memstack serve`` with a key of the tenant the deployed API derives
from such a token (``cognito:<app client id>``, api/auth.py). What this cannot show
(AWS itself: the gateway's signature check, Cognito's CORS) is listed in docs/ui.md.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from playwright.sync_api import expect

from .conftest import TIMEOUT_MS, LiveServer, serving
from .steps import fresh

REGION = "us-east-1"
ENDPOINT = f"https://cognito-idp.{REGION}.amazonaws.com/"
GATEWAY_KEY = "gateway-key"  # what the stand-in authorizer forwards with
PASSWORD = "Correct-horse-1!"


class Pool:
    """A moto user pool with an app client for the browser (no secret) and one user, Ana."""

    def __init__(self) -> None:
        self.client = boto3.client("cognito-idp", region_name=REGION)
        self.pool_id = self.client.create_user_pool(PoolName="memstack")["UserPool"]["Id"]
        self.client_id = self.client.create_user_pool_client(
            UserPoolId=self.pool_id,
            ClientName="memory-browser",
            ExplicitAuthFlows=["ALLOW_USER_PASSWORD_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"],
            GenerateSecret=False,
        )["UserPoolClient"]["ClientId"]
        self.client.admin_create_user(
            UserPoolId=self.pool_id,
            Username="ana",
            TemporaryPassword="Temporary-1!",
            MessageAction="SUPPRESS",
        )
        self.issued: list[str] = []

    def answer(self, route: Any) -> None:
        """Cognito's InitiateAuth, as the pool's endpoint answers it (its JSON, its error shape)."""
        request = route.request
        assert request.headers["x-amz-target"] == "AWSCognitoIdentityProviderService.InitiateAuth"
        asked = json.loads(request.post_data)
        try:
            result = self.client.initiate_auth(**asked)
        except ClientError as exc:
            error = exc.response["Error"]
            body = {"__type": error["Code"], "message": error["Message"]}
            route.fulfill(status=400, content_type="application/x-amz-json-1.1", body=json.dumps(body))
            return
        result.pop("ResponseMetadata", None)
        if "AuthenticationResult" in result:
            self.issued.append(result["AuthenticationResult"]["IdToken"])
        route.fulfill(status=200, content_type="application/x-amz-json-1.1", body=json.dumps(result))


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


@pytest.fixture(scope="module")
def cognito(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Pool, LiveServer]]:
    with mock_aws():
        pool = Pool()
        data = Path(tmp_path_factory.mktemp("ui-cognito")) / "data"
        with serving(
            data,
            api_keys=f"{GATEWAY_KEY}=cognito:{pool.client_id}",
            ui_cognito_client_id=pool.client_id,
            ui_cognito_region=REGION,
        ) as server:
            yield pool, server


def test_sign_in_with_a_cognito_user_and_browse_that_app_clients_tenant(
    browser: Any, cognito: tuple[Pool, LiveServer]
) -> None:
    pool, server = cognito
    user = fresh("tenant-of-the-pool")
    with server.client(GATEWAY_KEY) as client:
        client.add("I keep bees on the roof.", user_id=user, infer=False)
    forwarded: list[str] = []

    def gateway(route: Any) -> None:
        # API Gateway's Cognito authorizer: a token of this pool's app client, else its 401.
        token = route.request.headers.get("authorization", "")
        if token not in pool.issued or claims(token)["aud"] != pool.client_id:
            route.fulfill(
                status=401,
                content_type="application/json",
                body=json.dumps(
                    {"error": {"code": "unauthorized", "message": "Unauthorized", "details": []}}
                ),
            )
            return
        forwarded.append(token)
        route.continue_(headers={**route.request.headers, "authorization": f"Bearer {GATEWAY_KEY}"})

    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.route(ENDPOINT, pool.answer)
        page.route(f"{server.url}/v1/**", gateway)
        response = page.goto(f"{server.url}/ui")
        assert response is not None
        assert f"connect-src 'self' {ENDPOINT.rstrip('/')};" in response.headers["content-security-policy"]
        expect(page.get_by_label("Credential type")).to_have_value("cognito-user")
        expect(page.get_by_label("Credential", exact=True)).to_be_hidden()

        # A temporary password is Cognito's NEW_PASSWORD_REQUIRED challenge: said, not signed in.
        page.get_by_label("User name").fill("ana")
        page.get_by_label("Password").fill("Temporary-1!")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("NEW_PASSWORD_REQUIRED")
        pool.client.admin_set_user_password(
            UserPoolId=pool.pool_id, Username="ana", Password=PASSWORD, Permanent=True
        )
        # A wrong password: Cognito's own words.
        page.get_by_label("Password").fill("wrong")
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("alert")).to_contain_text("NotAuthorizedException")
        expect(page.get_by_role("alert")).to_contain_text("Incorrect username or password.")
        assert page.evaluate("sessionStorage.length") == 0

        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Users")).to_be_visible()
        expect(page.locator("#who")).to_have_text("Signed in (Cognito token)")
        page.get_by_role("link", name=user, exact=True).click()
        expect(page.get_by_role("link", name="I keep bees on the roof.")).to_be_visible()
        # Every API call carried the pool's ID token for this app client; only the token is kept.
        [token] = pool.issued
        assert forwarded and set(forwarded) == {token}
        assert claims(token)["token_use"] == "id" and claims(token)["aud"] == pool.client_id
        kept = page.evaluate("JSON.parse(sessionStorage.getItem('memstack.credential'))")
        assert kept == {"kind": "cognito", "value": token}
        assert PASSWORD not in page.evaluate("JSON.stringify(sessionStorage) + JSON.stringify(localStorage)")
    finally:
        context.close()
