// Prepared statements on PostgreSQL (src/storage/prepared-statements.ts): a schema change made
// while the server runs (another replica's migration) leaves statements prepared for the old
// result type; the server prepares them again instead of failing the requests that hit them.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { sql } from "kysely";
import { backends } from "../support/db-templates.js";
import { createGroup } from "../support/fixtures.js";
import { restClient } from "../support/http.js";
import { startTestServer, type TestServer } from "../support/server.js";

const G = "/iam/v2beta1/groups";

for (const backend of backends().filter((b) => b === "postgres")) {
  describe(`prepared statements [${backend}]`, () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer(backend);
    });
    after(() => server.close());

    it("survive a column added under them: every request still answers", async () => {
      const api = restClient(server.url, server.operatorToken);
      const org = await createGroup(api, undefined, "prepared");
      // Prepared on several pool connections: requests in parallel.
      const burst = () => Promise.all(Array.from({ length: 20 }, () => api.get(`${G}/${org.uid}`)));
      for (const res of await burst()) assert.equal(res.status, 200);
      await sql`alter table groups add column prepared_probe integer`.execute(server.db);
      try {
        for (let round = 0; round < 3; round++)
          for (const res of await burst()) assert.equal(res.status, 200, JSON.stringify(res.body));
        const list = await api.get(`${G}?uidp.descendants_of=${org.uid}`);
        assert.equal(list.status, 200);
        assert.equal(list.body.totalCount, "1");
      } finally {
        await sql`alter table groups drop column prepared_probe`.execute(server.db);
      }
      for (const res of await burst()) assert.equal(res.status, 200);
    });
  });

  describe(`prepared statements, on and off [${backend}]`, () => {
    /** The server's statements prepared on its pool's connections (asked on several at once). */
    async function preparedOnPool(server: TestServer): Promise<number> {
      const counts = await Promise.all(
        Array.from({ length: 10 }, () =>
          sql<{ n: string }>`select count(*) as n from pg_prepared_statements where name like 'bulwark\_%'`
            .execute(server.db)
            .then((r) => Number(r.rows[0]!.n)),
        ),
      );
      return Math.max(...counts);
    }

    for (const preparedStatements of [true, false]) {
      it(`${preparedStatements ? "on (the default)" : "off (--no-prepared-statements)"}: requests answer; named statements ${preparedStatements ? "are" : "are never"} prepared`, async () => {
        const server = await startTestServer(backend, preparedStatements ? {} : { preparedStatements: false });
        try {
          const api = restClient(server.url, server.operatorToken);
          const org = await createGroup(api, undefined, "prepared-flag");
          const gets = await Promise.all(Array.from({ length: 20 }, () => api.get(`${G}/${org.uid}`)));
          for (const res of gets) assert.equal(res.status, 200);
          const list = await api.get(`${G}?uidp.descendants_of=${org.uid}`);
          assert.equal(list.body.totalCount, "1");
          const prepared = await preparedOnPool(server);
          if (preparedStatements) assert.ok(prepared > 0, "some connection holds named statements");
          else assert.equal(prepared, 0);
        } finally {
          await server.close();
        }
      });
    }
  });
}
