// The migration runner's rule: one global numbering across modules, so the order migrations
// apply in never depends on the order modules are listed in.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Migration } from "kysely";
import { MODULES } from "../../src/server/modules.js";
import { collectMigrations } from "../../src/storage/db.js";

const noop: Migration = { up: async () => {} };

describe("collectMigrations", () => {
  it("merges the modules' migrations under their names", () => {
    const all = collectMigrations([
      { name: "a", migrations: { "001_one": noop, "003_three": noop } },
      { name: "b", migrations: { "002_two": noop } },
    ]);
    assert.deepEqual(Object.keys(all).sort(), ["001_one", "002_two", "003_three"]);
  });

  it("refuses a number two modules use, naming both", () => {
    assert.throws(
      () =>
        collectMigrations([
          { name: "a", migrations: { "005_x": noop } },
          { name: "b", migrations: { "005_y": noop } },
        ]),
      /migration number 005 is used by modules a and b/,
    );
  });

  it("refuses a name that is not NNN_words", () => {
    for (const name of ["5_x", "0005_x", "005", "005-x", "005_X", "x_005"]) {
      assert.throws(
        () => collectMigrations([{ name: "a", migrations: { [name]: noop } }]),
        /is not named NNN_words/,
        name,
      );
    }
  });

  it("the registered modules' numbering is gap-free from 001", () => {
    const numbers = Object.keys(collectMigrations(MODULES))
      .map((n) => Number(n.slice(0, 3)))
      .sort((a, b) => a - b);
    assert.deepEqual(
      numbers,
      numbers.map((_, i) => i + 1),
    );
  });
});
