#!/usr/bin/env node
// The API bench's baselines (bench/api.mjs), each in its own process:
//   node bench/baseline-servers.mjs bare <port>                 bare node:http answering a small fixed JSON
//   node bench/baseline-servers.mjs pk <port> <databaseUrl>     Fastify + pg: GET /?uid=U -> select * from groups where uid = $1
//   node bench/baseline-servers.mjs page <port> <databaseUrl>   Fastify + pg: GET /?parent=P -> a page of 50 children + their count
//   node bench/baseline-servers.mjs create <port> <databaseUrl>        Fastify + pg: POST /iam/v2beta1/groups[/P] {name} ->
//       begin; insert into groups ... returning *; commit (a migrated Bulwark database's own table)
//   node bench/baseline-servers.mjs create-event <port> <databaseUrl>  the same, with the created row inserted into
//       events as its event's body in the same transaction (bench/events.mjs: the floor of an outbox written as one
//       more statement)
// The pg Pool has 10 connections, as the server's. "page" runs the page (51 rows: one more tells
// whether another page follows) and the count at once on the pool, as the server's list engine
// does, and answers {groups, nextPageToken, totalCount}. Any database error is a 500 (the load
// generator then fails the row). Listens on 127.0.0.1 only; prints "ready" when listening.
import http from "node:http";

const [kind, portText, databaseUrl] = process.argv.slice(2);
const port = Number(portText);

/** Listens on 127.0.0.1 and says "ready"; SIGTERM or SIGINT closes the app and its pool. */
async function listen(app, pool) {
  await app.listen({ port, host: "127.0.0.1" });
  console.log("ready");
  const close = async () => {
    await app.close();
    await pool.end();
    process.exit(0);
  };
  process.on("SIGTERM", close);
  process.on("SIGINT", close);
}

if (kind === "bare") {
  const body = JSON.stringify({ uid: "0".repeat(40), name: "bare", status: "SERVING" });
  http
    .createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.end(body);
    })
    .listen(port, "127.0.0.1", () => console.log("ready"));
} else if (kind === "pk" || kind === "page") {
  const { default: Fastify } = await import("fastify");
  const { default: pg } = await import("pg");
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  const app = Fastify({ logger: false });
  if (kind === "pk") {
    app.get("/", async (req, reply) => {
      const { rows } = await pool.query("select * from groups where uid = $1", [req.query.uid]);
      if (!rows[0]) return reply.code(404).send({ message: "not found" });
      return rows[0];
    });
  } else {
    app.get("/", async (req) => {
      const parent = req.query.parent;
      const [page, count] = await Promise.all([
        pool.query("select * from groups where parent_uid = $1 order by uid limit 51", [parent]),
        pool.query("select count(*) from groups where parent_uid = $1", [parent]),
      ]);
      const groups = page.rows.slice(0, 50);
      return {
        groups,
        nextPageToken: page.rows.length > 50 ? groups.at(-1).uid : "",
        totalCount: count.rows[0].count,
      };
    });
  }
  await listen(app, pool);
} else if (kind === "create" || kind === "create-event") {
  const { randomBytes, randomUUID } = await import("node:crypto");
  const { default: Fastify } = await import("fastify");
  const { default: pg } = await import("pg");
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 10 });
  const app = Fastify({ logger: false });
  const withEvent = kind === "create-event";
  const create = async (req) => {
    const parent = req.params["*"] || null;
    const uid = parent ? `${parent}/${randomBytes(8).toString("hex")}` : randomBytes(20).toString("hex");
    const now = new Date();
    const client = await pool.connect();
    try {
      await client.query("begin");
      const { rows } = await client.query(
        "insert into groups (uid, parent_uid, name, create_time, update_time) values ($1, $2, $3, $4, $4) returning *",
        [uid, parent, req.body.name, now],
      );
      if (withEvent)
        await client.query(
          `insert into events (uid, parent_uid, type, source, subject, actor_subject, actor, body, traceparent, time)
           values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
          [
            `${parent ?? uid}/${randomUUID().replace(/-/g, "").slice(0, 16)}`,
            parent,
            "dev.chainguard.api.iam.group.created.v1",
            "http://127.0.0.1",
            uid,
            "baseline",
            JSON.stringify({ subject: "baseline" }),
            JSON.stringify(rows[0]),
            "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
            now,
          ],
        );
      await client.query("commit");
      return rows[0];
    } catch (err) {
      await client.query("rollback").catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  };
  app.post("/iam/v2beta1/groups", create);
  app.post("/iam/v2beta1/groups/*", create);
  await listen(app, pool);
} else {
  console.error(`usage: baseline-servers.mjs bare|pk|page|create|create-event <port> [databaseUrl]`);
  process.exit(2);
}
