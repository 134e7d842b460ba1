// v1 lists answer every match but never more than V1_LIST_LIMIT, read page by page: the walk
// follows the tokens to the end, stops (refusing) as soon as the limit is passed, and an `id`
// filter answers zero or one item, hiding what the caller may not read.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { V1_LIST_LIMIT, listAll, oneOrNone } from "../../src/platform/v1.js";

/** pages of `size` over `total` numbered items, counting the pages read */
function pages(total: number) {
  const read: number[] = [];
  const page = async (pageSize: number, pageToken: string) => {
    const start = pageToken === "" ? 0 : Number(pageToken);
    read.push(start);
    const items = Array.from({ length: Math.max(0, Math.min(pageSize, total - start)) }, (_, i) => start + i);
    const next = start + items.length;
    return { items, nextPageToken: next < total ? String(next) : "" };
  };
  return { page, read };
}

describe("v1 lists", () => {
  it("walk every page to the end, in order", async () => {
    const { page, read } = pages(2_500);
    const all = await listAll(page);
    assert.equal(all.length, 2_500);
    assert.deepEqual(all.slice(0, 3), [0, 1, 2]);
    assert.equal(all.at(-1), 2_499);
    assert.deepEqual(read, [0, 1_000, 2_000]);
  });

  it("answer an empty list", async () => {
    assert.deepEqual(await listAll(pages(0).page), []);
  });

  it("answer exactly the limit", async () => {
    assert.equal((await listAll(pages(V1_LIST_LIMIT).page)).length, V1_LIST_LIMIT);
  });

  it("refuse more than the limit with FAILED_PRECONDITION, without reading on", async () => {
    const { page, read } = pages(V1_LIST_LIMIT * 5);
    const err = await listAll(page).then(
      () => assert.fail("no error"),
      (e: unknown) => ConnectError.from(e),
    );
    assert.equal(err.code, Code.FailedPrecondition);
    assert.match(err.rawMessage, /more than 10000 items match.*v2 API/);
    assert.equal(read.length, V1_LIST_LIMIT / 1_000 + 1);
  });

  it("answer an `id` as zero or one item; a denial is an absence, other errors stay errors", async () => {
    assert.deepEqual(await oneOrNone(async () => "x"), ["x"]);
    assert.deepEqual(await oneOrNone(() => Promise.reject(new ConnectError("gone", Code.NotFound))), []);
    assert.deepEqual(await oneOrNone(() => Promise.reject(new ConnectError("no", Code.PermissionDenied))), []);
    await assert.rejects(
      oneOrNone(() => Promise.reject(new ConnectError("bad", Code.InvalidArgument))),
      (e: unknown) => ConnectError.from(e).code === Code.InvalidArgument,
    );
  });
});
