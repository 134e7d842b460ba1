import { sql, type Kysely } from "kysely";

// The rest of IAM. Every child resource's parent_uid references its group (on delete restrict),
// so a group that still holds anything cannot be deleted; references between resources are
// foreign keys too. Uids are UIDPs whose last segment is the resource's own: the parent is
// always the uid minus its last segment, which the checks below pin down.
const UIDP = `'^[0-9a-f]{40}(/[0-9a-f]{16})*$'`;
const CHILD_UIDP = `'^[0-9a-f]{40}(/[0-9a-f]{16})+$'`;

/** parent_uid is the uid minus its last segment (null for a root-level uid). */
function parentCheck(nullable: boolean) {
  return nullable
    ? `check ((parent_uid is null and position('/' in uid) = 0)
        or (parent_uid is not null and uid = parent_uid || '/' || right(uid, 16)))`
    : `check (uid = parent_uid || '/' || right(uid, 16))`;
}

/**
 * A referenced uid is usable from the group `at` when it is root-level (a built-in role, a
 * human's identity) or its own group is `at` or an ancestor of `at`.
 */
function visibleFrom(ref: string, at: string) {
  return `check (
    position('/' in ${ref}) = 0
    or ${at} = left(${ref}, length(${ref}) - 17)
    or left(${at}, length(${ref}) - 16) = left(${ref}, length(${ref}) - 17) || '/'
  )`;
}

export async function up(db: Kysely<any>): Promise<void> {
  const ddl = `
    create table identities (
      uid text collate "C" primary key check (uid ~ ${UIDP}),
      parent_uid text collate "C" references groups (uid) on delete restrict,
      name text collate "C" not null check (name ~ '^[a-z0-9 ._-]{1,}$'),
      description text not null default '',
      company text not null default '',
      email text not null default '',
      email_unverified text not null default '',
      -- which oneof of Identity.relationship is set (RelationshipType) and its canonical JSON
      relationship_type integer not null check (relationship_type between 1 and 4),
      relationship jsonb not null,
      -- exact claim_match issuer/subject, for LookupIdentity and the token exchange
      issuer text,
      subject text,
      last_seen_time timestamptz not null,
      create_time timestamptz not null,
      update_time timestamptz not null,
      ${parentCheck(true)}
    );
    create index identities_parent_uid on identities (parent_uid, uid);
    create index identities_name_uid on identities (name, uid);
    create index identities_create_time_uid on identities (create_time, uid);
    create index identities_issuer_subject on identities (issuer, subject);

    create table roles (
      uid text collate "C" primary key check (uid ~ ${UIDP}),
      -- null for built-in roles, which belong to no group
      parent_uid text collate "C" references groups (uid) on delete restrict,
      name text collate "C" not null check (name ~ '^[a-z0-9 ._-]{1,}$'),
      description text not null default '',
      capabilities integer[] not null check (cardinality(capabilities) > 0),
      create_time timestamptz not null,
      update_time timestamptz not null,
      ${parentCheck(true)}
    );
    create index roles_parent_uid on roles (parent_uid, uid);
    create index roles_name_uid on roles (name, uid);
    create index roles_create_time_uid on roles (create_time, uid);

    create table role_bindings (
      uid text collate "C" primary key check (uid ~ ${CHILD_UIDP}),
      parent_uid text collate "C" not null references groups (uid) on delete restrict,
      identity_uid text collate "C" not null references identities (uid) on delete restrict,
      role_uid text collate "C" not null references roles (uid) on delete restrict,
      create_time timestamptz not null,
      update_time timestamptz not null,
      unique (parent_uid, identity_uid, role_uid),
      ${parentCheck(false)},
      ${visibleFrom("role_uid", "parent_uid")},
      ${visibleFrom("identity_uid", "parent_uid")}
    );
    create index role_bindings_parent_uid on role_bindings (parent_uid, uid);
    create index role_bindings_identity_uid on role_bindings (identity_uid);
    create index role_bindings_role_uid on role_bindings (role_uid);
    create index role_bindings_create_time_uid on role_bindings (create_time, uid);

    create table identity_providers (
      uid text collate "C" primary key check (uid ~ ${CHILD_UIDP}),
      parent_uid text collate "C" not null references groups (uid) on delete restrict,
      name text collate "C" not null check (name ~ '^[a-z0-9 ._-]{1,}$'),
      description text not null default '',
      default_role_uid text collate "C" not null references roles (uid) on delete restrict,
      -- IdentityProvider.OIDC as canonical JSON, without the client secret
      oidc jsonb,
      -- the OIDC client secret, encrypted (AES-256-GCM JWE) with a server key; never returned
      client_secret_encrypted text,
      create_time timestamptz not null,
      update_time timestamptz not null,
      ${parentCheck(false)},
      ${visibleFrom("default_role_uid", "parent_uid")}
    );
    create index identity_providers_parent_uid on identity_providers (parent_uid, uid);
    create index identity_providers_name_uid on identity_providers (name, uid);
    create index identity_providers_create_time_uid on identity_providers (create_time, uid);

    -- One per group: its uid is the group's uid.
    create table account_associations (
      uid text collate "C" primary key references groups (uid) on delete restrict,
      parent_uid text collate "C",
      name text collate "C" not null check (name ~ '^[a-z0-9 ._-]{1,}$'),
      description text not null default '',
      -- the provider blocks (amazon, google, azure, github, chainguard) as canonical JSON
      providers jsonb not null default '{}'::jsonb,
      create_time timestamptz not null,
      update_time timestamptz not null,
      ${parentCheck(true)}
    );
    create index account_associations_parent_uid on account_associations (parent_uid, uid);
    create index account_associations_name_uid on account_associations (name, uid);

    create table group_invites (
      uid text collate "C" primary key check (uid ~ ${CHILD_UIDP}),
      parent_uid text collate "C" not null references groups (uid) on delete restrict,
      role_uid text collate "C" not null references roles (uid) on delete restrict,
      email text not null default '',
      single_use boolean not null default false,
      -- the public half of the invite code; the secret half is stored only as a SHA-256 hash
      key_id text collate "C" not null unique,
      code_hash bytea not null,
      expiration_time timestamptz not null,
      used_time timestamptz,
      create_time timestamptz not null,
      check (expiration_time > create_time),
      ${parentCheck(false)},
      ${visibleFrom("role_uid", "parent_uid")}
    );
    create index group_invites_parent_uid on group_invites (parent_uid, uid);
    create index group_invites_create_time_uid on group_invites (create_time, uid);
    create index group_invites_role_uid on group_invites (role_uid);
  `;
  // One statement per query: PGlite's query() runs a single statement.
  for (const statement of ddl
    .split(/;\s*\n/)
    .map((s) => s.trim())
    .filter(Boolean)) {
    await sql.raw(statement).execute(db);
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    "group_invites",
    "account_associations",
    "identity_providers",
    "role_bindings",
    "roles",
    "identities",
  ]) {
    await sql.raw(`drop table ${table}`).execute(db);
  }
}
