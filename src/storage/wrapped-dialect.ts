// A dialect that is another one but for its driver: what the layers below Kysely (observed
// statements, ambient transactions) wrap.
import type { Dialect, Driver, Kysely } from "kysely";

export abstract class WrappedDialect implements Dialect {
  constructor(protected readonly inner: Dialect) {}
  createAdapter() {
    return this.inner.createAdapter();
  }
  createQueryCompiler() {
    return this.inner.createQueryCompiler();
  }
  createIntrospector(db: Kysely<any>) {
    return this.inner.createIntrospector(db);
  }
  abstract createDriver(): Driver;
}
