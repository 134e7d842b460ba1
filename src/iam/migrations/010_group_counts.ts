import { sql, type Kysely } from "kysely";

// Maintained counts of each group's children and descendants, so a List of a group's children or
// subtree answers its exact totalCount from one row instead of counting up to millions. Kept by
// statement-level triggers on groups (one upsert per statement, however many rows it wrote), in
// the same transaction as the change. Ancestors are updated in uid order, so concurrent inserts
// under one organization queue on its row instead of deadlocking.
export async function up(db: Kysely<any>): Promise<void> {
  // One statement per query: PGlite's query() runs a single statement.
  await sql`
    create table group_counts (
      uid text collate "C" primary key references groups (uid) on delete cascade,
      children bigint not null default 0 check (children >= 0),
      descendants bigint not null default 0 check (descendants >= children)
    )`.execute(db);
  await sql`
    insert into group_counts (uid, children, descendants)
    select g.uid,
      (select count(*) from groups c where c.parent_uid = g.uid),
      (select count(*) from groups d where d.uid > g.uid || '/' and d.uid < g.uid || '0')
    from groups g`.execute(db);
  // A UIDP's ancestors are its prefixes of 40 + 17k characters; its parent is the longest one.
  await sql`
    create function group_counts_after_insert() returns trigger language plpgsql as $$
    begin
      insert into group_counts as gc (uid, children, descendants)
      select ancestor, sum(is_parent), sum(is_ancestor) from (
        select left(n.uid, 40 + 17 * k) as ancestor, (k = (length(n.uid) - 40) / 17 - 1)::int as is_parent,
               1 as is_ancestor
        from new_groups n, generate_series(0, (length(n.uid) - 40) / 17 - 1) as k
        union all
        -- every new group gets its own row
        select n.uid, 0, 0 from new_groups n
      ) a
      group by ancestor
      order by ancestor
      on conflict (uid) do update
        set children = gc.children + excluded.children, descendants = gc.descendants + excluded.descendants;
      return null;
    end $$`.execute(db);
  await sql`
    create function group_counts_after_delete() returns trigger language plpgsql as $$
    begin
      update group_counts gc
      set children = gc.children - a.children, descendants = gc.descendants - a.descendants
      from (
        select left(o.uid, 40 + 17 * k) as ancestor,
               sum((k = (length(o.uid) - 40) / 17 - 1)::int) as children, count(*) as descendants
        from old_groups o, generate_series(0, (length(o.uid) - 40) / 17 - 1) as k
        group by 1
        order by 1
      ) a
      where gc.uid = a.ancestor;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger groups_counts_insert after insert on groups
      referencing new table as new_groups for each statement execute function group_counts_after_insert()`.execute(db);
  await sql`
    create trigger groups_counts_delete after delete on groups
      referencing old table as old_groups for each statement execute function group_counts_after_delete()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger groups_counts_delete on groups`.execute(db);
  await sql`drop trigger groups_counts_insert on groups`.execute(db);
  await sql`drop function group_counts_after_delete()`.execute(db);
  await sql`drop function group_counts_after_insert()`.execute(db);
  await sql`drop table group_counts`.execute(db);
}
