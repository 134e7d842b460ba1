// Reading the events a test caused: the newest event's sequence number before, the rows after.
import type { TestServer } from "./server.js";

/** The newest recorded event's `seq` ("0" when there is none). */
export async function lastEventSeq(server: Pick<TestServer, "db">): Promise<string> {
  const row = (await server.db
    .selectFrom("events")
    .select((eb: any) => eb.fn.max("seq").as("seq"))
    .executeTakeFirst()) as { seq: string | number | null } | undefined;
  return String(row?.seq ?? 0);
}
