// Advisories for suites that need some: imported through the import extension as the smallest
// advisory YAML documents, then read back as the API answers them; the real documents of
// test/fixtures/advisories as an import sends them; every advisory a caller may list.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { ok } from "./assertions.js";
import type { Api, Json } from "./fixtures.js";
import { query, type QueryParams } from "./http.js";

export const ADVISORY_FIXTURES = join(import.meta.dirname, "..", "fixtures", "advisories");
export const ADVISORIES_PATH = "/vulnerabilities/v2beta1/advisories";
export const IMPORT_PATH = "/bulwark/vulnerabilities/v1/advisories:import";

/** Every importable fixture (not the broken ones under own/bad), sorted. */
export function fixtureFiles(dir = ADVISORY_FIXTURES): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return name === "bad" ? [] : fixtureFiles(path);
      return /\.(ya?ml|json)$/.test(name) && name !== "expected.json" ? [path] : [];
    });
}

/** A fixture file as an import request's document (named by its path below the fixtures). */
export const fixtureDocument = (path: string) => ({
  name: relative(ADVISORY_FIXTURES, path),
  content: readFileSync(path, "utf8"),
});

/** Every advisory visible to `api`, walking all pages. */
export async function listAllAdvisories(api: Api, params: QueryParams = {}) {
  const items: Json[] = [];
  let pageToken: string | undefined;
  let total: number | undefined;
  do {
    const page = ok(
      await api.get(ADVISORIES_PATH + query({ ...params, page_size: 250, page_token: pageToken })),
      "list",
    );
    items.push(...(page.advisories ?? []));
    pageToken = page.nextPageToken || undefined;
    total = page.totalCount === undefined ? undefined : Number(page.totalCount);
  } while (pageToken);
  return { items, total };
}

const CGA_ALPHABET = "23456789cfghjmpqrvwx";

/** A distinct, valid CGA id for each n ≥ 0. */
export function cgaId(n: number): string {
  let chars = "";
  for (let i = 0, v = n; i < 12; i++, v = Math.floor(v / CGA_ALPHABET.length)) chars = CGA_ALPHABET[v % 20] + chars;
  return `CGA-${chars.slice(0, 4)}-${chars.slice(4, 8)}-${chars.slice(8)}`;
}

/** An advisory YAML document of `packageName`: each advisory detected, then fixed at its version. */
export function fixedAdvisoriesDocument(
  packageName: string,
  advisories: { id: string; fixedIn: string; aliases?: string[] }[],
): string {
  return [
    "schema-version: 2.0.2",
    "package:",
    `  name: ${JSON.stringify(packageName)}`,
    "advisories:",
    ...advisories.flatMap((a) => [
      `  - id: ${a.id}`,
      ...(a.aliases?.length ? ["    aliases:", ...a.aliases.map((alias) => `      - ${alias}`)] : []),
      "    events:",
      "      - timestamp: 2024-01-01T00:00:00Z",
      "        type: detection",
      "        data:",
      "          type: manual",
      "      - timestamp: 2024-02-01T00:00:00Z",
      "        type: fixed",
      "        data:",
      `          fixed-version: ${a.fixedIn}`,
    ]),
  ].join("\n");
}

/** Imports one advisory (a detection, then a fix) for `packageName` into `group`; answers it. */
export async function importAdvisory(api: Api, group: string, id: string, packageName: string): Promise<Json> {
  const content = fixedAdvisoriesDocument(packageName, [
    { id, fixedIn: "1.0.0-r1", aliases: [`CVE-2024-${id.slice(-4)}`] },
  ]);
  const res = await api.post("/bulwark/vulnerabilities/v1/advisories:import", {
    parent: group,
    documents: [{ name: `${id}.advisories.yaml`, content }],
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.results[0].problem, undefined, JSON.stringify(res.body));
  const listed = await api.get(
    `/vulnerabilities/v2beta1/advisories?uidp.childrenOf=${group}&advisory_ids=${id}&artifact_names=${encodeURIComponent(packageName)}`,
  );
  assert.equal(listed.status, 200, JSON.stringify(listed.body));
  assert.equal(listed.body.advisories.length, 1);
  return listed.body.advisories[0] as Json;
}
