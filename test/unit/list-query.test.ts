// The list engine's subtree condition (src/storage/list-query.ts): descendants_of and visibility
// lead with the plain range [root, root + "0"), the form PostgreSQL bounds an index scan with (an
// OR alone is only a filter, and a keyset page near a subtree's end then reads every later row).
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler } from "kysely";
import { create } from "@bufbuild/protobuf";
import { UIDPFilterSchema } from "../../src/gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter, confinedSubtree, restrictToVisible } from "../../src/storage/list-query.js";

const db = new Kysely<any>({
  dialect: {
    createAdapter: () => new PostgresAdapter(),
    createDriver: () => new DummyDriver(),
    createIntrospector: (k) => new PostgresIntrospector(k),
    createQueryCompiler: () => new PostgresQueryCompiler(),
  },
});
const ROOT = "0123456789abcdef0123456789abcdef01234567";

describe("subtree conditions", () => {
  it("descendants_of leads with the range [root, root0), then the exact condition", () => {
    const q = applyUidpFilter(db.selectFrom("groups"), create(UIDPFilterSchema, { descendantsOf: ROOT })).selectAll();
    const { sql, parameters } = q.compile();
    assert.match(sql, /where \("uid" >= \$1 and "uid" < \$2 and \("uid" = \$3 or \("uid" > \$4 and "uid" < \$5\)\)\)$/);
    assert.deepEqual(parameters, [ROOT, `${ROOT}0`, ROOT, `${ROOT}/`, `${ROOT}0`]);
  });

  it("visibility: each visible root's condition leads with its range", () => {
    const q = restrictToVisible(db.selectFrom("groups").selectAll(), [ROOT, `${ROOT}/aa`], false);
    const { sql } = q.compile();
    assert.equal(sql.match(/\("uid" >= \$\d+ and "uid" < \$\d+ and \(/g)?.length, 2, sql);
  });

  it("children_of and descendants_of confine rows to a subtree; other filters do not", () => {
    assert.equal(confinedSubtree(create(UIDPFilterSchema, { childrenOf: ROOT })), ROOT);
    assert.equal(confinedSubtree(create(UIDPFilterSchema, { descendantsOf: ROOT })), ROOT);
    assert.equal(confinedSubtree(create(UIDPFilterSchema, { ancestorsOf: `${ROOT}/aa` })), undefined);
    assert.equal(confinedSubtree(create(UIDPFilterSchema, { inRoot: true })), undefined);
    assert.equal(confinedSubtree(undefined), undefined);
  });
});
