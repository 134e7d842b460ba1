// One cleartext port for HTTP/1.1 and h2c. Fastify's http2 mode without TLS speaks only h2c, so a
// front net.Server peeks at each connection: the HTTP/2 client preface goes to an http2 server,
// anything else to an http/1.1 server; both run Fastify's handler. (Node's http2 allowHTTP1
// fallback exists only for TLS servers, hence the sniffing.)
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");
/** How long a new connection may stay silent before its first bytes say which protocol it speaks. */
const SNIFF_TIMEOUT_MS = 10_000;
/**
 * How long an idle HTTP/1.1 connection is kept (Fastify's default). Longer than the 60 s idle
 * timeout of common load balancers, so it is they who close an idle connection, never this server
 * as they send a request on it. Node's 5 s default made that race common; a loaded event loop
 * could also run the 5 s timer before reading a request that had already arrived.
 */
const KEEP_ALIVE_TIMEOUT_MS = 72_000;
/** How long a request's head may take to arrive once its first byte has (Node's default). */
export const HEADERS_TIMEOUT_MS = 60_000;

export interface DualServer {
  front: net.Server;
  h1: http.Server;
  h2: http2.Http2Server;
  /**
   * A shutdown began: from now on every HTTP/1.1 answer carries `Connection: close` (answers
   * already under way too, when their head is not out yet), so keep-alive clients reconnect
   * (elsewhere, once the load balancer drained this replica) instead of being cut later.
   */
  drain(): void;
  /**
   * Ends what is idle: idle HTTP/1.1 connections now, busy ones once their answer is out; HTTP/2
   * sessions get GOAWAY (their open streams finish; a session that starts later gets it at once).
   */
  closeConnections(): void;
  /** destroys every connection still open (at the shutdown's bound); answers how many there were */
  destroyConnections(): number;
}

/** How a request Node's HTTP/1.1 layer rejects is answered. */
export type ClientProblem = "headers too large" | "headers timeout" | "malformed" | "expectation";

export interface ClientErrorAnswer {
  status: number;
  headers: Record<string, string>;
  body: string | Uint8Array;
}

export interface DualServerOptions {
  /**
   * The answer to a request Node's HTTP/1.1 layer rejects before any handler runs (headers over
   * the limit, malformed framing, an `Expect` it cannot meet); `received` is what was read of the
   * request, to answer in its protocol.
   */
  clientError(problem: ClientProblem, received: Buffer | undefined): ClientErrorAnswer;
}

