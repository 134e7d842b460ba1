// The runtime config fields of an image config as the API shows them (ImageConfig): the pusher's
// JSON, each field of the wrong type left out. The inventory reader and the image RPCs (which read
// a config blob directly) use the same rule.
import type { ImageRuntimeConfig } from "./types.js";

type JsonObject = Record<string, unknown>;
export const isJsonObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
export const stringOf = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const stringsOf = (v: unknown): string[] | undefined =>
  Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as string[]) : undefined;
const stringMapOf = (v: unknown): Record<string, string> | undefined =>
  isJsonObject(v) && Object.values(v).every((x) => typeof x === "string") ? (v as Record<string, string>) : undefined;
const setOf = (v: unknown): Record<string, object> | undefined =>
  isJsonObject(v) ? Object.fromEntries(Object.keys(v).map((k) => [k, {}])) : undefined;

/** The runtime config fields the API shows; a field of the wrong type is left out. */
export function runtimeConfigOf(v: unknown): ImageRuntimeConfig {
  if (!isJsonObject(v)) return {};
  const config: ImageRuntimeConfig = {
    User: stringOf(v.User),
    ExposedPorts: setOf(v.ExposedPorts),
    Env: stringsOf(v.Env),
    Entrypoint: stringsOf(v.Entrypoint),
    Cmd: stringsOf(v.Cmd),
    Volumes: setOf(v.Volumes),
    WorkingDir: stringOf(v.WorkingDir),
    Labels: stringMapOf(v.Labels),
    StopSignal: stringOf(v.StopSignal),
  };
  return Object.fromEntries(Object.entries(config).filter(([, value]) => value !== undefined));
}
