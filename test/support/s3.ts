// An S3-compatible server for tests: s3rver, in this process, on a loopback port of its own and a
// temporary directory, with one bucket ("bulwark") ready. Any suite can run a store (or the whole
// registry) on it: pass `settings` where S3Settings are taken, and close() when done.
import { mkdtemp, rm } from "node:fs/promises";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { S3Settings } from "../../src/registry/storage/s3-blob-store.js";

/** The part of s3rver's API used here (it ships no types). */
interface S3rverInstance {
  run(): Promise<AddressInfo>;
  close(): Promise<void>;
  httpServer?: Server;
}
type S3rverConstructor = new (options: {
  port: number;
  address: string;
  silent: boolean;
  directory: string;
  configureBuckets: Array<{ name: string; configs: Array<string | Buffer> }>;
}) => S3rverInstance;

// CommonJS without type declarations: required, then given the shape above.
const S3rver = createRequire(import.meta.url)("s3rver") as S3rverConstructor;

export interface TestS3 {
  settings: S3Settings;
  /** the endpoint, e.g. http://127.0.0.1:PORT */
  endpoint: string;
  close(): Promise<void>;
}

export interface StartS3Options {
  /** default "bulwark" */
  bucket?: string;
  /** key prefix written into settings; default none */
  prefix?: string;
}

export async function startS3(options: StartS3Options = {}): Promise<TestS3> {
  const bucket = options.bucket ?? "bulwark";
  const directory = await mkdtemp(join(tmpdir(), "bulwark-s3rver-"));
  const server = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory,
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  let address: AddressInfo;
  try {
    address = await server.run();
  } catch (err) {
    await rm(directory, { recursive: true, force: true });
    throw err;
  }
  const endpoint = `http://127.0.0.1:${address.port}`;
  let closed: Promise<void> | undefined;
  return {
    endpoint,
    settings: {
      endpoint,
      region: "us-east-1",
      bucket,
      prefix: options.prefix,
      // s3rver's built-in account
      accessKeyId: "S3RVER",
      secretAccessKey: "S3RVER",
      forcePathStyle: true,
    },
    close() {
      closed ??= (async () => {
        const stopping = server.close();
        // A client left open (keep-alive sockets) must not hold the suite up.
        server.httpServer?.closeAllConnections();
        await stopping;
        await rm(directory, { recursive: true, force: true });
      })();
      return closed;
    },
  };
}
