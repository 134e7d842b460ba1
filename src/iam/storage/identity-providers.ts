// Identity providers aggregate: an IdP under a group, its OIDC configuration (canonical JSON,
// without the client secret) and the client secret, encrypted by the caller (never plaintext here).
// The database enforces the references: the group (parent_uid), the default role (default_role_uid)
// and that role's visibility from the group (a CHECK), so races cannot break them.
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { applyUidpFilter } from "../../storage/list-query.js";
import { IamRepository, type Row } from "./schema.js";
import { CHECK_VIOLATION, FOREIGN_KEY_VIOLATION, constraintOf, sqlState } from "../../storage/errors.js";
import { missing, ok, updated, type DeleteResult, type WriteResult } from "../../storage/results.js";
import { deleteByUid, getByUid, updateByUid } from "../../storage/table.js";
import type { Freshness } from "../../core/service.js";

export type IdentityProviderRow = Row<"identity_providers">;

export interface IdentityProviderFields {
  name: string;
  description: string;
  defaultRoleUid: string;
  /** IdentityProvider.OIDC as canonical JSON without client_secret; null when unconfigured */
  oidc: unknown;
  /** the client secret as a ciphertext (see core/secret-box.ts); null when there is none */
  clientSecretEncrypted: string | null;
}

/**
 * Which reference a failed write broke. The service derives uid from parent_uid and validates
 * name and uid formats first, so the one CHECK valid input can violate is the default role's
 * visibility from the group: an invisible role is reported like a missing one.
 */
function brokenReference(err: unknown): "group" | "role" | undefined {
  const state = sqlState(err);
  if (state === CHECK_VIOLATION) return "role";
  if (state === FOREIGN_KEY_VIOLATION) {
    const constraint = constraintOf(err) ?? "";
    if (constraint.includes("default_role_uid")) return "role";
    if (constraint.includes("parent_uid")) return "group";
  }
  return undefined;
}

function columns(f: IdentityProviderFields) {
  return {
    name: f.name,
    description: f.description,
    default_role_uid: f.defaultRoleUid,
    oidc: f.oidc === null ? null : JSON.stringify(f.oidc),
    client_secret_encrypted: f.clientSecretEncrypted,
  };
}

export class IdentityProvidersRepository extends IamRepository {
  /** Inserts an IdP; missing names the group or default role that does not exist (or is not visible). */
  async insert(
    uid: string,
    parentUid: string,
    fields: IdentityProviderFields,
    now: Date,
  ): Promise<WriteResult<IdentityProviderRow>> {
    try {
      const row = await this.db
        .insertInto("identity_providers")
        .values({ uid, parent_uid: parentUid, ...columns(fields), create_time: now, update_time: now })
        .returningAll()
        .executeTakeFirstOrThrow();
      return ok(row);
    } catch (err) {
      const what = brokenReference(err);
      if (what) return missing(what, what === "group" ? parentUid : fields.defaultRoleUid);
      throw err;
    }
  }

  get(uid: string, freshness?: Freshness): Promise<IdentityProviderRow | undefined> {
    return getByUid(this.db, "identity_providers", uid, freshness);
  }

  /** Read-modify-write under a row lock; `change` may be async (it encrypts) and may throw. */
  async update(
    uid: string,
    change: (current: IdentityProviderRow) => Promise<IdentityProviderFields>,
    now: Date,
  ): Promise<WriteResult<IdentityProviderRow>> {
    let roleUid = "";
    let parentUid = "";
    try {
      const row = await updateByUid(this.db, "identity_providers", uid, async (current) => {
        const fields = await change(current);
        roleUid = fields.defaultRoleUid;
        parentUid = current.parent_uid;
        return { ...columns(fields), update_time: now };
      });
      return updated(row, "identity provider", uid);
    } catch (err) {
      const what = brokenReference(err);
      if (what) return missing(what, what === "group" ? parentUid : roleUid);
      throw err;
    }
  }

  delete(uid: string): Promise<DeleteResult> {
    return deleteByUid(this.db, "identity_providers", uid);
  }

  listQuery(filter: { uidp?: UIDPFilter; name: string }) {
    return () => {
      let q = applyUidpFilter(this.db.selectFrom("identity_providers"), filter.uidp);
      if (filter.name !== "") q = q.where("name", "=", filter.name);
      return q;
    };
  }
}
