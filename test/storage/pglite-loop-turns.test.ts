// PGlite settles every statement as a microtask, so a request running statement after statement
// would keep the event loop from turning: no socket read, no timer run, until it ends (a 200-document
// import held it for seconds, long enough for a keep-alive connection's next request to be cut as
// idle). The dialect lets the loop turn between statements. These tests run statements until a
// socket's bytes and a timer have been served; the statement count only bounds a hang.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import net from "node:net";
import { once } from "node:events";
import { Kysely, sql } from "kysely";
import { SerializedPGliteDialect } from "../../src/storage/pglite-dialect.js";
import { clonePglite } from "../support/db-templates.js";

/** Far more statements than any machine runs before the loop must have turned. */
const CEILING = 50_000;

describe("PGlite statements and the event loop", () => {
  let db: Kysely<any>;
  let server: net.Server;
  let client: net.Socket;
  let received = 0;
  before(async () => {
    db = new Kysely({ dialect: new SerializedPGliteDialect(await clonePglite()) });
    server = net.createServer((socket) => socket.on("data", (chunk) => (received += chunk.length)));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    client = net.connect((server.address() as net.AddressInfo).port, "127.0.0.1");
    await once(client, "connect");
  });
  after(async () => {
    client.destroy();
    server.close();
    await db.destroy();
  });

  /**
   * Sends bytes and arms a timer, then runs `statement` until both were served (or the ceiling);
   * answers how many statements ran.
   */
  async function runUntilServed(statement: () => Promise<unknown>): Promise<number> {
    const before = received;
    let timerRan = false;
    setTimeout(() => (timerRan = true), 0);
    client.write("x".repeat(100));
    let n = 0;
    while (n < CEILING && !(timerRan && received >= before + 100)) {
      await statement();
      n++;
    }
    return n;
  }

  it("a transaction of many statements lets sockets and timers be served before it ends", async () => {
    const ran = await db.transaction().execute((trx) => runUntilServed(() => sql`select 1`.execute(trx)));
    assert.ok(ran < CEILING, `${ran} statements ran and the socket's bytes or the timer still waited`);
  });

  it("so do reads answered from the cache, one after another", async () => {
    await sql`select 2`.execute(db);
    const ran = await runUntilServed(() => sql`select 2`.execute(db));
    assert.ok(ran < CEILING, `${ran} cached reads ran and the socket's bytes or the timer still waited`);
  });
});