export function createDualServer(handler: http.RequestListener, options: DualServerOptions): DualServer {
  let draining = false;
  let closing = false;
  // No total bound on a request (Node's requestTimeout would cut a long upload that keeps sending):
  // a body that stops arriving has its own idle limit (body-timeout.ts).
  const h1 = http.createServer(
    { keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: 0 },
    handler,
  );
  /** HTTP/1.1 answers not yet finished: a drain must reach those whose head is not out yet */
  const answering = new Set<http.ServerResponse>();
  // Before the application's listener: its answer may be written at once.
  h1.prependListener("request", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    if (draining) res.setHeader("connection", "close");
    answering.add(res);
    res.once("close", () => answering.delete(res));
    res.once("finish", () => {
      answering.delete(res);
      // Once closing, a connection whose answer is out is idle: ended rather than left for its timeout.
      if (closing) setImmediate(() => h1.closeIdleConnections());
    });
  });
  // Without this Node answers a bare 431/400 with an empty body.
  h1.on("clientError", (err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: net.Socket) => {
    if (!socket.writable || (err.code === "ECONNRESET" && !socket.bytesWritten)) return void socket.destroy();
    const problem =
      err.code === "HPE_HEADER_OVERFLOW"
        ? "headers too large"
        : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? "headers timeout"
          : "malformed";
    const answer = options.clientError(problem, err.rawPacket);
    const body = typeof answer.body === "string" ? Buffer.from(answer.body) : Buffer.from(answer.body);
    const head = Object.entries({
      ...answer.headers,
      "x-content-type-options": "nosniff",
      "content-length": String(body.length),
      connection: "close",
    })
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join("");
    socket.end(
      Buffer.concat([
        Buffer.from(`HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status] ?? ""}\r\n${head}\r\n`),
        body,
      ]),
    );
  });
  // Node answers an Expect other than 100-continue with a bare 417.
  h1.on("checkExpectation", (_req: http.IncomingMessage, res: http.ServerResponse) => {
    const answer = options.clientError("expectation", undefined);
    res.writeHead(answer.status, { ...answer.headers, "x-content-type-options": "nosniff" });
    res.end(answer.body);
  });
  const h2 = http2.createServer(
    // Header lists up to 256 KiB reach the application, which answers anything over HTTP/1.1's
    // 16 KiB in the request's protocol (app.ts); larger ones are refused by nghttp2 itself.
    { settings: { maxHeaderListSize: 256 * 1024 }, maxHeaderListPairs: 4096 },
    handler as unknown as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
  );
  const sessions = new Set<http2.Http2Session>();
  h2.on("session", (session) => {
    // A connection accepted before the listener closed but handed over after the GOAWAYs went out.
    if (closing) setImmediate(() => session.close());
    sessions.add(session);
    session.on("close", () => sessions.delete(session));
  });
  const sockets = new Set<net.Socket>();
  // An HTTP/1.x client may send its request and half-close (FIN) before reading the answer, as
  // HTTP/1.0 clients and `nc -N` do: such sockets stay writable, and the h1 server answers before
  // closing. HTTP/2 sessions keep Node's default (a FIN ends the connection).
  (h1 as unknown as { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Connections not yet handed to h1/h2: no request of theirs was accepted.
  const sniffing = new Set<net.Socket>();
  const front = net.createServer({ noDelay: true, allowHalfOpen: true }, (socket) => {
    sockets.add(socket);
    sniffing.add(socket);
    socket.on("close", () => {
      sockets.delete(socket);
      sniffing.delete(socket);
    });
    let buffered: Buffer = Buffer.alloc(0);
    // A client that ends, or stays silent, before saying which protocol it speaks gets nothing
    // more (once handed over, the h1/h2 servers' own timeouts apply).
    const onEndWhileSniffing = () => socket.destroy();
    socket.once("end", onEndWhileSniffing);
    socket.setTimeout(SNIFF_TIMEOUT_MS, onEndWhileSniffing);
    const onData = (chunk: Buffer) => {
      buffered = buffered.length ? Buffer.concat([buffered, chunk]) : chunk;
      const n = Math.min(buffered.length, PREFACE.length);
      const isPrefix = buffered.subarray(0, n).equals(PREFACE.subarray(0, n));
      if (isPrefix && buffered.length < PREFACE.length) return; // ambiguous so far: wait for more
      socket.removeListener("data", onData);
      sniffing.delete(socket);
      socket.removeListener("end", onEndWhileSniffing);
      socket.setTimeout(0);
      socket.removeListener("timeout", onEndWhileSniffing);
      if (isPrefix) socket.allowHalfOpen = false;
      socket.pause();
      socket.unshift(buffered);
      (isPrefix ? h2 : h1).emit("connection", socket);
      process.nextTick(() => socket.resume());
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  });
  // Node's HTTP/1.1 server tracks its connections (closeIdleConnections, the headers timeout) from
  // its 'listening' event on; this one never listens itself (the front does), so it is told.
  front.on("listening", () => h1.emit("listening"));
  // Stops that tracking's timer; h1 has no listener of its own to close.
  front.on("close", () => h1.close());
  const drain = () => {
    draining = true;
    for (const res of answering) if (!res.headersSent) res.setHeader("connection", "close");
  };
  // Fastify calls listen/close/address on the server it is given: the front.
  return {
    front,
    h1,
    h2,
    drain,
    closeConnections() {
      drain();
      closing = true;
      h1.closeIdleConnections();
      for (const s of sessions) s.close();
      // A preconnect that never said a protocol has nothing accepted to finish: it would only
      // hold the close for the sniffing timeout.
      for (const s of sniffing) s.destroy();
    },
    destroyConnections() {
      const open = sockets.size;
      for (const s of sockets) s.destroy();
      return open;
    },
  };
}
