// What every OCI endpoint's handler shares: the request it is handed (authorized, its repo
// resolved) and the small helpers for reading queries and sending answers.
import { Readable } from "node:stream";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { CallContext } from "../../core/service.js";
import type { RepoRef } from "../storage/repos.js";
import { OciError } from "./errors.js";

/** Sent with every /v2/ answer. */
export const API_VERSION = { "docker-distribution-api-version": "registry/2.0" };

/** A request to an endpoint under a repository name, authorized, with its repo (a first push made it). */
export interface RepoRequest {
  request: FastifyRequest;
  reply: FastifyReply;
  call: CallContext;
  /** the repository name as the client wrote it */
  name: string;
  /** the path's last segment: a manifest reference, a digest, an upload id or a tag ("" for none) */
  reference: string;
  repo: RepoRef;
}

export type Query = Record<string, string | undefined>;

export function queryOf(request: FastifyRequest): Query {
  return request.query as Query;
}

/** JSON with exactly this Content-Type (Fastify would add a charset to a string payload). */
export function sendJson(reply: FastifyReply, body: unknown, type = "application/json"): FastifyReply {
  return reply.header("content-type", type).send(Buffer.from(JSON.stringify(body)));
}

/**
 * Answers a HEAD with the headers set (Content-Length included). Fastify's HEAD routes set
 * Content-Length from the payload, and to 0 without one; an empty stream leaves ours alone.
 */
export function sendHead(reply: FastifyReply): FastifyReply {
  return reply.send(Readable.from([]));
}

export function unsupported(): OciError {
  return new OciError(405, "UNSUPPORTED", "the operation is unsupported");
}
