// The committed types are what openapi-typescript makes of the committed OpenAPI document
// (and tests/api checks that document is what `memstack openapi` prints today).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import openapiTS, { astToString } from "openapi-typescript";

const root = new URL("../../", import.meta.url);

test("src/schema.d.ts is generated from openapi.json", async () => {
  const document = readFileSync(new URL("openapi.json", root), "utf8");
  const generated = astToString(await openapiTS(document, { defaultNonNullable: false }));
  const committed = readFileSync(new URL("src/schema.d.ts", root), "utf8");
  const body = (text: string) => text.slice(text.indexOf("export "));
  assert.equal(body(committed), body(generated), "run `npm run generate` in clients/typescript");
});
