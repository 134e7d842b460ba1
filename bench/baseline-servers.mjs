#!/usr/bin/env node
// The API bench's baselines (bench/api.mjs), each in its own process:
//   node bench/baseline-servers.mjs bare <port>                 bare node:http answering a small fixed JSON
//   node bench/baseline-servers.mjs pk <port> <databaseUrl>     Fastify + pg: GET /?uid=U -> select * from groups where uid = $1
//   node bench/baseline-servers.mjs page <port> <databaseUrl>   Fastify + pg: GET /?parent=P -> a page of 50 children + their count
// The pg Pool has 10 connections, as the server's. "page" runs the page (51 rows: one more tells
// whether another page follows) and the count at once on the pool, as the server's list engine
// does, and answers {groups, nextPageToken, totalCount}. Any database error is a 500 (the load
// generator then fails the row). Listens on 127.0.0.1 only; prints "ready" when listening.
import http from "node:http";

const [kind, portText, databaseUrl] = process.argv.slice(2);
const port = Number(portText);

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
  await app.listen({ port, host: "127.0.0.1" });
  console.log("ready");
  const close = async () => {
    await app.close();
    await pool.end();
    process.exit(0);
  };
  process.on("SIGTERM", close);
  process.on("SIGINT", close);
} else {
  console.error(`usage: baseline-servers.mjs bare|pk|page <port> [databaseUrl]`);
  process.exit(2);
}
