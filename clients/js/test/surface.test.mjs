// The declarations (tidings.d.ts) and the module name the same methods:
// tsc checks callers against the one, the other is what runs.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as tidings from "../tidings.mjs";

const declared = readFileSync(new URL("../tidings.d.ts", import.meta.url), "utf8");

function methodsOf(className) {
  const start = declared.indexOf(`export class ${className} `);
  assert.ok(start >= 0, `tidings.d.ts declares ${className}`);
  const block = declared.slice(start, declared.indexOf("\n}\n", start));
  const names = [...block.matchAll(/^ {2}(\w+)(?:<[^(]*>)?\(/gm)].map((m) => m[1]);
  return names.filter((name) => name !== "constructor").sort();
}

const ownMethods = (prototype) =>
  Object.getOwnPropertyNames(prototype)
    .filter((name) => name !== "constructor" && typeof prototype[name] === "function")
    .sort();

test("every method of Client and LiveSocket is declared, and every declared one exists", () => {
  assert.deepEqual(ownMethods(tidings.Client.prototype), methodsOf("Client"));
  assert.deepEqual(ownMethods(tidings.LiveSocket.prototype), methodsOf("LiveSocket"));
});

test("the module's exports are the declared ones", () => {
  const exported = [...declared.matchAll(/^export (?:class|function) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(Object.keys(tidings).filter((n) => n !== "default").sort(), exported.sort());
  assert.equal(tidings.default, tidings.Client);
});
