// compiledOnce (storage/compiled.ts): a typed query built and compiled once, then run with each
// call's values in the places its arguments took; an argument that decides the statement's shape
// instead of being a value is refused when the query is first compiled.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  DummyDriver,
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type CompiledQuery,
  type DatabaseConnection,
  type QueryResult,
} from "kysely";
import { compiledOnce } from "../../src/storage/compiled.js";

interface Tables {
  tags: { repo: string; name: string; digest: string };
}

/** A database whose driver records every statement it is sent and answers no rows. */
function recordingDb() {
  const sent: CompiledQuery[] = [];
  class RecordingDriver extends DummyDriver {
    override async acquireConnection(): Promise<DatabaseConnection> {
      return {
        executeQuery: async <R>(query: CompiledQuery): Promise<QueryResult<R>> => {
          sent.push(query);
          return { rows: [] };
        },
        streamQuery: () => {
          throw new Error("not used");
        },
      };
    }
  }
  const db = new Kysely<Tables>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new RecordingDriver(),
      createIntrospector: (k) => new PostgresIntrospector(k),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
  });
  return { db, sent };
}

describe("compiledOnce", () => {
  it("builds the query once and runs it with each call's values, the query's own values kept", async () => {
    let builds = 0;
    const tagsOf = compiledOnce((db: Kysely<Tables>, repo: string, after: string) => {
      builds++;
      return db
        .selectFrom("tags")
        .select(["name", "digest"])
        .where("repo", "=", repo)
        .where("name", ">", after)
        .orderBy("name")
        .limit(100);
    });
    const { db, sent } = recordingDb();
    await tagsOf(db, "r1", "a");
    await tagsOf(db, "r2", "m");
    assert.equal(builds, 1);
    assert.equal(sent.length, 2);
    assert.equal(sent[0]!.sql, sent[1]!.sql);
    assert.deepEqual(sent[0]!.parameters, ["r1", "a", 100]);
    assert.deepEqual(sent[1]!.parameters, ["r2", "m", 100]);
  });

  it("compiles once per database, not once per process", async () => {
    let builds = 0;
    const byRepo = compiledOnce((db: Kysely<Tables>, repo: string) => {
      builds++;
      return db.selectFrom("tags").selectAll().where("repo", "=", repo);
    });
    await byRepo(recordingDb().db, "r");
    await byRepo(recordingDb().db, "r");
    assert.equal(builds, 2);
  });

  it("refuses an argument that is not used as a value", async () => {
    const shaped = compiledOnce((db: Kysely<Tables>, column: string) =>
      db
        .selectFrom("tags")
        .selectAll()
        .where(column === "name" ? "name" : "digest", "=", "x"),
    );
    await assert.rejects(shaped(recordingDb().db, "name"), /1 argument\(s\) not used as a value/);
  });
});
